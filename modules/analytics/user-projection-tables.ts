import { Inject, Injectable, Logger, type OnApplicationShutdown } from '@nestjs/common';
import { EVENT_STORE } from '../ledger/tokens.js';
import type { EventStore } from '../ledger/event-store.port.js';
import { SETTINGS, type Settings } from '../settings/settings.port.js';
import type { TableData } from './table-schemas.js';
import { UserProjections, userProjectionsDir } from './user-projections/user-projections.js';

/** How often `a2rl serve` brings the user projections up to date. */
const FOLLOW_EVERY_MS = 2000;

/**
 * The user projections in the app: their tables for GET /query, and kept live by `a2rl serve`
 * (start()): every 2 s each registered projection folds the events appended since, in its own
 * thread. A failing one is logged once per distinct error and keeps its last good table.
 */
@Injectable()
export class UserProjectionTables implements OnApplicationShutdown {
  private readonly logger = new Logger('user-projections');
  private readonly projections: UserProjections;
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private readonly reported = new Map<string, string>();

  constructor(@Inject(SETTINGS) settings: Settings, @Inject(EVENT_STORE) store: EventStore) {
    this.projections = new UserProjections(userProjectionsDir(settings.home), store);
  }

  async tables(): Promise<TableData[]> {
    return this.projections.tables();
  }

  /** Follows the ledger until shutdown (a2rl serve). */
  async start(): Promise<void> {
    if (this.timer) return;
    await this.tick();
    this.timer = setInterval(() => void this.tick(), FOLLOW_EVERY_MS);
  }

  async onApplicationShutdown(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.running;
  }

  private tick(): Promise<void> {
    if (this.running) return this.running;
    this.running = (async () => {
      try {
        for (const o of await this.projections.catchUp()) {
          if (o.ok) this.reported.delete(o.name);
          else if (this.reported.get(o.name) !== o.error) {
            this.reported.set(o.name, o.error!);
            this.logger.warn(o.error!);
          }
        }
      } catch (err) {
        this.logger.warn(`user projections: ${(err as Error).message.split('\n')[0]}`);
      } finally {
        this.running = null;
      }
    })();
    return this.running;
  }
}
