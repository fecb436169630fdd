import { createHash } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { DataSource } from 'typeorm';
import { FsArtifactStore } from '../../../infra/artifacts/fs-artifact-store.js';
import { SqliteEventStore } from '../../../infra/eventstore/sqlite-event-store.js';
import { openReadModels } from '../../../infra/readmodels/data-source.js';
import { workspaceRevisionsProjection } from '../../../projections/workspace-revisions/workspace-revisions.projection.js';
import type { BlobRef } from '../../ledger/events/catalog.js';
import type { A2rlEvent } from '../../ledger/events/catalog.js';
import { streamName } from '../../ledger/events/ids.js';
import { ProjectionRunner } from '../../readmodels/projection-runner.js';
import { ReplayService } from '../replay.service.js';

/** Real stores in a temporary directory (SQLite ledger, filesystem blobs, read models) behind a ReplayService. */
export interface ReplayHarness {
  dir: string;
  events: SqliteEventStore;
  artifacts: FsArtifactStore;
  readModels: DataSource;
  replay: ReplayService;
  /** Stores `content` as a blob. */
  blob(content: string | Buffer): Promise<BlobRef>;
  /** Appends events of one run (contiguous, continuing its stream). */
  append(events: A2rlEvent[]): Promise<void>;
  close(): Promise<void>;
}

/** `readModelUrl` defaults to a SQLite file in the harness directory. */
export async function openReplayHarness(opts: { readModelUrl?: string } = {}): Promise<ReplayHarness> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'a2rl-replay-'));
  const events = await SqliteEventStore.open(path.join(dir, 'ledger.db'));
  const artifacts = await FsArtifactStore.open(path.join(dir, 'artifacts'));
  const readModels = await openReadModels(opts.readModelUrl ?? `sqlite://${path.join(dir, 'read-models.db')}`);
  const runner = new ProjectionRunner(events, readModels, [workspaceRevisionsProjection]);
  const replay = new ReplayService({ events, readModels, artifacts, catchUp: () => runner.catchUp() });
  return {
    dir,
    events,
    artifacts,
    readModels,
    replay,
    async blob(content) {
      const body = Buffer.from(content);
      const sha256 = createHash('sha256').update(body).digest('hex');
      const { key } = await artifacts.put(body, { sha256, size: body.length });
      return { sha256, size: body.length, key };
    },
    async append(batch) {
      const first = batch[0].seq;
      await events.append(streamName(batch[0].runId), batch, first === 0 ? 'no_stream' : BigInt(first - 1));
    },
    async close() {
      await readModels.destroy();
      await events.close();
      await artifacts.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
}
