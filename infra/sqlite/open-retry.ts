/** How long an opener that lost a race for a fresh SQLite file keeps trying (a busy machine is slow). */
export const OPEN_RETRY_BUDGET_MS = 30_000;

/** "database is locked" (SQLITE_BUSY*), as better-sqlite3 and TypeORM report it. */
export function isLocked(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && code.startsWith('SQLITE_BUSY')) return true;
  const message = error instanceof Error ? error.message : String(error);
  return /database is locked|SQLITE_BUSY/i.test(message);
}

/**
 * Runs `open` again, after a jittered backoff, while it fails with an error `lostRace` accepts, for up
 * to `budgetMs`. Two processes opening one fresh file at once (a scheduler and a worker) race on the
 * switch to WAL, which needs an exclusive lock: SQLite answers "database is locked" at once, without
 * waiting out the busy timeout, where waiting could deadlock. The loser only has to open again. The
 * jitter keeps losers from colliding again in step. `open` cleans up after its own failure.
 */
export async function openWhileLocked<T>(open: () => Promise<T>, lostRace: (error: unknown) => boolean = isLocked, budgetMs = OPEN_RETRY_BUDGET_MS): Promise<T> {
  const deadline = Date.now() + budgetMs;
  for (let attempt = 1; ; attempt++) {
    try {
      return await open();
    } catch (error) {
      if (Date.now() >= deadline || !lostRace(error)) throw error;
      const backoffMs = Math.min(50 * 2 ** attempt, 1000) * (0.5 + Math.random());
      await new Promise((resolve) => setTimeout(resolve, backoffMs));
    }
  }
}
