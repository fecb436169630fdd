/**
 * Lets a key through at most once per window (per process): how access records are kept from
 * flooding the ledger. Memory is bounded: past `maxKeys` keys seen within the window, further new
 * keys are not let through until old ones age out (a scanner rotating source addresses gets no
 * more records, and no more memory).
 */
export class Coalescer {
  private readonly last = new Map<string, number>();

  constructor(
    readonly windowMs: number,
    private readonly maxKeys = 10_000,
  ) {}

  /** True when `key` was not let through in the last window; notes it as let through now. */
  admit(key: string, nowMs: number): boolean {
    const seen = this.last.get(key);
    if (seen !== undefined && nowMs - seen < this.windowMs) return false;
    if (seen === undefined && this.last.size >= this.maxKeys) this.prune(nowMs);
    if (seen === undefined && this.last.size >= this.maxKeys) return false;
    this.last.delete(key); // re-inserted last: the map stays in order of admission
    this.last.set(key, nowMs);
    return true;
  }

  private prune(nowMs: number): void {
    for (const [key, at] of this.last) {
      if (nowMs - at < this.windowMs) break;
      this.last.delete(key);
    }
  }
}
