/**
 * The run's spend limits as the gateway enforces them (`--max-llm-tokens`, `--max-llm-cost`): a call
 * is admitted with a reservation of the most it may spend, held until its usage is known, so calls
 * in flight count against the limits as much as finished ones. Pure bookkeeping, no I/O.
 *
 * A call **goes** when the run's spend, the reservations in flight and its own reservation fit every
 * limit; it **waits** (first come, first served) while other calls are in flight; with none in flight
 * it goes **alone** even when its reservation is over what remains (so a small cap still lets calls
 * through, one at a time); it is **refused** once the run's spend has reached a limit.
 *
 * Bound: while every call spends at most its reservation, the run ends at most at
 * `max - 1 + u`, u being the spend of the one call that went alone over the remaining budget (a call
 * goes alone only while the spend is under the limit, and the next call is then refused).
 */
export type SpendLimit = 'llmTokens' | 'llmCostUsd';

export interface SpendLimits {
  maxTokens?: number | null;
  maxCostUsd?: number | null;
}

/** The most a call may spend: tokens (input estimate + output maximum) and their cost (null: unpriced). */
export interface Reservation {
  tokens: number;
  costUsd: number | null;
}

export type Admission = { go: true; alone: boolean } | { go: false; limit: SpendLimit; value: number; max: number };

interface Waiter {
  reservation: Reservation;
  resolve: (admission: Admission | null) => void;
}

export class SpendGate {
  /** What finished calls spent; `unpriced` counts those with tokens but no known cost. */
  readonly spent = { tokens: 0, costUsd: 0, unpriced: 0 };
  /** What the calls in flight hold. */
  readonly held = { tokens: 0, costUsd: 0, calls: 0 };
  private readonly queue: Waiter[] = [];

  constructor(
    private readonly limits: SpendLimits = {},
    before?: { tokens: number; costUsd: number },
  ) {
    if (before) Object.assign(this.spent, { tokens: before.tokens, costUsd: before.costUsd });
  }

  /**
   * Resolves once the call may go (its reservation is then held: `settle` it) or is refused. `cancel`
   * takes a call that is still waiting out of the queue: its admission resolves null.
   */
  admit(reservation: Reservation): { admission: Promise<Admission | null>; cancel: () => void } {
    let waiter!: Waiter;
    const admission = new Promise<Admission | null>((resolve) => (waiter = { reservation, resolve }));
    this.queue.push(waiter);
    this.drain();
    return { admission, cancel: () => this.remove(waiter) };
  }

  /** A held call ended: its reservation is released and what it spent counted. */
  settle(reservation: Reservation, spent: { tokens: number; costUsd: number | null }): void {
    this.held.tokens -= reservation.tokens;
    this.held.costUsd -= reservation.costUsd ?? 0;
    this.held.calls -= 1;
    this.spend(spent);
    this.drain();
  }

  /** Spend of a call that held no reservation (not billable, or never admitted). */
  spend(spent: { tokens: number; costUsd: number | null }): void {
    this.spent.tokens += spent.tokens;
    if (spent.costUsd !== null) this.spent.costUsd += spent.costUsd;
    else if (spent.tokens > 0) this.spent.unpriced += 1;
  }

  /** The first limit the run's spend has reached, with its numbers; null while under every limit. */
  reached(): { limit: SpendLimit; value: number; max: number } | null {
    const { maxTokens, maxCostUsd } = this.limits;
    if (maxTokens != null && this.spent.tokens >= maxTokens) return { limit: 'llmTokens', value: this.spent.tokens, max: maxTokens };
    if (maxCostUsd != null && this.spent.costUsd >= maxCostUsd) return { limit: 'llmCostUsd', value: roundUsd(this.spent.costUsd), max: maxCostUsd };
    return null;
  }

  /** Decides the waiting calls in arrival order, stopping at the first that must still wait. */
  private drain(): void {
    while (this.queue.length > 0) {
      const head = this.queue[0];
      const admission = this.decide(head.reservation);
      if (admission === null) return;
      this.queue.shift();
      if (admission.go) this.hold(head.reservation);
      head.resolve(admission);
    }
  }

  /** go, refused, or null to wait. */
  private decide(r: Reservation): Admission | null {
    const reached = this.reached();
    if (reached) return { go: false, ...reached };
    if (this.fits(r)) return { go: true, alone: false };
    return this.held.calls === 0 ? { go: true, alone: true } : null;
  }

  private fits(r: Reservation): boolean {
    const { maxTokens, maxCostUsd } = this.limits;
    if (maxTokens != null && this.spent.tokens + this.held.tokens + r.tokens > maxTokens) return false;
    // A model without a price reserves no cost: the cost limit counts only what it can price.
    if (maxCostUsd != null && this.spent.costUsd + this.held.costUsd + (r.costUsd ?? 0) > maxCostUsd) return false;
    return true;
  }

  private hold(r: Reservation): void {
    this.held.tokens += r.tokens;
    this.held.costUsd += r.costUsd ?? 0;
    this.held.calls += 1;
  }

  private remove(waiter: Waiter): void {
    const at = this.queue.indexOf(waiter);
    if (at < 0) return;
    this.queue.splice(at, 1);
    waiter.resolve(null);
    this.drain(); // the head may have changed
  }
}

export const roundUsd = (usd: number) => Math.round(usd * 1e10) / 1e10;
