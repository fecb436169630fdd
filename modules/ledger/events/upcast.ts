import type { A2rlEvent, EventType } from './catalog.js';
import { EVENT_CATALOG } from './catalog.js';

/**
 * Upcasting hook: stored events are never rewritten; when a payload's shape changes, bump its
 * version in EVENT_CATALOG and register a step from the old version here. Reading applies the
 * steps in order, so every consumer (projections, reports, replay) sees only the current shape.
 * A step sees the payload and the envelope it came in (e.g. to take a time from `occurredAt`).
 */
export type Upcaster = (data: Record<string, unknown>, envelope: Omit<A2rlEvent, 'data'>) => Record<string, unknown>;

const steps = new Map<string, Upcaster>();
const key = (type: string, from: number) => `${type}@${from}`;

/** Registers the step that turns `type` at schema version `from` into version `from + 1`. */
export function registerUpcaster(type: EventType, from: number, step: Upcaster): void {
  steps.set(key(type, from), step);
}

/** Removes every registered step, then puts back the catalog's own (tests that register their own). */
export function clearUpcasters(): void {
  steps.clear();
  registerBuiltInUpcasters();
}

/** Brings an event to the current schema version (`current` defaults to the catalog's). */
export function upcast(event: A2rlEvent, current: number = EVENT_CATALOG[event.type]?.version ?? event.schemaVersion): A2rlEvent {
  let version = event.schemaVersion;
  if (version >= current) return event;
  let data = event.data as unknown as Record<string, unknown>;
  const { data: _payload, ...envelope } = event;
  while (version < current) {
    const step = steps.get(key(event.type, version));
    if (!step) throw new Error(`no upcaster for ${event.type} from schema version ${version} to ${version + 1}`);
    data = step(data, envelope);
    version += 1;
  }
  return { ...event, schemaVersion: version, data } as A2rlEvent;
}

/**
 * Version 1 → 2 of the instrumentation events (see the event catalog): an old event was observed
 * when it was appended, so `observedAt` is its `occurredAt`. FileChanged v1 also carried line counts
 * and ProcessStarted v1 a kind — interpretations, now computed by projections — which are dropped.
 */
function registerBuiltInUpcasters(): void {
  const observed: Upcaster = (data, envelope) => ({ ...data, observedAt: envelope.occurredAt });
  registerUpcaster('FileChanged', 1, ({ linesAdded: _a, linesRemoved: _r, ...data }, envelope) => observed(data, envelope));
  registerUpcaster('ProcessStarted', 1, ({ kind: _kind, ...data }, envelope) => observed(data, envelope));
  registerUpcaster('ProcessExited', 1, observed);
  registerUpcaster('AgentOutput', 1, observed);
  registerUpcaster('RolloutBatchRecorded', 1, observed);
}

registerBuiltInUpcasters();
