import { Inject, Injectable, Logger, type OnModuleDestroy } from '@nestjs/common';
import type { DataSource } from 'typeorm';
import type { EventStore, Subscription } from '../ledger/event-store.port.js';
import { runIdOfStream } from '../ledger/events/ids.js';
import { EVENT_STORE } from '../ledger/tokens.js';
import { ProjectionCheckpoint } from '../readmodels/projection-checkpoint.entity.js';
import { ProjectionRunnerService, READ_MODELS } from '../readmodels/readmodels.module.js';

/** Told the id of each run that had events appended; `failed` when the ledger's subscription broke, `closed` when the server shuts down. */
export interface FeedWatcher {
  changed(runId: string): void;
  failed(error: unknown): void;
  closed(): void;
}

/** The projection whose checkpoint marks "now" in the all-stream (the feed starts there). */
const START_AT = 'run-list';

/**
 * One catch-up subscription to the ledger's run streams per server process, shared by every live
 * page: it only says which run changed; each watcher reads that run's new events from the store
 * by stream revision (so nothing is missed or reordered, however the wake-ups coalesce). Opened for
 * the first watcher, closed after the last one leaves.
 */
@Injectable()
export class LedgerFeed implements OnModuleDestroy {
  private readonly logger = new Logger('dashboard');
  private readonly watchers = new Set<FeedWatcher>();
  private open: Promise<Subscription> | null = null;

  constructor(
    @Inject(EVENT_STORE) private readonly store: EventStore,
    @Inject(READ_MODELS) private readonly readModels: DataSource,
    private readonly projections: ProjectionRunnerService,
  ) {}

  /**
   * Adds a watcher; resolves once the feed follows the ledger, so that any event appended after it
   * resolves is reported. Returns the function that removes the watcher.
   */
  async watch(watcher: FeedWatcher): Promise<() => void> {
    this.watchers.add(watcher);
    try {
      await (this.open ??= this.subscribe());
    } catch (error) {
      this.watchers.delete(watcher);
      throw error;
    }
    return () => {
      this.watchers.delete(watcher);
      if (!this.watchers.size) void this.close();
    };
  }

  /** Ends every live stream first, so that the HTTP server can close its (then idle) connections. */
  async onModuleDestroy(): Promise<void> {
    const watchers = [...this.watchers];
    this.watchers.clear();
    for (const w of watchers) w.closed();
    await this.close();
  }

  /** Starts after the run-list projection's checkpoint, caught up first: the recent end of the ledger, not its beginning. */
  private async subscribe(): Promise<Subscription> {
    try {
      await this.projections.catchUp(START_AT);
      const checkpoint = await this.readModels.getRepository(ProjectionCheckpoint).findOneBy({ name: START_AT });
      const subscription = this.store.subscribeAll({ after: checkpoint?.position ?? null });
      void this.pump(subscription);
      return subscription;
    } catch (error) {
      this.open = null;
      throw error;
    }
  }

  private async pump(subscription: Subscription): Promise<void> {
    try {
      for await (const recorded of subscription) {
        const runId = runIdOfStream(recorded.stream);
        if (runId !== null) for (const w of [...this.watchers]) w.changed(runId);
      }
    } catch (error) {
      this.logger.warn(`live feed stopped: ${error instanceof Error ? error.message : String(error)}`);
      for (const w of [...this.watchers]) w.failed(error);
      this.watchers.clear();
      this.open = null;
    }
  }

  private async close(): Promise<void> {
    const open = this.open;
    this.open = null;
    if (open) await (await open.catch(() => null))?.close();
  }
}
