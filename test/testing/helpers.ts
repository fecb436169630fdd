import { createHash } from 'node:crypto';

// The small helpers every spec used to write for itself, once: one signature each.

/** sha256 of text or bytes, hex. */
export const sha = (body: string | Buffer | Uint8Array): string => createHash('sha256').update(body).digest('hex');

/** The ISO time `seconds` after 2026-01-01T00:00:00Z (fractions allowed): event times that read in order. */
export const at = (seconds: number): string => new Date(Date.UTC(2026, 0, 1) + Math.round(seconds * 1000)).toISOString();

/**
 * Waits until `check` returns something other than undefined, null or false (sync or async), and
 * returns it. Condition-based: the cap is not a timing expectation, only how long to wait before
 * failing with `what` (a function when it should describe the state at that moment, e.g. a process's
 * output) instead of hanging until jest's own timeout; keep it generous. Polls every 10 ms at first,
 * backing off to every 250 ms, so a check that spawns a process does not crowd the machine.
 */
export async function until<T>(what: string | (() => string), check: () => T | undefined | null | false | Promise<T | undefined | null | false>, capMs = 60_000): Promise<T> {
  const deadline = Date.now() + capMs;
  for (let pause = 10; ; pause = Math.min(pause * 2, 250)) {
    const found = await check();
    if (found !== undefined && found !== null && found !== false) return found;
    if (Date.now() > deadline) throw new Error(`gave up after ${capMs} ms waiting for ${typeof what === 'function' ? what() : what}`);
    await new Promise((resolve) => setTimeout(resolve, pause));
  }
}
