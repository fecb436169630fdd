import { ACCESS_EVENTS } from './access-events.js';
import { CAMPAIGN_EVENTS } from './campaign-events.js';
import { RUN_EVENTS } from './run-events.js';

// The event catalog: one payload class per event type (validated with class-validator before any
// write), kept in one file per stream family — run-events.ts, campaign-events.ts, access-events.ts,
// with what they share in shared.ts — and merged here into one discriminated union over the shared
// envelope. Which stream a type belongs to is which family map holds it (STREAM_OF_TYPE). Names are
// part of the product.

export { BlobRef, Cause, ManifestEntry } from './shared.js';
export * from './run-events.js';
export * from './campaign-events.js';
export * from './access-events.js';

/** Every event type, its payload class and its current schema version. */
export const EVENT_CATALOG = { ...RUN_EVENTS, ...CAMPAIGN_EVENTS, ...ACCESS_EVENTS } as const;

export type EventType = keyof typeof EVENT_CATALOG;
export const EVENT_TYPES = Object.keys(EVENT_CATALOG) as EventType[];

export type RunEventType = keyof typeof RUN_EVENTS;
export type CampaignEventType = keyof typeof CAMPAIGN_EVENTS;
export type AccessEventType = keyof typeof ACCESS_EVENTS;

/** The kinds of stream; each family's types are recorded in streams of its kind only. */
export type StreamFamily = 'run' | 'campaign' | 'access';

/** Each event type's stream family, from the family maps. */
export const STREAM_OF_TYPE: Readonly<Record<EventType, StreamFamily>> = Object.fromEntries([
  ...Object.keys(RUN_EVENTS).map((t) => [t, 'run']),
  ...Object.keys(CAMPAIGN_EVENTS).map((t) => [t, 'campaign']),
  ...Object.keys(ACCESS_EVENTS).map((t) => [t, 'access']),
]) as Record<EventType, StreamFamily>;

export type EventData<T extends EventType> = InstanceType<(typeof EVENT_CATALOG)[T]['payload']>;

/** The envelope every stored event has; `data` is the type's payload. */
export interface Envelope<T extends EventType = EventType> {
  type: T;
  runId: string;
  seq: number;
  id: string;
  occurredAt: string;
  schemaVersion: number;
  data: EventData<T>;
}

/** The discriminated union over all event types: narrowing on `type` gives the payload. */
export type A2rlEvent = { [T in EventType]: Envelope<T> }[EventType];
/** One union per stream: the events a run, a campaign or the access stream holds. */
export type RunEvent = { [T in RunEventType]: Envelope<T> }[RunEventType];
export type CampaignEvent = { [T in CampaignEventType]: Envelope<T> }[CampaignEventType];
export type AccessEvent = { [T in AccessEventType]: Envelope<T> }[AccessEventType];

export function isEventType(type: string): type is EventType {
  return Object.prototype.hasOwnProperty.call(EVENT_CATALOG, type);
}
