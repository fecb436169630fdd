import { execFile } from 'node:child_process';
import { createHash, randomFill } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { access, chmod, mkdir, mkdtemp, open, readdir, rm, statfs, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { promisify } from 'node:util';
import type { Readable } from 'node:stream';
import { FsArtifactStore } from '../../infra/artifacts/fs-artifact-store.js';
import { SqliteEventStore } from '../../infra/eventstore/sqlite-event-store.js';
import { openReadModels } from '../../infra/readmodels/data-source.js';
import type { ArtifactInfo, ArtifactStore, PutResult } from '../../modules/artifacts/artifact-store.port.js';
import { hashFile } from '../../modules/artifacts/file-hash.js';
import { artifactRefs } from '../../modules/audit/artifact-refs.js';
import { checkArtifacts } from '../../modules/audit/verify.service.js';
import { FakeTask } from '../../modules/grading/testing/grading-fixtures.js';
import { ActiveRun } from '../../modules/grading/run-registry.js';
import { SubmissionService } from '../../modules/grading/submission.service.js';
import type { A2rlEvent, EventData } from '../../modules/ledger/events/catalog.js';
import { LedgerService } from '../../modules/ledger/ledger.service.js';
import { ProjectionRunner } from '../../modules/readmodels/projection-runner.js';
import { ReplayService } from '../../modules/replay/replay.service.js';
import type { RunContext } from '../../modules/run-context/run-context.js';
import type { WorkspaceLayout } from '../../modules/workspace-fs/layout.js';
import { PAPER_LIMITS } from '../../modules/sandbox/limits.js';
import { IntegrityChecks } from '../../modules/runs/steps/integrity.js';
import { captureIntegrityBaseline } from '../../modules/runs/workspace-integrity.js';
import type { ManifestEntry } from '../../modules/workspace-fs/layout.js';
import { workspaceRevisionsProjection } from '../../projections/workspace-revisions/workspace-revisions.projection.js';
import type { EvaluationResult } from '../../tasks/task-pack.js';

// `npm run bench -- checkpoint [--gb N]`: the submit path and the read-only world at real sizes. A
// synthetic safetensors checkpoint (valid header, N GiB of random tensor data, config and tokenizer
// files; default 3) in a run's workspace is submitted through the real SubmissionService (the /submit
// handler without HTTP: stage, archive, the integrity check of data/ and models/ before grading) with
// the filesystem artifact store and a SQLite ledger, then the archived blobs are checked as
// `a2rl verify` does and the checkpoint is replayed from the ledger. `cp -r` of the same directory on
// the same filesystem is the reference. The workspace's models/ holds a sharded base model of the same
// size: its end-of-run integrity check is timed both ways, every file re-hashed (an unsandboxed run,
// and every run before the stat comparison) and stat-compared with the last check (a sandboxed run).
// Place: A2RL_BENCH_DIR (default the OS temp dir), which needs about 5× the size free (scaled down
// with a note otherwise). A2RL_BENCH_CHECKPOINT_COPY=1 archives through put() (a second copy) instead
// of putFile() (a link). Files are read from a warm page cache: hashing is CPU-bound here.

const GiB = 1024 ** 3;
const MiB = 1024 ** 2;
const DEFAULT_GIB = 3;
const MIN_BYTES = 64 * MiB;
/** Peak use is 4× (base model, original, staged copy linked as the blob, a cp or replayed copy); the rest is headroom. */
const DISK_FACTOR = 5;
/** The submit path (stage + archive + integrity before grading) against one `cp -r` of the same bytes. */
const GOAL_RATIO = 1.5;
/** The base model's shards: Hugging Face names, at most this size each. */
const SHARD_BYTES = 512 * MiB;
const TENSOR_BYTES = 64 * MiB;
const COLUMNS = 1024; // BF16: 2 bytes each
const RUN = 'bench-checkpoint';
const CHECKPOINT = 'output/ckpt';
/** A2RL_BENCH_CHECKPOINT_COPY=1: the store copies staged files in (put) instead of linking them (putFile), for comparison. */
const COPY_INTO_STORE = process.env.A2RL_BENCH_CHECKPOINT_COPY === '1';

const exec = promisify(execFile);
const seconds = (ms: number) => Math.round(ms / 10) / 100;
/** This process's CPU time (all threads, user + system) from a process.cpuUsage() difference. */
const cpuMs = (used: NodeJS.CpuUsage) => (used.user + used.system) / 1000;

export async function checkpointBench(): Promise<void> {
  const asked = parseOptions(process.argv.slice(3));
  const base = process.env.A2RL_BENCH_DIR ?? os.tmpdir();
  const dir = await mkdtemp(path.join(base, 'a2rl-bench-checkpoint-'));
  try {
    const { bytes: target, note } = await sizeFor(dir, asked);
    if (note) console.log(note);
    console.log(`bench dir ${dir}`);
    await runBench(dir, target, note);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** `--gb N` (GiB, fractions allowed): the checkpoint's size, and the base model's. */
function parseOptions(argv: string[]): number {
  let gb = DEFAULT_GIB;
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--gb' && /^\d+(\.\d+)?$/.test(argv[i + 1] ?? '')) gb = Number(argv[++i]);
    else throw new Error(`checkpoint bench: bad option "${argv[i]}" (--gb N)`);
  }
  const bytes = Math.floor((gb * GiB) / TENSOR_BYTES) * TENSOR_BYTES;
  if (bytes < MIN_BYTES) throw new Error(`checkpoint bench: --gb ${gb} is under the ${MIN_BYTES / MiB} MiB minimum`);
  return bytes;
}

/** The checkpoint size: the asked one, or scaled down to what the disk holds (with a note saying so). */
async function sizeFor(dir: string, asked: number): Promise<{ bytes: number; note: string | null }> {
  const fs = await statfs(dir);
  const free = fs.bavail * fs.bsize;
  if (free >= DISK_FACTOR * asked) return { bytes: asked, note: null };
  const fits = Math.floor(free / DISK_FACTOR / TENSOR_BYTES) * TENSOR_BYTES;
  if (fits < MIN_BYTES) throw new Error(`${dir} has ${gib(free)} free: not enough for even a ${MIN_BYTES / MiB} MiB checkpoint (${DISK_FACTOR}× needed)`);
  return { bytes: fits, note: `scaled down: ${gib(free)} free on the bench filesystem, ${DISK_FACTOR}× the checkpoint needed; ${gib(fits)} instead of ${gib(asked)}` };
}

const gib = (n: number) => `${(n / GiB).toFixed(2)} GiB`;

interface Stores {
  events: SqliteEventStore;
  artifacts: FsArtifactStore;
  ledger: LedgerService;
  replay: ReplayService;
  close(): Promise<void>;
}

async function runBench(dir: string, target: number, note: string | null): Promise<void> {
  const load1Before = os.loadavg()[0];
  const ws = layout(path.join(dir, 'ws'));
  const ckptDir = path.join(ws.root, CHECKPOINT);
  const made = Date.now();
  const original = await writeCheckpoint(ckptDir, target);
  const models = await writeBaseModel(ws, target);
  await exec('sync');
  console.log(`checkpoint: ${original.bytes} bytes in ${original.files.size} files (model.safetensors ${original.modelBytes} bytes); models/: ${models.bytes} bytes in ${models.manifest.length} files; written in ${seconds(Date.now() - made)} s`);

  const cpFirst = await timeCp(ckptDir, path.join(dir, 'cp'));
  const stores = await openStores(dir);
  try {
    await recordRunStart(stores.ledger);
    const integrity = new IntegrityChecks(sessionOf(stores), ws, models.manifest, await captureIntegrityBaseline(ws, models.manifest), 'bwrap');
    const submit = await timeSubmit(stores, ws, path.join(dir, 'staging'), integrity);
    const cpAfter = await timeCp(ckptDir, path.join(dir, 'cp'));
    const cpSync = await timeCp(ckptDir, path.join(dir, 'cp'), true);
    const hash = await timeHash(path.join(ckptDir, 'model.safetensors'));
    const verify = await timeVerify(stores);
    const replay = await timeReplay(stores, submit.receivedSeq, path.join(dir, 'replayed'), original.files);
    const end = await timeEndChecks(stores, ws, models.manifest, integrity);

    const cp = Math.min(cpFirst.ms, cpAfter.ms);
    const cpCpu = cpFirst.cpuMs === null || cpAfter.cpuMs === null ? null : Math.min(cpFirst.cpuMs, cpAfter.cpuMs);
    const submitMs = submit.stageMs + submit.archiveMs + submit.integrityMs;
    const submitCpu = submit.stageCpuMs + submit.archiveCpuMs + submit.integrityCpuMs;
    const ratio = submitMs / cp;
    const r2 = (x: number) => Math.round(x * 100) / 100;
    const cpuOf = (ms: number | null) => (ms === null ? 'unmeasured' : `${seconds(ms)} s`);
    console.log(`cp -r:             ${seconds(cpFirst.ms)} s before, ${seconds(cpAfter.ms)} s after (reference: ${seconds(cp)} s, ${mbps(original.bytes, cp)} MB/s; CPU ${cpuOf(cpCpu)})`);
    console.log(`cp -r + fsync:     ${seconds(cpSync.ms)} s (for comparison: the store fsyncs its blobs, cp does not)`);
    console.log(`stage (walk; read, hash and private copy in one overlapped pass, flushed in the background): ${seconds(submit.stageMs)} s (CPU ${cpuOf(submit.stageCpuMs)})`);
    console.log(`archive (store put: link and check the size (hashed as staged) or write and verify the hash, fsync): ${seconds(submit.archiveMs)} s (CPU ${cpuOf(submit.archiveCpuMs)}; ${submit.storeCalls.putFile} files linked in, ${submit.storeCalls.put} bodies copied in)`);
    console.log(`integrity of data/ and models/ before grading (stat, ${models.manifest.length} files): ${seconds(submit.integrityMs)} s (CPU ${cpuOf(submit.integrityCpuMs)})`);
    console.log(`one sha256 pass over model.safetensors (hashFile: 1 MiB synchronous reads into one buffer, OpenSSL): ${seconds(hash.ms)} s (CPU ${cpuOf(hash.cpuMs)}; ${r2(hash.ms / cp)}× cp, the floor of a path that hashes what it stores)`);
    console.log(`submit until the evaluator starts: ${seconds(submit.untilGradeMs)} s; whole request: ${seconds(submit.totalMs)} s`);
    console.log(`verify (blob check, ${verify.blobs} blobs): ${seconds(verify.ms)} s (CPU ${cpuOf(verify.cpuMs)})`);
    console.log(`replay (materialise at seq ${submit.receivedSeq}): ${seconds(replay.ms)} s (CPU ${cpuOf(replay.cpuMs)}); checkpoint files identical: ${replay.identical}`);
    console.log(`end-of-run integrity of ${gib(models.bytes)} of models/: every file re-hashed ${seconds(end.full.ms)} s (CPU ${cpuOf(end.full.cpuMs)}), stat-compared ${seconds(end.stat.ms)} s (CPU ${cpuOf(end.stat.cpuMs)}); both found it intact`);
    console.log(`ratio (stage + archive + integrity) / cp = ${r2(ratio)} (goal ≤ ${GOAL_RATIO}); by CPU time ${cpCpu ? r2(submitCpu / cpCpu) : 'unmeasured'}; against cp + fsync ${r2(submitMs / cpSync.ms)}`);
    const notes = [
      note,
      COPY_INTO_STORE ? 'staged files copied into the store (A2RL_BENCH_CHECKPOINT_COPY=1), not linked' : null,
      'driven through SubmissionService.submit (no HTTP, no sandbox) with IntegrityChecks.beforeGrading as its hook, FsArtifactStore, SQLite ledger, checkArtifacts, ReplayService.materialize; end checks: IntegrityChecks.atEnd for an unsandboxed run (full) and a sandboxed one (stat); warm page cache',
    ].filter(Boolean);
    console.log(JSON.stringify({
      bench: 'checkpoint',
      bytes: original.bytes,
      models_bytes: models.bytes,
      models_files: models.manifest.length,
      cp_s: seconds(cp),
      cp_fsync_s: seconds(cpSync.ms),
      stage_s: seconds(submit.stageMs),
      archive_s: seconds(submit.archiveMs),
      integrity_grading_s: seconds(submit.integrityMs),
      verify_s: seconds(verify.ms),
      replay_s: seconds(replay.ms),
      hash_s: seconds(hash.ms),
      /** The floor of any path that hashes what it stores: one sha256 pass over the largest file, against cp. */
      hash_vs_cp: r2(hash.ms / cp),
      ratio: r2(ratio),
      ratio_vs_cp_fsync: r2(submitMs / cpSync.ms),
      cpu_ratio: cpCpu ? r2(submitCpu / cpCpu) : null,
      /** CPU seconds (user + system) of cp, of the submit path and of one sha256 pass: on a saturated machine wall time follows these. */
      cp_cpu_s: cpCpu === null ? null : seconds(cpCpu),
      submit_cpu_s: seconds(submitCpu),
      hash_cpu_s: hash.cpuMs === null ? null : seconds(hash.cpuMs),
      goal: GOAL_RATIO,
      meets: ratio <= GOAL_RATIO,
      end_full_s: seconds(end.full.ms),
      end_stat_s: seconds(end.stat.ms),
      end_speedup: end.stat.ms > 0 ? r2(end.full.ms / end.stat.ms) : null,
      end_stat_vs_cp: r2(end.stat.ms / cp),
      replayIdentical: replay.identical,
      load1: { before: r2(load1Before), after: r2(os.loadavg()[0]) },
      cores: os.availableParallelism(),
      note: notes.join('; '),
    }));
  } finally {
    await stores.close();
  }
}

function layout(root: string): WorkspaceLayout {
  return {
    root,
    codeDir: path.join(root, 'code'),
    dataDir: path.join(root, 'data'),
    modelsDir: path.join(root, 'models'),
    baseModelDir: path.join(root, 'models', 'base'),
    outputDir: path.join(root, 'output'),
    descriptionFile: path.join(root, 'description.md'),
    instructionsFile: path.join(root, 'instructions.md'),
    runMetaFile: path.join(root, 'run_meta.json'),
  };
}

interface Original {
  bytes: number;
  modelBytes: number;
  /** sha256 by checkpoint-relative path. */
  files: Map<string, string>;
}

/** A Hugging Face-style checkpoint: model.safetensors of random BF16 tensors (a valid header), config and tokenizer files. */
async function writeCheckpoint(dir: string, target: number): Promise<Original> {
  await mkdir(dir, { recursive: true });
  const files = new Map<string, string>();
  const small: Record<string, string> = {
    'config.json': JSON.stringify({ architectures: ['LlamaForCausalLM'], model_type: 'llama', hidden_size: COLUMNS, torch_dtype: 'bfloat16' }, null, 2),
    'generation_config.json': JSON.stringify({ do_sample: false, max_new_tokens: 256 }),
    'tokenizer_config.json': JSON.stringify({ tokenizer_class: 'PreTrainedTokenizerFast', eos_token: '</s>' }),
    'tokenizer.json': JSON.stringify({ version: '1.0', model: { type: 'BPE', vocab: Object.fromEntries(Array.from({ length: 4096 }, (_, i) => [`t${i}`, i])), merges: [] } }),
  };
  let bytes = 0;
  for (const [name, text] of Object.entries(small)) {
    await writeFile(path.join(dir, name), text);
    files.set(name, createHash('sha256').update(text).digest('hex'));
    bytes += Buffer.byteLength(text);
  }
  const model = await writeSafetensors(path.join(dir, 'model.safetensors'), target);
  files.set('model.safetensors', model.sha256);
  return { bytes: bytes + model.size, modelBytes: model.size, files };
}

interface BaseModel {
  bytes: number;
  /** data/ and models/ as WorkspacePrepared records them. */
  manifest: ManifestEntry[];
}

/**
 * data/ and models/ of the workspace: a base model of about `target` bytes in Hugging Face shards
 * (`model-0000i-of-0000n.safetensors` and their index, config, tokenizer) and a small data file,
 * files read-only as a prepared workspace's are.
 */
async function writeBaseModel(ws: WorkspaceLayout, target: number): Promise<BaseModel> {
  await mkdir(ws.baseModelDir, { recursive: true });
  await mkdir(ws.dataDir, { recursive: true });
  const manifest: ManifestEntry[] = [];
  const add = (dir: string, name: string, sha256: string, size: number) => manifest.push({ path: path.relative(ws.root, path.join(dir, name)).split(path.sep).join('/'), sha256, size });
  const shards = Math.max(1, Math.ceil(target / SHARD_BYTES));
  const shardBytes = Math.max(TENSOR_BYTES, Math.floor(target / shards / TENSOR_BYTES) * TENSOR_BYTES);
  const names = Array.from({ length: shards }, (_, i) => `model-${String(i + 1).padStart(5, '0')}-of-${String(shards).padStart(5, '0')}.safetensors`);
  let bytes = 0;
  for (const name of names) {
    const shard = await writeSafetensors(path.join(ws.baseModelDir, name), shardBytes);
    add(ws.baseModelDir, name, shard.sha256, shard.size);
    bytes += shard.size;
  }
  const small: Array<[string, string, string]> = [
    [ws.baseModelDir, 'config.json', JSON.stringify({ architectures: ['LlamaForCausalLM'], model_type: 'llama', hidden_size: COLUMNS })],
    [ws.baseModelDir, 'model.safetensors.index.json', JSON.stringify({ metadata: { total_size: bytes }, weight_map: Object.fromEntries(names.map((n, i) => [`model.layers.${i}.mlp.weight`, n])) })],
    [ws.baseModelDir, 'tokenizer.json', JSON.stringify({ version: '1.0', model: { type: 'BPE', vocab: {}, merges: [] } })],
    [ws.dataDir, 'train.jsonl', '{"prompt":"1+1","answer":"2"}\n'.repeat(1000)],
  ];
  for (const [dir, name, text] of small) {
    await writeFile(path.join(dir, name), text);
    add(dir, name, createHash('sha256').update(text).digest('hex'), Buffer.byteLength(text));
    bytes += Buffer.byteLength(text);
  }
  // Files only: directories stay writable so that the bench directory can be removed by any user.
  for (const entry of manifest) await chmod(path.join(ws.root, entry.path), 0o444);
  return { bytes, manifest: manifest.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0)) };
}

