/**
 * The paper's split: every DeepSearchQA item, in file order, shuffled as Python's
 * `random.Random(42).shuffle(items)` does; the first 100 are visible, the next 200 private.
 *
 * To reproduce CPython's order exactly this is CPython's generator, written from its algorithm:
 * MT19937 (Matsumoto & Nishimura) seeded like `random.seed(int)` (`init_by_array` over the
 * seed's 32-bit words), `getrandbits(k)` = the top k bits of one 32-bit output (k ≤ 32),
 * `_randbelow(n)` = rejection sampling on `getrandbits(n.bit_length())`, and `shuffle` =
 * Fisher–Yates from the last index down (`j = _randbelow(i + 1)`).
 */
export const SPLIT_SEED = 42;
export const VISIBLE_COUNT = 100;
export const PRIVATE_COUNT = 200;

const N = 624;
const M = 397;

/** CPython's Mersenne Twister (only what `shuffle` needs). */
export class PythonRandom {
  private readonly mt = new Uint32Array(N);
  private index = N + 1;

  /** `random.Random(seed)` for a non-negative safe integer seed. */
  constructor(seed: number) {
    if (!Number.isSafeInteger(seed) || seed < 0) throw new RangeError(`seed must be a non-negative safe integer, got ${seed}`);
    const key: number[] = [];
    for (let rest = seed; rest > 0; rest = Math.floor(rest / 2 ** 32)) key.push(rest % 2 ** 32);
    this.initByArray(key.length > 0 ? key : [0]);
  }

  private initGenrand(s: number): void {
    this.mt[0] = s >>> 0;
    for (let i = 1; i < N; i++) {
      const prev = this.mt[i - 1]! ^ (this.mt[i - 1]! >>> 30);
      this.mt[i] = (Math.imul(1812433253, prev) + i) >>> 0;
    }
    this.index = N;
  }

  private initByArray(key: readonly number[]): void {
    this.initGenrand(19650218);
    const mt = this.mt;
    let i = 1;
    let j = 0;
    for (let k = Math.max(N, key.length); k > 0; k--) {
      const prev = mt[i - 1]! ^ (mt[i - 1]! >>> 30);
      mt[i] = ((mt[i]! ^ Math.imul(prev, 1664525)) + key[j]! + j) >>> 0;
      i++;
      j++;
      if (i >= N) { mt[0] = mt[N - 1]!; i = 1; }
      if (j >= key.length) j = 0;
    }
    for (let k = N - 1; k > 0; k--) {
      const prev = mt[i - 1]! ^ (mt[i - 1]! >>> 30);
      mt[i] = ((mt[i]! ^ Math.imul(prev, 1566083941)) - i) >>> 0;
      i++;
      if (i >= N) { mt[0] = mt[N - 1]!; i = 1; }
    }
    mt[0] = 0x80000000;
  }

  /** The next 32-bit output (`genrand_uint32`). */
  nextUint32(): number {
    const mt = this.mt;
    if (this.index >= N) {
      for (let k = 0; k < N; k++) {
        const y = (mt[k]! & 0x80000000) | (mt[(k + 1) % N]! & 0x7fffffff);
        mt[k] = mt[(k + M) % N]! ^ (y >>> 1) ^ (y & 1 ? 0x9908b0df : 0);
      }
      this.index = 0;
    }
    let y = mt[this.index++]!;
    y ^= y >>> 11;
    y ^= (y << 7) & 0x9d2c5680;
    y ^= (y << 15) & 0xefc60000;
    y ^= y >>> 18;
    return y >>> 0;
  }

  /** `getrandbits(k)` for 0 ≤ k ≤ 32. */
  getrandbits(k: number): number {
    if (!Number.isInteger(k) || k < 0 || k > 32) throw new RangeError(`getrandbits supports 0..32 bits here, got ${k}`);
    return k === 0 ? 0 : this.nextUint32() >>> (32 - k);
  }

  /** `_randbelow(n)`: uniform in [0, n) by rejection on n.bit_length() bits. */
  randbelow(n: number): number {
    const k = n === 0 ? 0 : 32 - Math.clz32(n);
    let r = this.getrandbits(k);
    while (r >= n) r = this.getrandbits(k);
    return r;
  }

  /** `shuffle(x)` in place, exactly as CPython orders it. */
  shuffle<T>(items: T[]): T[] {
    for (let i = items.length - 1; i > 0; i--) {
      const j = this.randbelow(i + 1);
      [items[i], items[j]] = [items[j]!, items[i]!];
    }
    return items;
  }
}

/** The visible and private items of the paper's split (input order = the dataset file's order). */
export function splitItems<T>(items: readonly T[]): { visible: T[]; private: T[] } {
  const shuffled = new PythonRandom(SPLIT_SEED).shuffle([...items]);
  return { visible: shuffled.slice(0, VISIBLE_COUNT), private: shuffled.slice(VISIBLE_COUNT, VISIBLE_COUNT + PRIVATE_COUNT) };
}
