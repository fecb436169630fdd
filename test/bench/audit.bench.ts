import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { createWriteStream, mkdtempSync, rmSync, statSync } from 'node:fs';
import { once } from 'node:events';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { FsArtifactStore } from '../../infra/artifacts/fs-artifact-store.js';
import { SqliteEventStore } from '../../infra/eventstore/sqlite-event-store.js';
import { exportBundle, verifyBundle } from '../../modules/audit/bundle/index.js';
import { expectedManifest } from '../../modules/audit/bundle/layout.js';
import { SignedRunWriter } from '../../modules/audit/bundle/testing/signed-run.js';
import { initSigningKey } from '../../modules/ledger/tree-head.js';
import { verifyEventChain } from '../../modules/audit/verify-chain.js';
import type { A2rlEvent, BlobRef } from '../../modules/ledger/events/catalog.js';
import { encodeEvent } from '../../modules/ledger/events/envelope.js';
import { streamName } from '../../modules/ledger/events/ids.js';
import { storedEvents } from '../../modules/ledger/event-store.port.js';
import { runCli, stagesOf } from './cli-child.js';
import { replayLatency } from './replay.bench.js';

// `npm run bench -- audit`: a synthetic signed run of 100,000 events (10,000 of them FileChanged
// revisions whose contents are in the artifact store, a TreeHeadSigned every 64 events) on the
// embedded stores (SQLite ledger, filesystem artifacts). Measures verification (chain + artifacts,
// from the stores), the audit-bundle export and offline verify-bundle, the bundle's size, replay
// latency at random seqs, and `sha256sum` over the same bytes (events + blobs) as the reference.
// Then `a2rl verify` and `a2rl verify --rebuild` as a user runs them (the built CLI in a child
// process on the same home): time, peak RSS, and verify's ratio to the sha256sum reference.
// Goals: verify ≤ 3× sha256sum (on two busy cores) with peak RSS ≤ 300 MB; verify --rebuild peak
// RSS ≤ 500 MB (at 1,000,000 events: A2RL_BENCH_AUDIT_EVENTS=1000000). Times depend on the load,
// which the bench prints; memory does not.
// `--cli-only` skips the in-process verification, the export, verify-bundle and replay (the export
// of a 1,000,000-event run takes tens of minutes here): the run, the sha256sum reference and the CLI.

const EVENTS = Number(process.env.A2RL_BENCH_AUDIT_EVENTS ?? 100_000);
const FILE_REVISIONS = 10_000;
const FILES = 500;
const HEAD_EVERY = 64;
const PUT_CONCURRENCY = 16;
const RUN = 'bench-audit';

const exec = promisify(execFile);
const seconds = (since: number) => Math.round((performance.now() - since) / 10) / 100;

/** A source file of about 1 KiB, different for every file and revision. */
function source(file: number, revision: number): string {
  const body = Array.from({ length: 24 }, (_, i) => `    total += step(${file}, ${revision}, ${i})  # line ${i}`).join('\n');
  return `# module ${file}, revision ${revision}\nfrom trl import SFTTrainer\n\ndef train():\n    total = 0\n${body}\n    return total\n`;
}

async function putAll(store: FsArtifactStore, contents: string[]): Promise<BlobRef[]> {
  const refs = new Array<BlobRef>(contents.length);
  let next = 0;
  await Promise.all(Array.from({ length: PUT_CONCURRENCY }, async () => {
    while (next < contents.length) {
      const i = next++;
      const body = Buffer.from(contents[i]);
      const sha256 = createHash('sha256').update(body).digest('hex');
      refs[i] = { sha256, size: body.length, key: (await store.put(body, { sha256, size: body.length })).key };
    }
  }));
  return refs;
}

