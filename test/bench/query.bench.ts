import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { createWriteStream, existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { once } from 'node:events';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { FsArtifactStore } from '../../infra/artifacts/fs-artifact-store.js';
import { SqliteEventStore } from '../../infra/eventstore/sqlite-event-store.js';
import { SignedRunWriter } from '../../modules/audit/bundle/testing/signed-run.js';
import { DEFAULT_HEAD_EVERY_EVENTS } from '../../modules/ledger/tree-head-signer.js';
import { initSigningKey } from '../../modules/ledger/tree-head.js';
import type { ArtifactStore } from '../../modules/artifacts/artifact-store.port.js';
import type { A2rlEvent, BlobRef } from '../../modules/ledger/events/catalog.js';
import { storedEvents } from '../../modules/ledger/event-store.port.js';
import { streamName } from '../../modules/ledger/events/ids.js';
import type { LedgerService } from '../../modules/ledger/ledger.service.js';
import { LedgerRunSource } from '../../modules/query/run-source.js';
import { runCli as cli, stagesOf as stages, type CliRun } from './cli-child.js';
import type { ProjectionRunnerService } from '../../modules/readmodels/readmodels.module.js';

// `npm run bench -- query`: reads that scale. A run of 1,000,000 events (A2RL_BENCH_QUERY_EVENTS
// to change it) is written straight into a SQLite ledger under a fresh A2RL_HOME, as a signing
// harness writes it: agent output chunks, rewritten log files and short processes (a shell loop),
// a signed tree head every 10,000 events (the default rate) and one at seal; the blobs they name
// are in the filesystem artifact store (a few thousand distinct ones, referenced again and again).
// Then:
// - the p99 of reading one 50-event page (GET /runs/:id/events' read: LedgerRunSource.page, and
//   the JSON the endpoint sends) at random offsets near the start, the middle and the end, and the
//   same page read the way the endpoint read it before (the whole run, filtered);
// - `a2rl verify` (the built CLI, in a child process: the record, as a user runs it) against
//   `sha256sum` of the same event bytes (the stream exported as events.ndjson), and verify's peak RSS;
// - `a2rl verify --rebuild` (also the projections and reports rebuilt from zero and compared with
//   the live ones, after those are caught up), its time and RSS.
// Goals: page p99 ≤ 20 ms; verify ≤ 3× sha256sum (on two busy cores); peak RSS ≤ 300 MB; verify
// --rebuild peak RSS ≤ 500 MB.
// A2RL_BENCH_QUERY_HOME=<dir> keeps the run there (and reuses one already written) for profiling.
// `--verify-only` skips the page reads and the rebuilds: the run, sha256sum and `a2rl verify` only;
// `--rounds N` times sha256sum and verify N times each, alternating, and reports the medians (the
// ratio swings with the load; each round's pair ran back to back).

const EVENTS = Number(process.env.A2RL_BENCH_QUERY_EVENTS ?? 1_000_000);
const PAGE = 50;
const SAMPLES = 200;
const OUTPUT_BLOBS = 2000;
const LOG_BLOBS = 2000;
const RUN = 'bench-query';
const AT = '2026-01-01T00:00:00.000Z';

const exec = promisify(execFile);
const round = (x: number, digits = 2) => Math.round(x * 10 ** digits) / 10 ** digits;

/** Blobs of about `size` bytes, different for each i. */
async function putBlobs(store: ArtifactStore, count: number, body: (i: number) => string): Promise<BlobRef[]> {
  const refs: BlobRef[] = [];
  for (let i = 0; i < count; i++) {
    const bytes = Buffer.from(body(i));
    const sha256 = createHash('sha256').update(bytes).digest('hex');
    refs.push({ sha256, size: bytes.length, key: (await store.put(bytes, { sha256, size: bytes.length })).key });
  }
  return refs;
}

const trainingLog = (i: number) => Array.from({ length: 40 }, (_, l) => `step ${i * 40 + l}: loss ${(1 / (i + l + 1)).toFixed(5)} lr 2e-5 grad_norm ${((i * 7 + l) % 97) / 10}`).join('\n');

/** Writes the run; returns how many events it has. */
async function writeRun(store: SqliteEventStore, artifacts: ArtifactStore, home: string): Promise<number> {
  const key = initSigningKey(home);
  const outputs = await putBlobs(artifacts, OUTPUT_BLOBS, trainingLog);
  const logs = await putBlobs(artifacts, LOG_BLOBS, (i) => `${trainingLog(i)}\n${trainingLog(i + 1)}`);
  const w = new SignedRunWriter(store, RUN, key, { headEvery: DEFAULT_HEAD_EVERY_EVENTS, batch: 5000 });
  await w.add('RunScheduled', { task: 'ref-arith', agent: 'bench', baseModel: 'arith-cue-base', budgetSeconds: 43_200, seed: 0, mode: 'free' });
  await w.add('WorkspacePrepared', { workspace: '/ws', sandbox: 'none', mounts: [], dataManifest: [] });
  await w.add('AgentStarted', { command: 'bash start.sh' });
  const body = EVENTS - 5 - Math.ceil(EVENTS / (DEFAULT_HEAD_EVERY_EVENTS + 1));
  let pid = 1000;
  for (let i = 0; i < body; i++) {
    const r = i % 10;
    if (r < 6) {
      await w.add('AgentOutput', { stream: 'stdout', chunk: outputs[i % OUTPUT_BLOBS], observedAt: AT });
    } else if (r < 8) {
      const log = logs[i % LOG_BLOBS];
      await w.add('FileChanged', { path: `logs/train-${i % 8}.log`, op: 'modify', ...log, previousSha256: logs[(i + 1) % LOG_BLOBS].sha256, observedAt: AT });
    } else if (r === 8) {
      await w.add('ProcessStarted', { pid: ++pid, ppid: 999, argv: ['bash', '-c', `tail -n 20 logs/train-${pid % 8}.log | grep loss`], cwd: '/ws', executable: '/usr/bin/bash', observedAt: AT });
    } else {
      await w.add('ProcessExited', { pid, exitCode: 0, durationMs: 12 + (pid % 40), cpuMs: 8, peakRssKb: 3_400, observedAt: AT });
    }
  }
  await w.add('AgentExited', { exitCode: 0, reason: 'completed', observedAt: AT });
  await w.add('RunCompleted', { submissions: 0 });
  await w.seal();
  return Number(await store.streamRevision(streamName(RUN))) + 1;
}

function p99(samples: number[]): number {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil(sorted.length * 0.99) - 1)];
}

