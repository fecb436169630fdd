import { Inject, Injectable, Logger, type OnModuleDestroy } from '@nestjs/common';
import type { EventStore } from '../ledger/event-store.port.js';
import { EVENT_STORE } from '../ledger/tokens.js';

/** How often the campaign streams are read again while someone watches (other processes append to them). */
const POLL_MS = 1000;

/**
 * Which campaigns changed: one poller per server process over the all-stream's campaign category
 * (subscribeAll covers run streams only), from its end when the first watcher came. Stops when the
 * last watcher leaves.
 */
@Injectable()
export class CampaignFeed implements OnModuleDestroy {
  private readonly logger = new Logger('dashboard');
  private readonly watchers = new Map<(campaignId: string) => void, () => void>();
  private position: string | null = null;
  private started: Promise<void> | null = null;
  private timer: NodeJS.Timeout | undefined;
  /** Bumped on every stop, so that a poll of a stopped round neither reports nor reschedules. */
  private round = 0;

  constructor(@Inject(EVENT_STORE) private readonly store: EventStore) {}

  /**
   * Calls `changed(campaignId)` for every campaign whose stream grows from now on, and `closed` when
   * the server shuts down; returns the function that stops it.
   */
  async watch(changed: (campaignId: string) => void, closed: () => void = () => undefined): Promise<() => void> {
    this.watchers.set(changed, closed);
    try {
      await (this.started ??= this.start());
    } catch (error) {
      this.watchers.delete(changed);
      throw error;
    }
    return () => {
      this.watchers.delete(changed);
      if (!this.watchers.size) this.stop();
    };
  }

  onModuleDestroy(): void {
    const closers = [...this.watchers.values()];
    this.watchers.clear();
    this.stop();
    for (const closed of closers) closed();
  }

  private async start(): Promise<void> {
    try {
      this.position = null;
      await this.read(); // to the end: what is there now is not news
      this.schedule();
    } catch (error) {
      this.started = null;
      throw error;
    }
  }

  private schedule(): void {
    const round = this.round;
    this.timer = setTimeout(() => void this.poll(round), POLL_MS);
    this.timer.unref();
  }

  private async poll(round: number): Promise<void> {
    try {
      const changed = await this.read();
      if (round !== this.round) return;
      for (const id of changed) for (const w of [...this.watchers.keys()]) w(id);
    } catch (error) {
      this.logger.warn(`reading campaigns failed: ${error instanceof Error ? error.message : String(error)}`);
    }
    if (round === this.round) this.schedule();
  }

  /** The campaigns with events after the position, which moves to the end. */
  private async read(): Promise<Set<string>> {
    const changed = new Set<string>();
    for await (const recorded of this.store.readAll({ category: 'campaign', after: this.position })) {
      changed.add(recorded.event.runId);
      this.position = recorded.position;
    }
    return changed;
  }

  private stop(): void {
    this.round += 1;
    clearTimeout(this.timer);
    this.timer = undefined;
    this.started = null;
  }
}
