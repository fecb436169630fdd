// `npm run bench -- sandbox`: what the sandbox costs. (1) Start-up overhead per run: a trivial agent
// command through the whole sandbox (prlimit, bwrap, setpriv or the user namespace, the seccomp
// filter, the bridge with the grading port) against the same command spawned directly. Goal ≤ 300 ms.
// (2) The grading API's p99 latency through the bridge (loopback port in the sandbox → bridge → the
// run's Unix socket → the HTTP server) against a direct loopback request. Goal ≤ 2× direct.
import { spawn } from 'node:child_process';
import { chownSync, mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { writeExtraFds } from '../../modules/sandbox/extra-fds.js';
import { sandboxPlan } from '../../modules/sandbox/capabilities.js';
import { REFERENCE_LIMITS } from '../../modules/sandbox/limits.js';
import { DEFAULT_AGENT_UID, sandboxCommand, SANDBOX_PORTS, type SandboxedCommand } from '../../modules/sandbox/sandbox.js';
import { startGradingServer } from '../../modules/grading/testing/grading-fixtures.js';

const STARTS = 15;
const REQUESTS = 400;

/** Runs a command to its end; resolves with its stdout and how long it took. */
function timed(cmd: SandboxedCommand, cwd: string): Promise<{ ms: number; stdout: string }> {
  const t0 = performance.now();
  const fds = cmd.fds ?? [];
  const child = spawn(cmd.file, cmd.args, { cwd, env: { PATH: '/usr/sbin:/usr/bin:/sbin:/bin' }, stdio: ['ignore', 'pipe', 'inherit', ...fds.map(() => 'pipe' as const)] });
  writeExtraFds(child.stdio, fds);
  let stdout = '';
  child.stdout!.on('data', (c) => (stdout += c));
  return new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve({ ms: performance.now() - t0, stdout }) : reject(new Error(`exit ${code}`))));
  });
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/** A client that times sequential keep-alive GETs and prints {p50, p99} in ms. */
const CLIENT = `
const http = require('http');
const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
const url = new URL(process.argv[2]);
const n = Number(process.argv[3]);
const get = () => new Promise((resolve, reject) => {
  const t0 = process.hrtime.bigint();
  http.get({ host: url.hostname, port: url.port, path: url.pathname, agent }, (res) => {
    res.resume();
    res.on('end', () => resolve(Number(process.hrtime.bigint() - t0) / 1e6));
  }).on('error', reject);
});
(async () => {
  for (let i = 0; i < 20; i++) await get();
  const ms = [];
  for (let i = 0; i < n; i++) ms.push(await get());
  ms.sort((a, b) => a - b);
  console.log(JSON.stringify({ p50: ms[Math.floor(n / 2)], p99: ms[Math.floor(n * 0.99)] }));
  agent.destroy();
})();
`;

export async function sandboxBench(): Promise<void> {
  const plan = sandboxPlan();
  if (plan.mode === 'none') {
    console.log(JSON.stringify({ bench: 'sandbox', error: 'no sandbox on this machine (a2rl doctor --sandbox)', pass: false }));
    return;
  }
  const server = await startGradingServer();
  try {
    const run = await server.newRun();
    const ws = run.ws;
    const runDir = path.join(server.home, 'run-dir');
    mkdirSync(runDir, { mode: 0o750 });
    const owner = plan.mode === 'setuid' ? DEFAULT_AGENT_UID : undefined;
    if (owner !== undefined) chownSync(runDir, 0, owner);
    const socket = await server.sockets.open(path.join(runDir, 'grading.sock'), run.ctx.token, owner === undefined ? undefined : { gid: owner });
    writeFileSync(path.join(ws.root, 'client.js'), CLIENT);
    const agentDir = path.join(server.home, 'agents');
    mkdirSync(agentDir);
    const forwards = [{ port: SANDBOX_PORTS.grading, socket: 'grading.sock' }];
    const sandboxed = (command: string[]) => sandboxCommand({ kind: 'bwrap', plan, workspace: ws, agentDir, runDir, command, env: {}, forwards, limits: REFERENCE_LIMITS });
    const direct = (command: string[]): SandboxedCommand => ({ file: command[0], args: command.slice(1), mounts: [] });

    const raw: number[] = [];
    const inSandbox: number[] = [];
    for (let i = 0; i < STARTS; i++) {
      raw.push((await timed(direct(['bash', '-c', 'true']), ws.root)).ms);
      inSandbox.push((await timed(sandboxed(['bash', '-c', 'true']), ws.root)).ms);
    }
    const overheadMs = median(inSandbox) - median(raw);

    const client = (url: string, cmd: (c: string[]) => SandboxedCommand) => timed(cmd(['node', path.join(ws.root, 'client.js'), url, String(REQUESTS)]), ws.root).then((r) => JSON.parse(r.stdout) as { p50: number; p99: number });
    const directLatency = await client(`${run.url}/time`, direct);
    const bridged = await client(`http://127.0.0.1:${SANDBOX_PORTS.grading}/time`, sandboxed);
    await socket.close();

    const ratio = bridged.p99 / directLatency.p99;
    const round = (n: number) => Math.round(n * 100) / 100;
    console.log(`sandbox (${plan.mode}) start-up: ${round(median(inSandbox))} ms vs ${round(median(raw))} ms unsandboxed (median of ${STARTS}): overhead ${round(overheadMs)} ms (goal ≤ 300 ms)`);
    console.log(`grading API /time p99: ${round(bridged.p99)} ms through the bridge vs ${round(directLatency.p99)} ms direct (p50 ${round(bridged.p50)} vs ${round(directLatency.p50)}): ${round(ratio)}× (goal ≤ 2×)`);
    const pass = overheadMs <= 300 && ratio <= 2;
    console.log(
      JSON.stringify({
        bench: 'sandbox',
        mode: plan.mode,
        startupOverheadMs: round(overheadMs),
        startupMs: { sandboxed: round(median(inSandbox)), raw: round(median(raw)) },
        gradingP99Ms: { bridged: round(bridged.p99), direct: round(directLatency.p99) },
        gradingP99Ratio: round(ratio),
        pass,
      }),
    );
  } finally {
    await server.close();
  }
}