/** p99 of a page read (and its JSON) at SAMPLES random offsets in [from, to). */
async function pageP99(source: LedgerRunSource, from: number, to: number): Promise<number> {
  const times: number[] = [];
  for (let i = 0; i < SAMPLES; i++) {
    const afterSeq = from + Math.floor(Math.random() * (to - from)) - 1;
    const t = performance.now();
    const page = await source.page(RUN, { afterSeq, limit: PAGE });
    JSON.stringify(page);
    times.push(performance.now() - t);
    if (page?.length !== Math.min(PAGE, EVENTS - afterSeq - 1)) throw new Error(`page after seq ${afterSeq} has ${page?.length} events`);
  }
  return round(p99(times));
}

/** The same page read as GET /runs/:id/events read it before: the whole run, then filtered. */
async function pageBefore(store: SqliteEventStore, afterSeq: number): Promise<number> {
  const t = performance.now();
  const all: A2rlEvent[] = [];
  for await (const { event } of store.readStream(streamName(RUN))) all.push(event);
  JSON.stringify(all.filter((e) => e.seq > afterSeq).slice(0, PAGE));
  return round(performance.now() - t);
}

/** events.ndjson: the stream's stored bytes, one line each (what verify hashes and checks). */
async function exportNdjson(store: SqliteEventStore, file: string): Promise<number> {
  const out = createWriteStream(file);
  let bytes = 0;
  for await (const r of storedEvents(store, streamName(RUN))) {
    bytes += r.bytes.length + 1;
    if (!out.write(Buffer.concat([r.bytes, Buffer.from('\n')]))) await once(out, 'drain');
  }
  out.end();
  await once(out, 'finish');
  return bytes;
}

function parseOptions(argv: string[]): { verifyOnly: boolean; rounds: number } {
  const o = { verifyOnly: false, rounds: 1 };
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--verify-only') o.verifyOnly = true;
    else if (argv[i] === '--rounds' && /^[1-9]\d*$/.test(argv[i + 1] ?? '')) o.rounds = Number(argv[++i]);
    else throw new Error(`query bench: bad option "${argv[i]}" (--verify-only, --rounds N)`);
  }
  return o;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)];

