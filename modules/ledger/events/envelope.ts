import { plainToInstance } from 'class-transformer';
import { validateSync, type ValidationError } from 'class-validator';
import { canonicalBytes } from './canonical-json.js';
import { A2rlEvent, EVENT_CATALOG, EventData, EventType, isEventType } from './catalog.js';
import { eventId } from './ids.js';
import { payloadCheck } from './payload-check.js';
import { upcast } from './upcast.js';

/** Largest canonical event the ledger accepts; bigger payloads belong in the artifact store. */
export const MAX_EVENT_BYTES = 256 * 1024;

const RUN_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;
const ISO_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?Z$/;

export class InvalidEventError extends Error {
  override readonly name = 'InvalidEventError';
  constructor(message: string, readonly problems: string[] = []) {
    super(problems.length ? `${message}: ${problems.join('; ')}` : message);
  }
}

export class EventTooLargeError extends Error {
  override readonly name = 'EventTooLargeError';
  constructor(readonly size: number, readonly limit = MAX_EVENT_BYTES, detail = '') {
    super(`event${detail} is ${size} bytes as canonical JSON; the limit is ${limit} bytes (256 KiB). Store large payloads in the artifact store and reference them by {sha256, size, key}`);
  }
}

function flatten(errors: ValidationError[], prefix = 'data'): string[] {
  return errors.flatMap((e) => {
    const here = `${prefix}.${e.property}`;
    const own = Object.values(e.constraints ?? {}).map((m) => `${here}: ${m}`);
    return [...own, ...flatten(e.children ?? [], here)];
  });
}

/** Validates a payload against its class; unknown and missing properties are errors. */
export function validatePayload<T extends EventType>(type: T, data: unknown): EventData<T> {
  if (!isEventType(type)) throw new InvalidEventError(`unknown event type "${String(type)}"`);
  if (typeof data !== 'object' || data === null || Array.isArray(data)) {
    throw new InvalidEventError(`${type}: data must be an object`);
  }
  // The compiled check says yes only where class-validator would; otherwise class-validator decides (and words the errors).
  if (payloadCheck(EVENT_CATALOG[type].payload)?.(data)) return data as EventData<T>;
  const instance = plainToInstance(EVENT_CATALOG[type].payload as new () => object, data);
  const errors = validateSync(instance, { whitelist: true, forbidNonWhitelisted: true, forbidUnknownValues: true });
  if (errors.length) throw new InvalidEventError(`${type} payload is invalid`, flatten(errors));
  return data as EventData<T>;
}

/** Builds a complete, validated envelope for the next event of a run. The event and its payload are frozen. */
export function buildEvent<T extends EventType>(
  type: T,
  runId: string,
  seq: number,
  occurredAt: Date | string,
  data: EventData<T>,
): A2rlEvent {
  const envelope = {
    type,
    runId,
    seq,
    id: eventId(runId, seq),
    occurredAt: typeof occurredAt === 'string' ? occurredAt : occurredAt.toISOString(),
    schemaVersion: EVENT_CATALOG[type].version,
    data,
  } as A2rlEvent;
  const bytes = validateAndEncode(envelope);
  // Events are immutable once built: freezing lets every later check reuse this validation and
  // these bytes (the adapters validate again at the store boundary) without re-walking the payload.
  deepFreeze(envelope);
  validated.set(envelope, bytes);
  return envelope;
}

/** Canonical bytes of events built (validated and frozen) by buildEvent. */
const validated = new WeakMap<object, Buffer>();

function deepFreeze(value: unknown): void {
  if (typeof value !== 'object' || value === null || Object.isFrozen(value)) return;
  Object.freeze(value);
  for (const v of Object.values(value)) deepFreeze(v);
}

/**
 * Checks an event read back from storage or a bundle: like assertValidEvent, but an older schema
 * version is accepted when upcasters lead to the current one, and the payload is checked after
 * upcasting. Returns the upcast event.
 */