/** safetensors: u64 LE header length, JSON header (space-padded to 8 bytes), then the tensors' bytes. */
async function writeSafetensors(file: string, target: number): Promise<{ sha256: string; size: number }> {
  const tensorBytes = Math.min(TENSOR_BYTES, target);
  const count = Math.max(1, Math.floor(target / tensorBytes));
  const header: Record<string, unknown> = { __metadata__: { format: 'pt' } };
  for (let i = 0; i < count; i++) {
    header[`model.layers.${i}.mlp.weight`] = { dtype: 'BF16', shape: [tensorBytes / 2 / COLUMNS, COLUMNS], data_offsets: [i * tensorBytes, (i + 1) * tensorBytes] };
  }
  let json = JSON.stringify(header);
  json += ' '.repeat((8 - (json.length % 8)) % 8);
  const prefix = Buffer.alloc(8 + json.length);
  prefix.writeBigUInt64LE(BigInt(json.length));
  prefix.write(json, 8, 'utf8');
  const hash = createHash('sha256').update(prefix);
  const out = await open(file, 'wx');
  try {
    await out.write(prefix);
    const chunk = Buffer.allocUnsafe(8 * MiB);
    for (let left = count * tensorBytes; left > 0; ) {
      const piece = chunk.subarray(0, Math.min(chunk.length, left));
      await promisify(randomFill)(piece);
      hash.update(piece);
      await out.write(piece);
      left -= piece.length;
    }
    await out.sync();
  } finally {
    await out.close();
  }
  return { sha256: hash.digest('hex'), size: prefix.length + count * tensorBytes };
}

