import type { ArtifactStore } from '../artifacts/artifact-store.port.js';
import type { EventStore } from '../ledger/event-store.port.js';
import { streamName } from '../ledger/events/ids.js';
import type { A2rlEvent } from '../ledger/events/catalog.js';
import { scanRecord } from '../audit/record-scan.js';
import { ChainVerifier, sealFailure, sealRelevant, type VerificationFailure } from '../audit/verify-chain.js';

/** At most this many failures are returned (the count is complete). */
const MAX_FAILURES = 20;

export interface ChainCheck {
  runId: string;
  ok: boolean;
  events: number;
  treeHeads: number;
  /** The run ended (RunCompleted/RunInterrupted); an open run's unsigned tail is not a failure. */
  sealed: boolean;
  failureCount: number;
  failures: VerificationFailure[];
}

/** POST /runs/:id/verify's answer: the chain check, and for a sealed run what `a2rl verify` checks besides. */
export interface RunCheck extends ChainCheck {
  /** Blobs checked against their recorded sha256 (null for an open run: checked once it is sealed). */
  artifacts: number | null;
  /** What was checked: chain (always); artifacts and integrity (data/ and models/ unchanged) for a sealed run. */
  checks: Array<'chain' | 'artifacts' | 'integrity'>;
}

/**
 * "Verify now": the checks of `a2rl verify` (without --rebuild or --regrade: the record, every signed
 * head, the seal, every referenced blob's sha256, the workspace integrity checks) for a sealed run;
 * for a run still open, its chain so far (checkRunChain: the unsigned tail is not a failure), as the
 * CLI's verify would fail an open run on its seal. Null for a run with no events.
 */
export async function checkRun(deps: { store: EventStore; artifacts: ArtifactStore; publicKeyPem: string | null; taskCacheDir: string }, runId: string): Promise<RunCheck | null> {
  const chain = await checkRunChain(deps.store, runId, deps.publicKeyPem);
  if (!chain || !chain.sealed) return chain && { ...chain, artifacts: null, checks: ['chain'] };
  const { RunVerifier } = await import('../audit/verify.service.js');
  const result = await new RunVerifier({ store: deps.store, artifacts: deps.artifacts, publicKeyPem: deps.publicKeyPem, taskCacheDir: deps.taskCacheDir }).verify(runId);
  return {
    runId, ok: result.ok, events: result.events, treeHeads: result.treeHeads, sealed: true, failureCount: result.failures.length,
    failures: result.failures.slice(0, MAX_FAILURES), artifacts: result.artifacts, checks: ['chain', 'artifacts', 'integrity'],
  };
}

/**
 * POST /runs/:id/verify: the run's chain (every event valid and canonical, dense seqs, every signed
 * head's root and signature, the last head covering everything of a sealed run), streamed from the
 * store in bounded memory. The artifact, projection and regrade checks of `a2rl verify` are not
 * run here: they can take minutes, this answers a request. Null for a run with no events.
 */
export async function checkRunChain(store: EventStore, runId: string, publicKeyPem: string | null): Promise<ChainCheck | null> {
  // A sealed, intact run is vouched for by the fast record check; anything else is checked event by event below.
  const record = await scanRecord(store, runId, publicKeyPem);
  if (record === null) return null;
  if (!('anomaly' in record)) return { runId, ok: true, events: record.count, treeHeads: record.heads.length, sealed: true, failureCount: 0, failures: [] };
  const chain = new ChainVerifier(runId, publicKeyPem);
  let heads = 0;
  let last: Pick<A2rlEvent, 'seq' | 'type'> | undefined;
  for await (const recorded of store.readStream(streamName(runId))) {
    const event = chain.push({ bytes: recorded.bytes });
    if (event?.type === 'TreeHeadSigned') heads++;
    if (event && sealRelevant(event)) last = { seq: event.seq, type: event.type };
  }
  if (chain.size === 0) return null;
  const sealed = sealFailure(last).length === 0 && last !== undefined;
  const coverage = chain.finish();
  // An open run signs heads at intervals: events after its last head (or before its first) are not yet covered, not altered.
  const failures = sealed ? chain.failures : chain.failures.filter((f) => !coverage.includes(f));
  return { runId, ok: failures.length === 0, events: chain.size, treeHeads: heads, sealed, failureCount: failures.length, failures: failures.slice(0, MAX_FAILURES) };
}