export async function queryBench(): Promise<void> {
  const options = parseOptions(process.argv.slice(3));
  const loadStart = os.loadavg()[0];
  console.log(`load average at start: ${loadStart.toFixed(2)} (1 min) on ${os.availableParallelism()} cores`);
  const kept = process.env.A2RL_BENCH_QUERY_HOME;
  const home = kept ? path.resolve(kept) : mkdtempSync(path.join(os.tmpdir(), 'a2rl-bench-query-'));
  try {
    const reused = kept !== undefined && existsSync(path.join(home, 'ledger.db'));
    mkdirSync(home, { recursive: true });
    const store = await SqliteEventStore.open(path.join(home, 'ledger.db'));
    const artifacts = await FsArtifactStore.open(path.join(home, 'artifacts'));
    let t = performance.now();
    const events = reused ? Number(await store.streamRevision(streamName(RUN))) + 1 : await writeRun(store, artifacts, home);
    console.log(`run: ${events} events (a signed head every ${DEFAULT_HEAD_EVERY_EVENTS} events and at seal) ${reused ? `reused from ${home}` : `written in ${round((performance.now() - t) / 1000)} s`}`);

    let pages: { start: number; middle: number; end: number } | null = null;
    if (!options.verifyOnly) {
      // The page read of GET /runs/:id/events (the controller adds only validation and serialisation).
      const source = new LedgerRunSource(undefined as unknown as ProjectionRunnerService, undefined as unknown as LedgerService, artifacts, store);
      await source.page(RUN, { afterSeq: -1, limit: PAGE }); // warm-up
      const window = Math.min(10_000, Math.floor(events / 10));
      pages = {
        start: await pageP99(source, 0, window),
        middle: await pageP99(source, Math.floor(events / 2 - window / 2), Math.floor(events / 2 + window / 2)),
        end: await pageP99(source, events - window, events - PAGE),
      };
      console.log(`50-event page p99 over ${SAMPLES} random offsets each: start ${pages.start} ms, middle ${pages.middle} ms, end ${pages.end} ms`);
      console.log(`the same page at the end read as before (the whole run, then filtered): ${await pageBefore(store, events - PAGE - 1)} ms`);
    }

    const ndjson = path.join(home, 'events.ndjson');
    const bytes = await exportNdjson(store, ndjson);
    await store.close();
    await artifacts.close();
    const sha256sums: number[] = [];
    const verifies: CliRun[] = [];
    for (let i = 0; i < options.rounds; i++) {
      t = performance.now();
      await exec('sha256sum', [ndjson]);
      sha256sums.push(round((performance.now() - t) / 1000, 3));
      const verify = await cli(home, ['verify', RUN]);
      if (i === 0) console.log(verify.stdout.trim());
      console.log(`round ${i + 1}: sha256sum of the stream's ${bytes} bytes (events.ndjson) ${sha256sums[i]} s; a2rl verify ${verify.seconds} s (${stages(verify)}), ${round(verify.seconds / sha256sums[i], 1)}×, peak RSS ${verify.peakRssMb} MB; load ${os.loadavg()[0].toFixed(2)}`);
      verifies.push(verify);
    }
    rmSync(ndjson);
    const sha256sum_s = median(sha256sums);
    const verify_s = median(verifies.map((v) => v.seconds));
    const verify_peak_rss_mb = Math.max(...verifies.map((v) => v.peakRssMb));

    // --rebuild compares projections rebuilt from zero with the live read models: bring those up to date first.
    let deep: CliRun | null = null;
    if (!options.verifyOnly) {
      const rebuild = await cli(home, ['projections', 'rebuild']);
      console.log(`read models caught up (a2rl projections rebuild): ${rebuild.seconds} s, peak RSS ${rebuild.peakRssMb} MB`);
      deep = await cli(home, ['verify', RUN, '--rebuild']);
      console.log(`a2rl verify --rebuild: ${deep.seconds} s (${stages(deep)}), peak RSS ${deep.peakRssMb} MB`);
    }

    console.log(JSON.stringify({
      bench: 'query', events,
      ...(pages ? { page_p99_ms_start: pages.start, page_p99_ms_middle: pages.middle, page_p99_ms_end: pages.end } : {}),
      stream_bytes: bytes, sha256sum_s, verify_s, rounds: options.rounds,
      verify_vs_sha256sum: round(verify_s / sha256sum_s, 1), verify_peak_rss_mb,
      ...(deep ? { verify_rebuild_s: deep.seconds, verify_rebuild_peak_rss_mb: deep.peakRssMb } : {}),
      load_1m_start: round(loadStart), load_1m_end: round(os.loadavg()[0]), cores: os.availableParallelism(),
    }));
  } finally {
    if (!kept) rmSync(home, { recursive: true, force: true });
  }
}