interface Timing {
  ms: number;
  /** CPU time of the work (user + system); null where it cannot be measured (cp without /usr/bin/time). */
  cpuMs: number | null;
}

/** `cp -r src dest` (dest removed afterwards), its CPU time by /usr/bin/time; with `fsync`, `sync` of the copied files is included. */
async function timeCp(src: string, dest: string, fsync = false): Promise<Timing> {
  await exec('sync');
  const timed = await access('/usr/bin/time').then(() => true, () => false);
  const t = performance.now();
  const { stderr } = timed ? await exec('/usr/bin/time', ['-f', 'cpu %U %S', 'cp', '-r', src, dest]) : await exec('cp', ['-r', src, dest]);
  if (fsync) await exec('sync', (await readdir(dest)).map((name) => path.join(dest, name)));
  const ms = performance.now() - t;
  await rm(dest, { recursive: true, force: true });
  const cpu = /cpu ([\d.]+) ([\d.]+)/.exec(stderr);
  return { ms, cpuMs: cpu ? (Number(cpu[1]) + Number(cpu[2])) * 1000 : null };
}

async function openStores(dir: string): Promise<Stores> {
  const events = await SqliteEventStore.open(path.join(dir, 'ledger.db'));
  const artifacts = await FsArtifactStore.open(path.join(dir, 'artifacts'));
  const readModels = await openReadModels(`sqlite://${path.join(dir, 'read-models.db')}`);
  const runner = new ProjectionRunner(events, readModels, [workspaceRevisionsProjection]);
  return {
    events,
    artifacts,
    ledger: new LedgerService(events, () => new Date()),
    replay: new ReplayService({ events, readModels, artifacts, catchUp: () => runner.catchUp() }),
    async close() {
      await readModels.destroy();
      await events.close();
      await artifacts.close();
    },
  };
}