/** Writes the run (every 10th event a FileChanged revision, the rest processes, output and rollouts); returns the signer's public key and the revisions written. */
async function writeRun(events: SqliteEventStore, artifacts: FsArtifactStore, home: string): Promise<{ publicKeyPem: string; fileRevisions: number }> {
  const key = initSigningKey(home);
  const revisions = await putAll(artifacts, Array.from({ length: FILE_REVISIONS }, (_, i) => source(i % FILES, Math.floor(i / FILES))));
  const outputs = await putAll(artifacts, Array.from({ length: 100 }, (_, i) => `step ${i}: loss ${(1 / (i + 1)).toFixed(4)}\n`.repeat(20)));
  const w = new SignedRunWriter(events, RUN, key, { headEvery: HEAD_EVERY, batch: 2000 });
  await w.add('RunScheduled', { task: 'ref-arith', agent: 'bench', baseModel: 'tiny-base', budgetSeconds: 43_200, seed: 0, mode: 'free' });
  await w.add('WorkspacePrepared', { workspace: '/ws', sandbox: 'none', mounts: [], dataManifest: [] });
  await w.add('AgentStarted', { command: 'bash start.sh' });
  // Non-head events so that, with a head after every HEAD_EVERY of them and a final one, the run has exactly EVENTS.
  let nonHead = 0;
  while (nonHead + Math.ceil(nonHead / HEAD_EVERY) < EVENTS) nonHead++;
  const body = nonHead - 5;
  const fileEvery = Math.floor(body / FILE_REVISIONS);
  let revision = 0;
  let pid = 1000;
  for (let i = 0; i < body; i++) {
    if (i % fileEvery === 0 && revision < FILE_REVISIONS) {
      const ref = revisions[revision];
      const file = revision % FILES;
      await w.add('FileChanged', {
        path: `code/pkg${file % 25}/module${file}.py`, op: revision < FILES ? 'create' : 'modify', ...ref,
        ...(revision >= FILES ? { previousSha256: revisions[revision - FILES].sha256 } : {}), observedAt: '2026-01-01T00:00:00.000Z',
      });
      revision += 1;
    } else if (i % 4 === 0) {
      await w.add('ProcessStarted', { pid: ++pid, ppid: 1, argv: [...(pid % 3 ? ['accelerate', 'launch'] : ['lm_eval', '--include_path']), `code/pkg${pid % 25}/module${pid % FILES}.py`], cwd: '/ws', observedAt: '2026-01-01T00:00:00.000Z' });
    } else if (i % 4 === 1) {
      await w.add('ProcessExited', { pid, exitCode: 0, durationMs: 1200 + (pid % 700), cpuMs: 900, peakRssKb: 120_000, observedAt: '2026-01-01T00:00:00.000Z' });
    } else if (i % 4 === 2) {
      await w.add('AgentOutput', { stream: 'stdout', chunk: outputs[(i >> 2) % outputs.length], observedAt: '2026-01-01T00:00:00.000Z' });
    } else {
      await w.add('RolloutBatchRecorded', { env: 'household', episodes: 8, steps: 160, successRate: (i % 100) / 100, meanReturn: (i % 37) / 10, observedAt: '2026-01-01T00:00:00.000Z' });
    }
  }
  await w.add('AgentExited', { exitCode: 0, reason: 'completed' });
  await w.add('RunCompleted', { submissions: 0 });
  await w.seal();
  return { publicKeyPem: key.publicKeyPem, fileRevisions: revision };
}

/** What `a2rl verify` checks first: the chain from the stored events, and every referenced blob's sha256 and size. */
async function verifyFromStores(events: SqliteEventStore, artifacts: FsArtifactStore, publicKeyPem: string): Promise<{ chain_s: number; artifacts_s: number; failures: number }> {
  let t = performance.now();
  const stored: A2rlEvent[] = [];
  for await (const r of events.readStream(streamName(RUN))) stored.push(r.event);
  const chain = verifyEventChain(RUN, stored.map((e) => ({ bytes: encodeEvent(e) })), publicKeyPem);
  const chain_s = seconds(t);
  t = performance.now();
  let failures = chain.failures.length;
  for (const item of expectedManifest(stored, true)) {
    const hash = createHash('sha256');
    let size = 0;
    for await (const chunk of await artifacts.get(item.sha256)) {
      hash.update(chunk as Buffer);
      size += (chunk as Buffer).length;
    }
    if (hash.digest('hex') !== item.sha256 || size !== item.size) failures += 1;
  }
  return { chain_s, artifacts_s: seconds(t), failures };
}

function parseOptions(argv: string[]): { cliOnly: boolean } {
  const o = { cliOnly: false };
  for (const arg of argv) {
    if (arg === '--cli-only') o.cliOnly = true;
    else throw new Error(`audit bench: bad option "${arg}" (--cli-only)`);
  }
  return o;
}

