/**
 * A fixed-size set of strings that answers "certainly absent" or "maybe present" (a Bloom filter):
 * no false negatives, and false positives grow with the number of keys added. A rebuild keeps one
 * per projection to skip looking up rows it has not written yet; a false positive costs only a
 * lookup that finds nothing, and memory stays the same however many keys the ledger holds.
 */
export class KeyFilter {
  private readonly bits: Uint32Array;
  private readonly mask: number;

  /** `log2Bits` sets the size: 2^23 bits (1 MiB) keep false positives under 0.01% up to 100k keys, about 3% at 1M. */
  constructor(log2Bits = 23, private readonly hashes = 3) {
    if (!Number.isInteger(log2Bits) || log2Bits < 5 || log2Bits > 31) throw new RangeError(`log2Bits must be an integer from 5 to 31, got ${log2Bits}`);
    this.bits = new Uint32Array(2 ** (log2Bits - 5));
    this.mask = 2 ** log2Bits - 1;
  }

  add(key: string): void {
    const h1 = fnv1a(key);
    const h2 = step(h1);
    for (let i = 0; i < this.hashes; i++) {
      const position = (h1 + Math.imul(i, h2)) & this.mask;
      this.bits[position >>> 5] |= 1 << (position & 31);
    }
  }

  /** False when `key` was certainly never added. */
  mightHave(key: string): boolean {
    // The key's bit positions by double hashing, written out in both methods: a rebuild asks once
    // per event and key, and a closure or a returned pair per call was garbage to collect.
    const h1 = fnv1a(key);
    const h2 = step(h1);
    for (let i = 0; i < this.hashes; i++) {
      const position = (h1 + Math.imul(i, h2)) & this.mask;
      if ((this.bits[position >>> 5] & (1 << (position & 31))) === 0) return false;
    }
    return true;
  }
}

/** A 32-bit FNV-1a hash of the key's UTF-16 code units. */
function fnv1a(key: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) h = Math.imul(h ^ key.charCodeAt(i), 0x01000193);
  return h >>> 0;
}

/** The second hash: derived from the first by murmur3's finaliser, made odd so it is never zero. */
function step(h1: number): number {
  let g = h1 ^ 0x9e3779b9;
  g = Math.imul(g ^ (g >>> 16), 0x85ebca6b);
  g = Math.imul(g ^ (g >>> 13), 0xc2b2ae35);
  g ^= g >>> 16;
  return (g | 1) >>> 0;
}