/** The run's start. Its WorkspacePrepared lists no file: the base model is not archived, so verify and replay cover the checkpoint only. */
async function recordRunStart(ledger: LedgerService): Promise<void> {
  await ledger.record(RUN, 'RunScheduled', { task: 'bench', agent: 'bench', baseModel: 'base', budgetSeconds: 3600, seed: 0, mode: 'free' });
  await ledger.record(RUN, 'WorkspacePrepared', { workspace: '/ws', sandbox: 'none', mounts: [], dataManifest: [] });
}

/** The artifact store, timing its puts (the archive part of the submit path): wall and this process's CPU. */
class TimedStore implements ArtifactStore {
  readonly backend = 'fs' as const;
  putMs = 0;
  putCpuMs = 0;
  readonly putFile?: ArtifactStore['putFile'];

  constructor(private readonly inner: ArtifactStore, withPutFile: boolean) {
    const putFile = withPutFile ? inner.putFile?.bind(inner) : undefined;
    if (putFile) this.putFile = (file, declared, options) => (this.calls.putFile++, this.timed(() => putFile(file, declared, options)));
  }

  /** How the archive stored: files taken in (putFile) and bodies streamed (put, the manifest included). */
  readonly calls = { putFile: 0, put: 0 };

  put(body: Readable | Buffer, declared: { sha256: string; size: number }): Promise<PutResult> {
    this.calls.put++;
    return this.timed(() => this.inner.put(body, declared));
  }

