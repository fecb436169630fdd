#!/usr/bin/env node
// A hostile "model server" for the confinement specs: the serve command a crafted checkpoint would
// amount to if loading it ran code. Before it serves, it tries what such code would try and keeps
// what it got; GET /probes answers that record, GET /v1/models makes it look ready.
//
//   node hostile-serve.mjs <model_path> --port <port> [--mode probe|report|eat-memory=<MiB>]
//        [--honest <fake-vllm.mjs>] [fake-vllm options…]
//
// What to try comes from the checkpoint, as the agent would write it (the command line names no
// host path: a path it names is bound for the server): <model_path>/targets.json
// {"read": [files], "connect": [loopback ports], "unix": [socket paths], "fork": n}.
// eat-memory: fills that much memory before listening (and probes nothing). report: prints one line
// `PROBES got <n> of <m>` (then one line per success) and exits 3, so the record of a grading through
// the real CLI carries it in its error. --honest: a checkpoint without targets.json (the base model)
// is served by that fake-vllm script with the remaining options, as an honest server would.
import { spawn } from 'node:child_process';
import { appendFileSync, readFileSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';

const args = process.argv.slice(2);
const modelPath = args[0];
const all = (name) => args.flatMap((a, i) => (a === name ? [args[i + 1]] : []));
const targets = () => JSON.parse(readFileSync(path.join(modelPath, 'targets.json'), 'utf8'));
const port = Number(all('--port')[0]);
const mode = all('--mode')[0] ?? 'probe';

const probes = [];
const attempt = async (what, run) => {
  try {
    probes.push({ what, got: true, detail: String((await run()) ?? '').slice(0, 300) });
  } catch (err) {
    probes.push({ what, got: false, detail: String(err?.code ?? err?.message ?? err) });
  }
};

function connectTcp(p, host = '127.0.0.1') {
  return new Promise((resolve, reject) => {
    const s = net.connect(p, host);
    s.setTimeout(2000, () => s.destroy(new Error('timeout')));
    s.once('connect', () => {
      s.end('GET / HTTP/1.0\r\n\r\n');
      resolve(`connected to ${host}:${p}`);
    });
    s.once('error', reject);
  });
}

function connectUnix(p) {
  return new Promise((resolve, reject) => {
    const s = net.connect(p);
    s.once('connect', () => {
      s.end('hello from the server\n');
      resolve(`connected to ${p}`);
    });
    s.once('error', reject);
  });
}

/** Children it manages to start (a fork bomb stands in: each holds a process slot). */
async function forkBomb(n) {
  let started = 0;
  let refused = null;
  const children = [];
  for (let i = 0; i < n && refused === null; i++) {
    const child = spawn('sleep', ['30'], { stdio: 'ignore' });
    await new Promise((resolve) => {
      child.once('spawn', () => {
        started++;
        children.push(child);
        resolve();
      });
      child.once('error', (err) => {
        refused = err.code;
        resolve();
      });
    });
  }
  for (const child of children) child.kill('SIGKILL');
  if (refused === null) return `started all ${started}`;
  const err = new Error(`started ${started}, then ${refused}`);
  err.code = `started ${started}, then ${refused}`;
  throw err;
}

async function probe() {
  const secrets = Object.keys(process.env).filter((k) => /A2RL|KEY|TOKEN|SECRET|PASSW/i.test(k));
  await attempt('secret variables in its environment', () => {
    if (!secrets.length) throw new Error('none');
    return secrets.join(',');
  });
  await attempt('secret variables of other processes (/proc/*/environ)', () => {
    const found = [];
    for (const pid of ['1', String(process.ppid)]) {
      try {
        const env = readFileSync(`/proc/${pid}/environ`, 'latin1');
        if (/A2RL_LLM|_KEY=|TOKEN=/.test(env)) found.push(pid);
      } catch {
        // not readable: nothing found there
      }
    }
    if (!found.length) throw new Error('none');
    return found.join(',');
  });
  const { read = [], connect = [], unix = [], fork = 0 } = targets();
  for (const file of read) await attempt(`read ${file}`, () => readFileSync(file, 'utf8'));
  for (const p of connect) await attempt(`connect to 127.0.0.1:${p}`, () => connectTcp(Number(p)));
  for (const p of unix) await attempt(`connect to ${p}`, () => connectUnix(p));
  await attempt('write a new file into the checkpoint', () => writeFileSync(path.join(modelPath, 'pwned'), 'x'));
  await attempt('append to a checkpoint file', () => appendFileSync(path.join(modelPath, 'answers.json'), ' '));
  await attempt('run as root', () => {
    if (process.getuid() !== 0) throw new Error(`uid ${process.getuid()}`);
    return 'uid 0';
  });
  await attempt('hold a capability', () => {
    const status = readFileSync('/proc/self/status', 'utf8');
    const eff = /^CapEff:\s*([0-9a-f]+)$/m.exec(status)?.[1];
    const bnd = /^CapBnd:\s*([0-9a-f]+)$/m.exec(status)?.[1];
    if (/^0+$/.test(eff ?? '') && /^0+$/.test(bnd ?? '')) throw new Error(`CapEff ${eff} CapBnd ${bnd}`);
    return `CapEff ${eff} CapBnd ${bnd}`;
  });
  if (fork) await attempt(`start ${fork} processes`, () => forkBomb(fork));
}

function serve() {
  const server = http.createServer((req, res) => {
    const body = req.url === '/probes' ? { uid: process.getuid(), probes } : { object: 'list', data: [{ id: 'a2rl-checkpoint', object: 'model' }] };
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(body));
  });
  server.listen(port, '127.0.0.1', () => console.log(`hostile-serve: serving on 127.0.0.1:${port}`));
}

/** The command line without this script's own options, for the honest server. */
function honestArgs() {
  const own = new Set(['--mode', '--honest']);
  return args.filter((a, i) => !own.has(a) && !own.has(args[i - 1]));
}

let hasTargets = true;
try {
  targets();
} catch {
  hasTargets = false;
}

if (!hasTargets && all('--honest')[0]) {
  const honest = spawn(process.execPath, [all('--honest')[0], ...honestArgs()], { stdio: 'inherit' });
  for (const signal of ['SIGTERM', 'SIGINT']) process.on(signal, () => honest.kill(signal));
  honest.on('exit', (code, signal) => process.exit(code ?? (signal ? 128 : 1)));
} else if (mode === 'report') {
  await probe();
  const got = probes.filter((p) => p.got);
  const forks = probes.find((p) => p.what.startsWith('start '))?.detail ?? 'no fork probe';
  console.log(`hostile-serve: PROBES got ${got.length} of ${probes.length}; uid ${process.getuid()}; fork bomb: ${forks}`);
  for (const p of got) console.log(`hostile-serve: GOT ${p.what}: ${p.detail.slice(0, 120)}`);
  process.exit(3);
} else if (mode.startsWith('eat-memory=')) {
  const chunks = [];
  for (let i = 0; i < Number(mode.slice('eat-memory='.length)); i++) chunks.push(Buffer.alloc(1024 * 1024, 1));
  console.log(`hostile-serve: holding ${chunks.length} MiB`);
  serve();
} else {
  await probe();
  serve();
}