export async function auditBench(): Promise<void> {
  const { cliOnly } = parseOptions(process.argv.slice(3));
  const loadStart = os.loadavg()[0];
  console.log(`load average at start: ${loadStart.toFixed(2)} (1 min) on ${os.availableParallelism()} cores`);
  // The bench directory is an A2RL_HOME (ledger.db, artifacts/, the signing key), so the CLI runs on it as it is.
  const benchDir = mkdtempSync(path.join(os.tmpdir(), 'a2rl-bench-audit-'));
  try {
    const events = await SqliteEventStore.open(path.join(benchDir, 'ledger.db'));
    const artifacts = await FsArtifactStore.open(path.join(benchDir, 'artifacts'));
    let t = performance.now();
    const { publicKeyPem, fileRevisions } = await writeRun(events, artifacts, benchDir);
    const build_s = seconds(t);
    const count = Number(await events.streamRevision(streamName(RUN))) + 1;
    console.log(`run: ${count} events (${fileRevisions} FileChanged revisions, a signed head every ${HEAD_EVERY}) written in ${build_s} s`);

    let inProcess: { verified: Awaited<ReturnType<typeof verifyFromStores>>; verify_s: number; export_s: number; bundle_bytes: number; exported: Awaited<ReturnType<typeof exportBundle>>; verify_bundle_s: number } | null = null;
    if (!cliOnly) {
      const verified = await verifyFromStores(events, artifacts, publicKeyPem);
      const verify_s = Math.round((verified.chain_s + verified.artifacts_s) * 100) / 100;
      console.log(`verify (chain + artifacts): ${verify_s} s (chain ${verified.chain_s} s, artifacts ${verified.artifacts_s} s), ${verified.failures} failures`);

      const bundle = path.join(benchDir, 'bundle.tar.gz');
      t = performance.now();
      const exported = await exportBundle({ runId: RUN, eventStore: events, artifacts, publicKeyPem, taskLevel: () => 1 }, bundle);
      const export_s = seconds(t);
      const bundle_bytes = statSync(bundle).size;
      console.log(`export: ${export_s} s, ${bundle_bytes} bytes (${exported.events} events, ${exported.heads} heads, ${exported.blobs} blobs)`);

      t = performance.now();
      const offline = await verifyBundle(bundle, { publicKeyPem });
      const verify_bundle_s = seconds(t);
      if (!offline.ok) throw new Error(`the benchmark bundle does not verify: ${offline.failures[0].message}`);
      console.log(`verify-bundle (offline: chain, heads and proofs, blobs, reports re-rendered): ${verify_bundle_s} s`);
      inProcess = { verified, verify_s, export_s, bundle_bytes, exported, verify_bundle_s };
    }

    // The reference: plain sha256sum over the same bytes (events as NDJSON, every blob).
    const ndjson = path.join(benchDir, 'events.ndjson');
    const out = createWriteStream(ndjson);
    for await (const r of storedEvents(events, streamName(RUN))) if (!out.write(Buffer.concat([r.bytes, Buffer.from('\n')]))) await once(out, 'drain');
    out.end();
    await once(out, 'finish');
    await events.close();
    await artifacts.close();
    t = performance.now();
    await exec('sh', ['-c', 'find "$1" -type f -print0 | xargs -0 sha256sum "$2" > /dev/null', 'sh', path.join(benchDir, 'artifacts', 'sha256'), ndjson]);
    const sha256_reference_s = seconds(t);
    console.log(`sha256sum over events.ndjson + the blobs: ${sha256_reference_s} s`);
    rmSync(ndjson);

    const verify = await runCli(benchDir, ['verify', RUN]);
    const verify_vs_sha256sum = Math.round((verify.seconds / sha256_reference_s) * 10) / 10;
    console.log(`a2rl verify: ${verify.seconds} s (${stagesOf(verify)}), ${verify_vs_sha256sum}× sha256sum, peak RSS ${verify.peakRssMb} MB`);
    // --rebuild compares projections rebuilt from zero with the live read models: bring those up to date first.
    const caughtUp = await runCli(benchDir, ['projections', 'rebuild']);
    console.log(`read models caught up (a2rl projections rebuild): ${caughtUp.seconds} s, peak RSS ${caughtUp.peakRssMb} MB`);
    const deep = await runCli(benchDir, ['verify', RUN, '--rebuild']);
    console.log(`a2rl verify --rebuild: ${deep.seconds} s (${stagesOf(deep)}), peak RSS ${deep.peakRssMb} MB`);
    const loadEnd = os.loadavg()[0];

    // Replay latency: test/bench/replay.bench.ts builds its own run of 10,000 revisions with the
    // workspace-revisions index and times materialising the workspace at random seqs.
    const replay = cliOnly ? null : await replayLatency();
    if (replay) console.log(`replay at ${replay.samples} random seqs (${replay.revisions} revisions): p50 ${replay.p50_ms} ms, p99 ${replay.p99_ms} ms, max ${replay.max_ms} ms`);

    if (inProcess && replay) {
      const { exported, bundle_bytes, verified, verify_bundle_s } = inProcess;
      console.log(JSON.stringify({ bench: 'audit', events: count, file_revisions: fileRevisions, heads: exported.heads, blobs: exported.blobs, bundle_bytes, verify_chain_s: verified.chain_s, verify_artifacts_s: verified.artifacts_s, verify_bundle_s, replay_p50_ms: replay.p50_ms }));
    }
    console.log(JSON.stringify({
      bench: 'audit', events: count, ...(inProcess && replay ? { verify_s: inProcess.verify_s, export_s: inProcess.export_s, replay_p99_ms: replay.p99_ms } : { cli_only: true }), sha256_reference_s,
      verify_cli_s: verify.seconds, verify_vs_sha256sum, verify_peak_rss_mb: verify.peakRssMb,
      verify_rebuild_s: deep.seconds, verify_rebuild_peak_rss_mb: deep.peakRssMb,
      load_1m_start: Math.round(loadStart * 100) / 100, load_1m_end: Math.round(loadEnd * 100) / 100, cores: os.availableParallelism(),
    }));
  } finally {
    rmSync(benchDir, { recursive: true, force: true });
  }
}