  private async timed(work: () => Promise<PutResult>): Promise<PutResult> {
    const t = performance.now();
    const cpu = process.cpuUsage();
    try {
      return await work();
    } finally {
      this.putMs += performance.now() - t;
      this.putCpuMs += cpuMs(process.cpuUsage(cpu));
    }
  }

  get(sha256: string): Promise<Readable> {
    return this.inner.get(sha256);
  }

  stat(sha256: string): Promise<ArtifactInfo | null> {
    return this.inner.stat(sha256);
  }

  exists(sha256: string): Promise<boolean> {
    return this.inner.exists(sha256);
  }

  close(): Promise<void> {
    return this.inner.close();
  }
}

/** Notes when grading starts and checks the staged copy holds a readable safetensors header (what a loader reads first). */
class BenchTask extends FakeTask {
  gradingStarted = 0;
  gradingCpu: NodeJS.CpuUsage | null = null;

  override async evaluate(checkpointDir: string): Promise<EvaluationResult> {
    this.gradingStarted = performance.now();
    this.gradingCpu = process.cpuUsage();
    this.calls++;
    const handle = await open(path.join(checkpointDir, 'model.safetensors'), 'r');
    try {
      const prefix = Buffer.alloc(8);
      await handle.read(prefix, 0, 8, 0);
      const length = Number(prefix.readBigUInt64LE());
      const header = Buffer.alloc(length);
      await handle.read(header, 0, length, 8);
      const tensors = Object.keys(JSON.parse(header.toString('utf8'))).length - 1;
      return { score: 0, details: { tensors } };
    } finally {
      await handle.close();
    }
  }
}

