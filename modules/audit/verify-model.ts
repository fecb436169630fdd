import type { DataSource } from 'typeorm';
import type { ArtifactStore } from '../artifacts/artifact-store.port.js';
import { EventStoreUnavailableError } from '../ledger/errors.js';
import type { EventStore, RecordedEvent } from '../ledger/event-store.port.js';
import type { A2rlEvent } from '../ledger/events/catalog.js';
import type { LeafHashes } from '../ledger/merkle.js';
import type { RunSource } from '../query/run-source.js';
import type { ReadModelStores } from '../readmodels/read-models.port.js';
import type { ArtifactRefs } from './artifact-refs.js';
import type { PageReader, SegmentScanner } from './record-scan.js';
import type { ChainVerifier, VerificationFailure } from './verify-chain.js';

// What `a2rl verify`'s steps share: its inputs, its progress, the scan of the record that the
// rebuild step (verify-rebuild.ts) reads, and the resilient stream read. Kept apart from
// verify.service.ts so that the rebuild step, which the service loads lazily, imports no service.

export interface VerifyDeps {
  store: EventStore;
  artifacts: ArtifactStore;
  /** The live read models (as `a2rl runs` / `a2rl report` read them). This and the next three: for `rebuild` only. */
  readModels?: DataSource;
  /** Opens the scratch store the projections are rebuilt into (the read-model port). */
  readModelStores?: Pick<ReadModelStores, 'openScratch'>;
  /** The live run source (`a2rl report` renders from it). */
  runs?: RunSource;
  /** Brings the live read models up to date before they are compared. */
  catchUp?: () => Promise<unknown>;
  /** The ledger's public key (PEM); null when there is none. */
  publicKeyPem: string | null;
  /** The task cache (`$A2RL_HOME/tasks`): private evaluation sets for --regrade. */
  taskCacheDir: string;
  /** Where `a2rl data fetch` stores paper-task datasets, for --regrade when the task cache is cold. */
  datasetsDir?: string;
  /** Where scratch stores and restored checkpoints go (default: the OS temp dir). */
  tmpDir?: string;
  /**
   * Reads a long run's stream in segments at once, in threads that open the ledger themselves (not
   * for an in-memory one); `pages` reads this thread's segment in pages (an SQLite ledger).
   */
  parallelRead?: { scanner: SegmentScanner; threads: number; pages?: PageReader };
}

export type VerifyStage = 'events' | 'chain' | 'artifacts' | 'projections' | 'reports' | 'regrade';

export interface VerifyProgress {
  stage: VerifyStage;
  done: number;
  total: number;
}

export interface VerifyOptions {
  /** Also rebuild every projection from zero and compare rows and reports with the live ones (step 3). */
  rebuild?: boolean;
  regrade?: boolean;
  onProgress?: (progress: VerifyProgress) => void;
}

/**
 * What one streaming read of a run leaves for the later checks. Events and their bytes are dropped
 * as soon as they are checked; what grows with the run is the leaf hashes (32 bytes an event, so
 * the projection view can prove it re-reads the verified bytes), one entry per distinct blob, the
 * signed heads (bounded by the signing rate) and the failures found.
 */
export interface RunScan {
  /** Entries read, decodable or not (the next seq). */
  count: number;
  /** Events the store cannot decode. */
  decodeFailures: VerificationFailure[];
  /** Stored columns that disagree with the bytes. */
  columnFailures: VerificationFailure[];
  chain: ChainVerifier;
  /** Revisions the store cannot decode: the projection view skips them, as the rebuild always has. */
  undecodable: Set<number>;
  leaves: LeafHashes;
  /** Each TreeHeadSigned's seq and size, in seq order. */
  heads: Array<{ seq: number; treeSize: number }>;
  /** The last valid event that is not a head (the seal check). */
  lastNonHead?: { seq: number; type: A2rlEvent['type'] };
  /** Every referenced blob, once per sha256. */
  refs: ArtifactRefs;
  /** Events of KEPT_TYPES. */
  kept: A2rlEvent[];
}

/**
 * A stream's events from `from` on. An event the store cannot decode is handed to `onUndecodable`
 * and reading resumes after it; past the store's last revision an error is the store's, and thrown.
 */
export async function* readResilient(store: EventStore, stream: string, from: bigint, onUndecodable: (revision: bigint, error: Error) => void): AsyncGenerator<RecordedEvent> {
  let last: bigint | null | undefined;
  for (;;) {
    try {
      for await (const recorded of store.readStream(stream, { fromRevision: from })) {
        from = recorded.revision + 1n;
        yield recorded;
      }
      return;
    } catch (error) {
      last ??= await store.streamRevision(stream);
      if (error instanceof EventStoreUnavailableError || last === null || from > last) throw error;
      onUndecodable(from, error as Error);
      from += 1n;
    }
  }
}
