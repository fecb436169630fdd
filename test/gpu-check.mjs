#!/usr/bin/env node
// `npm run gpu-check [-- --cpu]`: the micro gsm8k run on one GPU, end to end, as an operator's first
// check of a GPU machine. The sandbox is bound to GPU 0 only (torch inside must see exactly one device,
// CUDA_VISIBLE_DEVICES renumbered), reference-trl trains on it (SFT, then GRPO), the CPU engine's
// server grades on the same GPU, and one JSON line reports what happened. Prerequisites are checked
// first; without them the line is {"skipped": "<what is missing>"}. `--cpu` is the dry run of the same
// flow without a GPU (the agents' managed Python). Sized to finish within 8 minutes.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const cpu = process.argv.includes('--cpu');
const budget = process.env.A2RL_GPU_CHECK_BUDGET ?? '5m';
const started = Date.now();

function emit(line) {
  process.stdout.write(`${JSON.stringify(line)}\n`);
}

function has(command) {
  return spawnSync('sh', ['-c', `command -v ${command}`], { stdio: 'ignore' }).status === 0;
}

/** The Python the agent and the serving engine use: A2RL_AGENT_PYTHON (a prefix), else the managed env, else python3 on PATH. */
async function pythonPrefix() {
  if (process.env.A2RL_AGENT_PYTHON) return process.env.A2RL_AGENT_PYTHON;
  const { installedAgentPython } = await import(path.join(root, 'dist/modules/agents/agent-python-env.js'));
  const managed = installedAgentPython(process.env);
  if (managed) return managed;
  const exe = spawnSync('python3', ['-c', 'import sys; print(sys.prefix)'], { encoding: 'utf8' });
  return exe.status === 0 ? exe.stdout.trim() : null;
}

function probe(python, code) {
  const r = spawnSync(path.join(python, 'bin', 'python'), ['-c', code], { encoding: 'utf8', env: { ...process.env, CUDA_VISIBLE_DEVICES: cpu ? '' : '0' } });
  return r.status === 0 ? r.stdout.trim() : null;
}

async function missing() {
  if (!existsSync(path.join(root, 'dist/src/cli-program.js'))) return 'the build (npm run build)';
  if (!has('bwrap')) return 'bwrap (apt-get install bubblewrap)';
  if (!cpu && !existsSync('/dev/nvidia0') && !has('nvidia-smi')) return 'an NVIDIA GPU';
  const python = await pythonPrefix();
  if (!python || !existsSync(path.join(python, 'bin', 'python'))) return 'a Python with torch (A2RL_AGENT_PYTHON or a2rl agents python install)';
  if (probe(python, 'import trl, transformers, safetensors') === null) return `trl and transformers in ${python}`;
  const cuda = probe(python, 'import torch; print(torch.cuda.device_count())');
  if (cuda === null) return `torch in ${python}`;
  if (!cpu && cuda !== '1') return `a CUDA torch seeing GPU 0 in ${python} (torch.cuda.device_count() with CUDA_VISIBLE_DEVICES=0 is ${cuda})`;
  return { python };
}

function a2rl(args, env) {
  const r = spawnSync(process.execPath, [path.join(root, 'src/bin/a2rl.js'), ...args], { env, encoding: 'utf8', maxBuffer: 256 * 1024 * 1024 });
  if (r.status !== 0) throw new Error(`a2rl ${args[0]} failed (${r.status}): ${(r.stderr || r.stdout).trim().split('\n').slice(-3).join(' | ')}`);
  return r.stdout;
}

const ready = await missing();
if (typeof ready === 'string') {
  emit({ skipped: ready });
  process.exit(0);
}
const home = mkdtempSync(path.join(os.tmpdir(), 'a2rl-gpu-check-'));
try {
  const env = { ...process.env, A2RL_HOME: home, A2RL_AGENT_PYTHON: ready.python, A2RL_SERVE_PYTHON: path.join(ready.python, 'bin', 'python'), A2RL_SERVE_ENGINE: 'transformers' };
  if (!cpu) env.CUDA_VISIBLE_DEVICES = '0';
  delete env.A2RL_SERVE_COMMAND;
  delete env.A2RL_INFERENCE_URL;
  a2rl(['data', 'micro', 'gsm8k', '--seed', '1'], env);
  const summary = JSON.parse(a2rl(['run', '--task', 'gsm8k', '--agent', 'reference-trl', '--budget', budget, '--json'], env).trim().split('\n').at(-1));
  const events = a2rl(['events', summary.runId, '--json'], env).trim().split('\n').map((l) => JSON.parse(l));
  const prepared = events.find((e) => e.type === 'WorkspacePrepared')?.data.isolation ?? {};
  const graded = events.filter((e) => e.type === 'SubmissionGraded');
  const engine = graded[0]?.data.details?.serverIsolation?.[0]?.engine ?? null;
  const outputDir = path.join(home, 'workspaces', summary.runId, 'output');
  const deviceFile = path.join(outputDir, 'v1-sft.work', 'device.json');
  const agentTorch = existsSync(deviceFile) ? JSON.parse(readFileSync(deviceFile, 'utf8')) : null;
  emit({
    gpuCheck: cpu ? 'cpu-dry-run' : 'gpu',
    runId: summary.runId,
    state: summary.state,
    baseline: summary.baseline,
    best: summary.best,
    improved: summary.best > summary.baseline,
    submissions: summary.submissions,
    boundDevices: prepared.devices ?? [],
    agentTorch,
    trainedOnGpu: agentTorch?.device === 'cuda' && agentTorch?.count === 1,
    gradingEngine: engine,
    checkpoints: readdirSync(outputDir).filter((d) => !d.endsWith('.work')),
    wallSeconds: Math.round((Date.now() - started) / 1000),
  });
} catch (err) {
  emit({ gpuCheck: cpu ? 'cpu-dry-run' : 'gpu', error: err.message, wallSeconds: Math.round((Date.now() - started) / 1000) });
  process.exitCode = 1;
} finally {
  rmSync(home, { recursive: true, force: true });
}
