// The ad-hoc agent of `npm run bench -- instrumentation` (test/bench/instrumentation.bench.ts): run
// once inside an a2rl run (sandboxed, traced, watched) and once directly in a temp dir, it does the
// same work and times its own phases. In code/ (cwd-relative): create --files small files in a
// burst, modify --modify of them, delete --delete others, submit a checkpoint (a copy of the base
// model, made before the burst) and time the answer, launch --procs `/bin/true`, then submit again
// once nothing is pending (the answer's time without a burst to order after). A worker
// thread polls `$GRADING_SERVER_URL/health` meanwhile, so a stalled harness shows up as latency.
// Phase times and latencies go to output/ as they happen (output/ is not watched), so a run the
// budget cuts short still leaves what it measured. Without --exit it then sleeps until the budget
// ends it. No dependencies: it runs with the node binary the sandbox mounts.
import { spawnSync } from 'node:child_process';
import { appendFileSync, cpSync, existsSync, mkdirSync, readdirSync, unlinkSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';

const POLL_GAP_MS = 20;
const FILES_PER_DIR = 1000;

if (isMainThread) await main();
else await poll(workerData);

async function main() {
  const opt = (name, fallback) => {
    const i = process.argv.indexOf(`--${name}`);
    return i < 0 ? fallback : Number(process.argv[i + 1]);
  };
  const files = opt('files', 100_000);
  const modify = opt('modify', 10_000);
  const remove = opt('delete', 1_000);
  const procs = opt('procs', 1_000);
  const exitAfter = process.argv.includes('--exit');
  mkdirSync('output', { recursive: true });
  const phasesFile = 'output/bench-phases.jsonl';
  writeFileSync(phasesFile, '');

  // The worker stops when this flag is set; it flushes its samples every second and at the end.
  const stop = new Int32Array(new SharedArrayBuffer(4));
  const worker = new Worker(new URL(import.meta.url), { workerData: { url: `${process.env.GRADING_SERVER_URL}/health`, out: 'output/bench-health.jsonl', stop } });
  const workerDone = new Promise((resolve) => worker.once('exit', resolve));
  await new Promise((resolve) => worker.once('message', resolve)); // polling has begun

  const name = (i) => `code/d${String(Math.floor(i / FILES_PER_DIR)).padStart(3, '0')}/f${String(i).padStart(6, '0')}.py`;
  const phase = async (label, work) => {
    const start = Date.now();
    const count = await work();
    const end = Date.now();
    appendFileSync(phasesFile, `${JSON.stringify({ phase: label, start, end, count })}\n`);
  };
  // The checkpoint is copied in-process before the burst: an exec would wait for the file record itself.
  const checkpoint = copyBaseModel();
  // Modified and deleted files are disjoint: every k-th file is modified, the one after every j-th is deleted.
  const modStep = modify ? Math.max(1, Math.floor(files / modify)) : 0;
  const delStep = remove ? Math.max(1, Math.floor(files / remove)) : 0;
  const modified = (i) => modStep > 0 && i % modStep === 0 && i / modStep < modify;
  const deleted = (i) => delStep > 0 && i % delStep === Math.min(1, delStep - 1) && Math.floor(i / delStep) < remove && !modified(i);

  await phase('create', () => {
    for (let i = 0; i < files; i++) {
      if (i % FILES_PER_DIR === 0) mkdirSync(name(i).slice(0, name(i).lastIndexOf('/')), { recursive: true });
      writeFileSync(name(i), `# module ${i}\nVALUE = ${i * 7}\n`);
    }
    return files;
  });
  await phase('modify', () => {
    let n = 0;
    for (let i = 0; i < files; i++) if (modified(i) && ++n) writeFileSync(name(i), `# module ${i}, revised\nVALUE = ${i * 11}\nEXTRA = True\n`);
    return n;
  });
  await phase('delete', () => {
    let n = 0;
    for (let i = 0; i < files; i++) if (deleted(i) && ++n) unlinkSync(name(i));
    return n;
  });
  // Right after the burst: the harness orders the submission after every file change before it.
  await phase('submit', () => submit(checkpoint));
  await phase('procs', () => {
    let n = 0;
    for (let i = 0; i < procs; i++) if (spawnSync('/bin/true', { stdio: 'ignore' }).status === 0) n++;
    return n;
  });
  await phase('resubmit', () => submit(checkpoint));

  Atomics.store(stop, 0, 1);
  await workerDone;
  appendFileSync(phasesFile, `${JSON.stringify({ phase: 'done', start: Date.now(), end: Date.now() })}\n`);
  if (exitAfter) return;
  setInterval(() => undefined, 60_000); // the budget ends the run
}

/** output/ck: the base model's files (models/<name>/), or an empty directory where there is none (the run off). */
function copyBaseModel() {
  const dir = 'output/ck';
  mkdirSync(dir, { recursive: true });
  const model = existsSync('models') ? readdirSync('models', { withFileTypes: true }).find((e) => e.isDirectory()) : undefined;
  if (model) cpSync(`models/${model.name}`, dir, { recursive: true });
  return dir;
}

/** POST /submit; the HTTP status is the phase's count (the answer's time is the phase's). */
async function submit(modelPath) {
  const res = await fetch(`${process.env.GRADING_SERVER_URL}/submit`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model_path: modelPath }),
  });
  await res.text();
  return res.status;
}

async function poll({ url, out, stop }) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const get = () =>
    new Promise((resolve) => {
      const req = http.get(url, { agent }, (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode));
      });
      req.on('error', () => resolve(0));
    });
  let batch = [];
  let flushed = Date.now();
  const flush = () => {
    if (batch.length) appendFileSync(out, batch.join(''));
    batch = [];
    flushed = Date.now();
  };
  parentPort.postMessage('polling');
  while (Atomics.load(stop, 0) === 0) {
    const t = Date.now();
    const started = performance.now();
    const status = await get();
    batch.push(`${JSON.stringify({ t, ms: Math.round((performance.now() - started) * 1000) / 1000, status })}\n`);
    if (Date.now() - flushed >= 1000) flush();
    await new Promise((resolve) => setTimeout(resolve, POLL_GAP_MS));
  }
  flush();
  agent.destroy();
}