interface SubmitTiming {
  stageMs: number;
  archiveMs: number;
  /** The check of data/ and models/ before grading (stat-compared). */
  integrityMs: number;
  /** CPU time of this process for stage, archive and integrity. */
  stageCpuMs: number;
  archiveCpuMs: number;
  integrityCpuMs: number;
  untilGradeMs: number;
  totalMs: number;
  receivedSeq: number;
  storeCalls: { putFile: number; put: number };
}

/** One POST /submit's work through SubmissionService: stage = until the evaluator starts, less the store's puts (archive) and the integrity check. */
async function timeSubmit(stores: Stores, ws: WorkspaceLayout, stagingDir: string, integrity: IntegrityChecks): Promise<SubmitTiming> {
  const task = new BenchTask();
  const artifacts = new TimedStore(stores.artifacts, !COPY_INTO_STORE);
  const ctx: RunContext = {
    runId: RUN,
    task,
    workspace: ws,
    privateDir: path.join(path.dirname(ws.root), 'private'),
    token: 'bench-token-'.padEnd(40, 'x'),
    budgetSeconds: 3600,
    record: (type, data) => stores.ledger.record(RUN, type, data),
    artifacts,
    limits: PAPER_LIMITS,
  };
  const checked = { ms: 0, cpuMs: 0 };
  const beforeGrading = async (submissionId: string) => {
    const t0 = performance.now();
    const cpu0 = process.cpuUsage();
    await integrity.beforeGrading(submissionId);
    checked.ms += performance.now() - t0;
    checked.cpuMs += cpuMs(process.cpuUsage(cpu0));
  };
  const run = new ActiveRun(ctx, new Date(Date.now() + 3600_000), undefined, 0, undefined, beforeGrading);
  const service = new SubmissionService({ evaluatorTimeoutMs: 3600_000, stagingDir, availableGpus: [] });
  await exec('sync');
  const t = performance.now();
  const cpu = process.cpuUsage();
  const answer = await service.submit(run, CHECKPOINT, undefined);
  const totalMs = performance.now() - t;
  if (answer.error || task.calls !== 1) throw new Error(`the submission was not graded: ${answer.error ?? `${task.calls} gradings`}`);
  const untilGradeMs = task.gradingStarted - t;
  const untilGradeCpuMs = task.gradingCpu ? cpuMs(process.cpuUsage(cpu)) - cpuMs(process.cpuUsage(task.gradingCpu)) : 0;
  const events: A2rlEvent[] = [];
  for await (const e of stores.ledger.events(RUN)) events.push(e);
  const received = events.find((e) => e.type === 'SubmissionReceived');
  if (!received) throw new Error('no SubmissionReceived recorded');
  const check = await lastIntegrityCheck(stores);
  if (check?.phase !== 'grading' || check.differences.length) throw new Error(`the check before grading did not find data/ and models/ intact: ${JSON.stringify(check)}`);
  return {
    stageMs: untilGradeMs - artifacts.putMs - checked.ms,
    archiveMs: artifacts.putMs,
    integrityMs: checked.ms,
    stageCpuMs: untilGradeCpuMs - artifacts.putCpuMs - checked.cpuMs,
    archiveCpuMs: artifacts.putCpuMs,
    integrityCpuMs: checked.cpuMs,
    untilGradeMs,
    totalMs,
    receivedSeq: received.seq,
    storeCalls: { ...artifacts.calls },
  };
}

