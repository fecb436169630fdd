/**
 * When what an event records happened: an instrumentation fact's `observedAt` (the observer's time),
 * else the envelope's `occurredAt` (the append time, which is when lifecycle events happen). Metrics,
 * timelines and budget accounting use this, so a ledger that fell behind never shifts them.
 */
export function eventTime(event: { occurredAt: string; data?: unknown }): string {
  const observed = (event.data as { observedAt?: unknown } | undefined)?.observedAt;
  return typeof observed === 'string' ? observed : event.occurredAt;
}
