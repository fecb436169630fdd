import type { RecordedEvent } from '../ledger/event-store.port.js';
import { streamName } from '../ledger/events/ids.js';
import { parseBytes, type ParsedBytes, type VerificationFailure } from './verify-chain.js';

/**
 * What a store says about an event beside its bytes, checked against the bytes, which are what the
 * tree heads sign: the stream and revision it is filed under, the id and type columns (or server
 * metadata) an adapter keeps apart (RecordedEvent.stored), and the decoded event the adapter hands
 * to projections. Any of them can be changed in the database without touching the signed bytes, and
 * a query or reader that trusts it would then see another event than the one signed.
 */
export function storedColumnFailures(recorded: RecordedEvent, parsed: ParsedBytes = parseBytes(recorded.bytes)): VerificationFailure[] {
  if ('error' in parsed) return []; // the chain check reports bytes that do not parse
  const signed = parsed.value as Record<string, unknown>;
  if (typeof signed !== 'object' || signed === null) return [];
  const seq = Number.isSafeInteger(signed.seq) ? (signed.seq as number) : Number(recorded.revision);
  const failures: VerificationFailure[] = [];
  const differ = (what: string, stored: unknown, inBytes: unknown) => {
    if (stored === inBytes || inBytes === undefined) return; // missing from the bytes: the chain check says so
    failures.push({
      check: 'event',
      seq,
      message: `event ${String(signed.id)} (${String(signed.type)}): the store's ${what} is ${JSON.stringify(stored)}, the signed bytes say ${JSON.stringify(inBytes)}: the store was altered outside a2rl`,
    });
  };
  differ('stream', recorded.stream, typeof signed.runId === 'string' ? streamName(signed.runId) : undefined);
  differ('revision', Number(recorded.revision), signed.seq);
  if (recorded.stored) {
    differ('type column', recorded.stored.type, signed.type);
    differ('id column', recorded.stored.id, signed.id);
  }
  // The adapter's decoded event (upcast, never re-typed or renumbered) must be the signed one.
  const event = recorded.event as unknown as Record<string, unknown>;
  for (const field of ['type', 'id', 'runId', 'seq']) differ(`decoded event's ${field}`, event?.[field], signed[field]);
  return failures;
}