/** What IntegrityChecks needs of a run session: its records go to the bench's ledger; a check that cannot run stops the bench. */
function sessionOf(stores: Stores): ConstructorParameters<typeof IntegrityChecks>[0] {
  return {
    runId: RUN,
    warn: (message: string) => {
      throw new Error(message);
    },
    record: (type, data) => stores.ledger.record(RUN, type, data),
  };
}

async function lastIntegrityCheck(stores: Stores): Promise<EventData<'WorkspaceIntegrityChecked'> | undefined> {
  let last: EventData<'WorkspaceIntegrityChecked'> | undefined;
  for await (const e of stores.ledger.events(RUN)) if (e.type === 'WorkspaceIntegrityChecked') last = e.data;
  return last;
}

/**
 * The end-of-run check of data/ and models/, as IntegrityChecks.atEnd runs it: for an unsandboxed
 * agent (every file re-hashed, what every run did before the stat comparison), then for a sandboxed
 * one (stat-compared with the baseline the check before grading left). Both must find them intact.
 */
async function timeEndChecks(stores: Stores, ws: WorkspaceLayout, manifest: ManifestEntry[], sandboxed: IntegrityChecks): Promise<{ full: Timing; stat: Timing }> {
  const unsandboxed = new IntegrityChecks(sessionOf(stores), ws, manifest, await captureIntegrityBaseline(ws, manifest), 'none');
  const timed = async (checks: IntegrityChecks, full: boolean): Promise<Timing> => {
    await exec('sync');
    const t = performance.now();
    const cpu = process.cpuUsage();
    await checks.atEnd();
    const timing = { ms: performance.now() - t, cpuMs: cpuMs(process.cpuUsage(cpu)) };
    const check = await lastIntegrityCheck(stores);
    if (check?.phase !== 'end' || check.full !== full || check.differences.length) throw new Error(`unexpected end-of-run check: ${JSON.stringify(check)}`);
    return timing;
  };
  return { full: await timed(unsandboxed, true), stat: await timed(sandboxed, false) };
}

