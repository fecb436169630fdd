import type { A2rlEvent, EventType } from './catalog.js';
import { EVENT_CATALOG } from './catalog.js';

/**
 * Upcasting hook: stored events are never rewritten; when a payload's shape changes, bump its
 * version in EVENT_CATALOG and register a step from the old version here. Reading applies the
 * steps in order, so every consumer (projections, reports, replay) sees only the current shape.
 */
export type Upcaster = (data: Record<string, unknown>) => Record<string, unknown>;

const steps = new Map<string, Upcaster>();
const key = (type: string, from: number) => `${type}@${from}`;

/** Registers the step that turns `type` at schema version `from` into version `from + 1`. */
export function registerUpcaster(type: EventType, from: number, step: Upcaster): void {
  steps.set(key(type, from), step);
}

export function clearUpcasters(): void {
  steps.clear();
}

/** Brings an event to the current schema version (`current` defaults to the catalog's). */
export function upcast(event: A2rlEvent, current: number = EVENT_CATALOG[event.type]?.version ?? event.schemaVersion): A2rlEvent {
  let version = event.schemaVersion;
  if (version >= current) return event;
  let data = event.data as unknown as Record<string, unknown>;
  while (version < current) {
    const step = steps.get(key(event.type, version));
    if (!step) throw new Error(`no upcaster for ${event.type} from schema version ${version} to ${version + 1}`);
    data = step(data);
    version += 1;
  }
  return { ...event, schemaVersion: version, data } as A2rlEvent;
}
