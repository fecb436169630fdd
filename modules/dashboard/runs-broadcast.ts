import { Inject, Injectable, Optional } from '@nestjs/common';
import { Observable, type Subscriber } from 'rxjs';
import { RunSource } from '../query/run-source.js';
import { runSummary } from '../query/run-summary.js';
import { liveRun, runsWithHarnessGone } from '../runs/run-liveness.js';
import { RUN_LOCKS, type RunLocks } from '../ledger/run-locks.port.js';
import { CampaignFeed } from './campaign-feed.js';
import { LedgerFeed } from './ledger-feed.js';
import type { SseMessage } from './run-stream.js';

/** Changed runs are sent at most this often (so at most ~4 updates a second per run). */
const FLUSH_MS = 250;

/**
 * GET /live: `run` with the run's GET /runs item whenever a run changed (coalesced), `campaign`
 * with {campaignId} whenever a campaign changed. One computation per change for every client.
 */
@Injectable()
export class RunsBroadcast {
  private readonly clients = new Set<Subscriber<SseMessage>>();
  private readonly dirty = new Set<string>();
  private timer: NodeJS.Timeout | undefined;
  private flushing = false;
  private stops: Array<() => void> = [];
  private opening: Promise<void> | null = null;
  /** Bumped on every close. */
  private round = 0;

  constructor(
    private readonly runs: RunSource,
    private readonly ledgerFeed: LedgerFeed,
    private readonly campaignFeed: CampaignFeed,
    @Optional() @Inject(RUN_LOCKS) private readonly locks?: RunLocks,
  ) {}

  stream(): Observable<SseMessage> {
    return new Observable<SseMessage>((subscriber) => {
      this.clients.add(subscriber);
      (this.opening ??= this.open()).catch((error: unknown) => subscriber.error(error));
      return () => {
        this.clients.delete(subscriber);
        if (!this.clients.size) this.close();
      };
    });
  }

  private async open(): Promise<void> {
    const round = this.round;
    // Closed while the feeds were opening: stop what opened.
    const keep = (stop: () => void) => (this.round === round ? this.stops.push(stop) : stop());
    try {
      const closed = () => this.end();
      keep(await this.ledgerFeed.watch({ changed: (runId) => this.touch(runId), failed: (error) => this.fail(error), closed }));
      keep(await this.campaignFeed.watch((campaignId) => this.send({ type: 'campaign', data: { campaignId } }), closed));
    } catch (error) {
      this.close();
      throw error;
    }
  }

  private touch(runId: string): void {
    this.dirty.add(runId);
    this.timer ??= setTimeout(() => void this.flush(), FLUSH_MS);
  }

  private async flush(): Promise<void> {
    if (this.flushing) return;
    this.flushing = true;
    try {
      const ids = [...this.dirty];
      this.dirty.clear();
      const gone = runsWithHarnessGone(this.locks);
      for (const runId of ids) {
        const run = await this.runs.run(runId);
        if (run) this.send({ type: 'run', id: runId, data: runSummary(liveRun(run, gone)) });
      }
    } catch (error) {
      this.fail(error);
    } finally {
      this.flushing = false;
      this.timer = undefined;
      if (this.dirty.size && this.clients.size) this.timer = setTimeout(() => void this.flush(), FLUSH_MS);
    }
  }

  private send(m: SseMessage): void {
    for (const client of [...this.clients]) client.next(m);
  }

  /** Every stream ends with the failure (an EventSource reconnects, which opens the feeds again). */
  private fail(error: unknown): void {
    const clients = [...this.clients];
    this.clients.clear();
    this.close();
    for (const client of clients) client.error(error);
  }

  /** The server shuts down: every stream ends. */
  private end(): void {
    const clients = [...this.clients];
    this.clients.clear();
    this.close();
    for (const client of clients) client.complete();
  }

  private close(): void {
    this.round += 1;
    for (const stop of this.stops.splice(0)) stop();
    clearTimeout(this.timer);
    this.timer = undefined;
    this.dirty.clear();
    this.opening = null;
  }
}
