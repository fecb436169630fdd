import type { EventData, EventType } from './events/catalog.js';

/** Records one event of the current run (validated, numbered and made durable by the LedgerService). */
export type Recorder = <T extends EventType>(type: T, data: EventData<T>) => Promise<unknown>;