/** One sha256 pass over a file as the harness reads it (1 MiB reads): the floor of every step that hashes. */
async function timeHash(file: string): Promise<Timing> {
  await exec('sync');
  const t = performance.now();
  const cpu = process.cpuUsage();
  await hashFile(file); // a2rl's own fastest read: 1 MiB synchronous reads into one buffer, OpenSSL's sha256
  return { ms: performance.now() - t, cpuMs: cpuMs(process.cpuUsage(cpu)) };
}

/** `a2rl verify`'s artifacts stage over the run's events: every referenced blob re-read and hashed. */
async function timeVerify(stores: Stores): Promise<Timing & { blobs: number }> {
  const events: A2rlEvent[] = [];
  for await (const e of stores.ledger.events(RUN)) events.push(e);
  const refs = artifactRefs(events);
  await exec('sync');
  const t = performance.now();
  const cpu = process.cpuUsage();
  const failures = await checkArtifacts(stores.artifacts, refs);
  const ms = performance.now() - t;
  const used = cpuMs(process.cpuUsage(cpu));
  if (failures.length) throw new Error(`verify found ${failures.length} failures: ${failures[0].message}`);
  return { ms, cpuMs: used, blobs: refs.length };
}

/** Replays the workspace right after SubmissionReceived, then compares every checkpoint file with the original by sha256. */
async function timeReplay(stores: Stores, seq: number, out: string, original: Map<string, string>): Promise<Timing & { identical: boolean }> {
  await exec('sync');
  const t = performance.now();
  const cpu = process.cpuUsage();
  await stores.replay.materialize(RUN, seq, out);
  const ms = performance.now() - t;
  const used = cpuMs(process.cpuUsage(cpu));
  let identical = true;
  for (const [name, sha256] of original) {
    const hash = createHash('sha256');
    await pipeline(createReadStream(path.join(out, CHECKPOINT, name)), hash);
    if (hash.digest('hex') !== sha256) identical = false;
  }
  await rm(out, { recursive: true, force: true });
  return { ms, cpuMs: used, identical };
}

const mbps = (bytes: number, ms: number) => Math.round(bytes / 1e6 / (ms / 1000));
