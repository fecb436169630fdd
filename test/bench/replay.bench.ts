import { mkdtemp, rm } from 'node:fs/promises';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import type { A2rlEvent } from '../../modules/ledger/events/catalog.js';
import { buildEvent } from '../../modules/ledger/events/envelope.js';
import { openReplayHarness } from '../../modules/replay/testing/replay-harness.js';

// Replay latency for `npm run bench -- audit`: a synthetic run of `files × revisionsPerFile`
// FileChanged revisions (default 500 × 20 = 10,000) written through the real SQLite ledger,
// filesystem artifact store and workspace-revision projection, then `materialize` timed at seeded
// random seqs, each into a fresh directory (the whole call: resolve, index read, blob reads,
// sha256 checks, file writes). Run alone: `node dist/test/bench/replay.bench.js`.

export interface ReplayLatencyOptions {
  files?: number;
  revisionsPerFile?: number;
  /** Timed materialisations (after one untimed warm-up). */
  samples?: number;
  seed?: number;
}

export interface ReplayLatency {
  revisions: number;
  events: number;
  samples: number;
  /** Writing the run (events and blobs) and catching the index up, for context. */
  build_s: number;
  index_s: number;
  p50_ms: number;
  p99_ms: number;
  max_ms: number;
}

const RUN = 'bench-replay';
const T0 = Date.parse('2026-01-01T00:00:00.000Z');
const APPEND_BATCH = 1000;
const PUT_CONCURRENCY = 16;

/** mulberry32: a small seeded PRNG, so every run of the benchmark picks the same seqs. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), a | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A small source file whose content differs per file and revision (about 200 bytes). */
function content(file: number, revision: number): string {
  return `// file ${file}, revision ${revision}\nexport const file = ${file};\nexport const revision = ${revision};\n${'// padding line\n'.repeat(8)}`;
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

export async function replayLatency(opts: ReplayLatencyOptions = {}): Promise<ReplayLatency> {
  const files = opts.files ?? 500;
  const revisionsPerFile = opts.revisionsPerFile ?? 20;
  const samples = opts.samples ?? 100;
  const random = prng(opts.seed ?? 1);
  const h = await openReplayHarness();
  try {
    const started = performance.now();
    const at = (seq: number) => new Date(T0 + seq * 100);
    const events: A2rlEvent[] = [
      buildEvent('RunScheduled', RUN, 0, at(0), { task: 'bench', agent: 'bench', baseModel: 'base', budgetSeconds: 3600, seed: 0, mode: 'free' }),
      buildEvent('WorkspacePrepared', RUN, 1, at(1), { workspace: '/ws', sandbox: 'none', mounts: [], dataManifest: [] }),
    ];
    // Revision r of every file, then r+1: each file's revisions are spread over the whole run.
    const jobs = Array.from({ length: files * revisionsPerFile }, (_, i) => ({ file: i % files, revision: Math.floor(i / files) }));
    const refs = new Array<Awaited<ReturnType<typeof h.blob>>>(jobs.length);
    let next = 0;
    await Promise.all(Array.from({ length: PUT_CONCURRENCY }, async () => {
      while (next < jobs.length) {
        const i = next++;
        refs[i] = await h.blob(content(jobs[i].file, jobs[i].revision));
      }
    }));
    jobs.forEach(({ file, revision }, i) => {
      const seq = events.length;
      const ref = refs[i];
      events.push(buildEvent('FileChanged', RUN, seq, at(seq), {
        path: `code/pkg${file % 25}/module${file}.mjs`, op: revision === 0 ? 'create' : 'modify',
        sha256: ref.sha256, size: ref.size, key: ref.key, observedAt: at(seq).toISOString(),
      }));
    });
    for (let i = 0; i < events.length; i += APPEND_BATCH) await h.append(events.slice(i, i + APPEND_BATCH));
    const written = performance.now();
    await h.replay.state(RUN, 0); // catches the index up
    const indexed = performance.now();

    const lastSeq = events.length - 1;
    const times: number[] = [];
    const outRoot = await mkdtemp(path.join(h.dir, 'out-'));
    for (let i = 0; i <= samples; i++) {
      const seq = Math.floor(random() * (lastSeq + 1));
      const out = path.join(outRoot, String(i));
      const t = performance.now();
      await h.replay.materialize(RUN, seq, out);
      if (i > 0) times.push(performance.now() - t); // sample 0 warms up
      await rm(out, { recursive: true, force: true });
    }
    times.sort((a, b) => a - b);
    const ms = (x: number) => Math.round(x * 10) / 10;
    return {
      revisions: jobs.length,
      events: events.length,
      samples,
      build_s: ms((written - started) / 1000),
      index_s: ms((indexed - written) / 1000),
      p50_ms: ms(percentile(times, 50)),
      p99_ms: ms(percentile(times, 99)),
      max_ms: ms(times[times.length - 1]),
    };
  } finally {
    await h.close();
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  console.log(JSON.stringify({ bench: 'replay', ...(await replayLatency()) }));
}
