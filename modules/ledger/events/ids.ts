import { hash } from 'node:crypto';
import { v5 as uuidv5 } from 'uuid';
import { ACCESS_EVENTS } from './access-events.js';
import { CAMPAIGN_EVENTS } from './campaign-events.js';
import type { EventType } from './catalog.js';

/** Fixed namespace for a2rl event ids; changing it would change every event id ever issued. */
export const A2RL_EVENT_NAMESPACE = '5b0c2f6e-7a55-4c35-9f64-2f3c1f1a2e71';

export const RUN_STREAM_PREFIX = 'run-';
/** A campaign's stream: `campaign-<campaignId>` (its events' envelope `runId` holds the campaign id). */
export const CAMPAIGN_STREAM_PREFIX = 'campaign-';

/** The event types recorded in campaign streams, and only there (run streams refuse them): the campaign family's. */
export const CAMPAIGN_EVENT_TYPES: ReadonlySet<EventType> = new Set(Object.keys(CAMPAIGN_EVENTS) as EventType[]);

/**
 * The access stream: `access-<id>`, in practice the one `access-log` (the envelope's `runId` holds
 * `log`, which no run id can be: those are `<task>-<time>-<hex>`). Tokens and access records live
 * there; it is neither a run nor a campaign stream, so no all-stream read or projection sees it.
 */
export const ACCESS_STREAM_PREFIX = 'access-';
export const ACCESS_LOG_ID = 'log';

/** The event types recorded in the access stream, and only there (run and campaign streams refuse them): the access family's. */
export const ACCESS_EVENT_TYPES: ReadonlySet<EventType> = new Set(Object.keys(ACCESS_EVENTS) as EventType[]);

const NAMESPACE_BYTES = Buffer.from(A2RL_EVENT_NAMESPACE.replace(/-/g, ''), 'hex');
/** A buffer starting with the namespace's bytes, with room for a name of `room` UTF-8 bytes. */
function namespaced(room: number): Buffer {
  const buffer = Buffer.alloc(NAMESPACE_BYTES.length + Math.max(room, 256));
  NAMESPACE_BYTES.copy(buffer, 0);
  return buffer;
}
let nameBuffer = namespaced(256);
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/**
 * Deterministic event id: UUIDv5 of `runId/seq`, so a retried append carries the same ids. The
 * RFC 9562 steps with node:crypto's SHA-1 (the uuid package hashes in JavaScript, several times
 * slower, and verify checks every event's id); ids.spec.ts holds it to uuid's v5 byte for byte.
 * A name uuid cannot encode (a lone surrogate) still goes to uuid, which refuses it.
 */
export function eventId(runId: string, seq: number): string {
  const name = `${runId}/${seq}`;
  if (LONE_SURROGATE.test(name)) return uuidv5(name, A2RL_EVENT_NAMESPACE);
  // namespace ‖ name in a reused buffer, hashed in one call: a createHash chain cost twice as much,
  // once for every event built and again for every event validated.
  if (nameBuffer.length < NAMESPACE_BYTES.length + name.length * 3) nameBuffer = namespaced(name.length * 3);
  const length = NAMESPACE_BYTES.length + nameBuffer.write(name, NAMESPACE_BYTES.length, 'utf8');
  const bytes = hash('sha1', nameBuffer.subarray(0, length), 'buffer');
  bytes[6] = (bytes[6] & 0x0f) | 0x50;
  bytes[8] = (bytes[8] & 0x3f) | 0x80;
  const hex = bytes.toString('hex', 0, 16);
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

export function streamName(runId: string): string {
  return `${RUN_STREAM_PREFIX}${runId}`;
}

export function runIdOfStream(stream: string): string | null {
  return stream.startsWith(RUN_STREAM_PREFIX) ? stream.slice(RUN_STREAM_PREFIX.length) : null;
}

export function campaignStreamName(campaignId: string): string {
  return `${CAMPAIGN_STREAM_PREFIX}${campaignId}`;
}

export function campaignIdOfStream(stream: string): string | null {
  return stream.startsWith(CAMPAIGN_STREAM_PREFIX) ? stream.slice(CAMPAIGN_STREAM_PREFIX.length) : null;
}

export function accessStreamName(id: string = ACCESS_LOG_ID): string {
  return `${ACCESS_STREAM_PREFIX}${id}`;
}

export function accessIdOfStream(stream: string): string | null {
  return stream.startsWith(ACCESS_STREAM_PREFIX) ? stream.slice(ACCESS_STREAM_PREFIX.length) : null;
}