export function validateStoredEvent(event: unknown): A2rlEvent {
  const e = event as Record<string, unknown>;
  const type = typeof e?.type === 'string' && isEventType(e.type) ? e.type : null;
  const current = type ? EVENT_CATALOG[type].version : null;
  if (type === null || current === null || !Number.isSafeInteger(e.schemaVersion) || (e.schemaVersion as number) === current || (e.schemaVersion as number) < 1) {
    assertValidEvent(event);
    return event as A2rlEvent;
  }
  if ((e.schemaVersion as number) > current) throw new InvalidEventError(`${type}: schema version ${String(e.schemaVersion)} is newer than this a2rl knows (${current})`);
  const upcasted = upcast(event as A2rlEvent);
  assertValidEvent(upcasted);
  return upcasted;
}

/** Checks an envelope completely (shape, id, payload, size); throws before anything is written. */
export function assertValidEvent(event: unknown): asserts event is A2rlEvent {
  validateAndEncode(event);
}

/** assertValidEvent, returning the canonical bytes it had to compute anyway (the stored form). */
export function validateAndEncode(event: unknown): Buffer {
  if (typeof event !== 'object' || event === null) throw new InvalidEventError('event must be an object');
  const known = validated.get(event);
  if (known) return known;
  const e = event as Record<string, unknown>;
  const problems: string[] = [];
  const allowed = new Set(['type', 'runId', 'seq', 'id', 'occurredAt', 'schemaVersion', 'data']);
  for (const k of Object.keys(e)) if (!allowed.has(k)) problems.push(`unknown envelope field "${k}"`);
  if (typeof e.type !== 'string' || !isEventType(e.type)) problems.push(`type: unknown event type "${String(e.type)}"`);
  if (typeof e.runId !== 'string' || !RUN_ID.test(e.runId)) problems.push('runId: 1-128 characters of [A-Za-z0-9._-], starting alphanumeric');
  if (!Number.isSafeInteger(e.seq) || (e.seq as number) < 0) problems.push('seq: a non-negative integer');
  if (typeof e.occurredAt !== 'string' || !ISO_UTC.test(e.occurredAt)) problems.push('occurredAt: an ISO-8601 UTC timestamp');
  if (!Number.isSafeInteger(e.schemaVersion) || (e.schemaVersion as number) < 1) problems.push('schemaVersion: a positive integer');
  if (!problems.length && e.id !== eventId(e.runId as string, e.seq as number)) {
    problems.push('id: must be UUIDv5 of runId/seq');
  }
  if (problems.length) throw new InvalidEventError('invalid event envelope', problems);
  if (e.schemaVersion !== EVENT_CATALOG[e.type as EventType].version) {
    throw new InvalidEventError(`${String(e.type)}: new events must use the current schema version ${EVENT_CATALOG[e.type as EventType].version}`);
  }
  // Size first: an oversized event is refused as such, whatever else is wrong with it.
  const bytes = canonicalBytes(event);
  if (bytes.length > MAX_EVENT_BYTES) throw new EventTooLargeError(bytes.length, MAX_EVENT_BYTES, ` ${String(e.type)} seq ${String(e.seq)}`);
  validatePayload(e.type as EventType, e.data);
  return bytes;
}

/** The stored form of an event: its canonical JSON bytes (used for storage and hashing). */
export function encodeEvent(event: A2rlEvent): Buffer {
  return canonicalBytes(event);
}

/** Parses stored bytes and upcasts older schema versions to the current shape. */
export function decodeEvent(bytes: Uint8Array | string): A2rlEvent {
  // A Buffer (what the stores return) is decoded as it is; another Uint8Array through a view, not a
  // copy. Decoding is on every read path: a rebuild's, once per event.
  const text = typeof bytes === 'string' ? bytes : Buffer.isBuffer(bytes) ? bytes.toString('utf8') : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8');
  return upcast(JSON.parse(text) as A2rlEvent);
}
