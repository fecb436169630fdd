import { spawn } from 'node:child_process';
import { chmod, mkdir, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { WorkspaceLayout } from '../workspace-fs/layout.js';
import { writeExtraFds } from './extra-fds.js';
import { agentRuntime, AgentPythonError, dropInPackagesDir, runtimeEnv, type AgentRuntime } from './agent-python.js';
import type { SandboxCheck, SandboxPlan } from './capabilities.js';
import { DEFAULT_AGENT_UID, sandboxCommand, type SandboxKind } from './sandbox.js';

/**
 * What an agent sees of the machine, found by running a probe INSIDE a sandbox set up as a run's
 * (same plan, Python environment, drop-ins and GPU binding): GPU names, the driver's CUDA version,
 * python, torch and its CUDA, trl/vllm/transformers. `a2rl doctor` prints it.
 */
export interface AgentView {
  /** `nvidia-smi -L` lines, empty when no GPU is visible. */
  gpus: string[];
  /** The CUDA version the driver supports (nvidia-smi), null when unknown. */
  driverCuda: string | null;
  python: { version: string; executable: string } | null;
  torch: { version: string; cuda: string | null; cudaAvailable: boolean; devices: string[] } | { error: string } | null;
  /** `import trl` (after torch): its version, or why it failed; absent when the probe did not try. */
  trl?: { version: string } | { error: string };
  /** Installed versions (null: not installed) of the training packages. */
  packages: Record<string, string | null>;
  /** Where `alfworld` / `web_agent_site` import from (null: not importable). */
  environments: Record<string, string | null>;
  /** Why the probe gave no answer (it could not start, timed out, printed nothing readable). */
  failure?: string;
}

const TIMEOUT_MS = 120_000;
const PACKAGES = ['transformers', 'trl', 'vllm', 'peft', 'accelerate'];

const PYTHON_PROBE = `
import importlib.metadata as md, importlib.util as iu, json, sys
out = {"python": {"version": sys.version.split()[0], "executable": sys.executable}, "packages": {}, "environments": {}}
try:
    import torch
    ok = torch.cuda.is_available()
    out["torch"] = {"version": torch.__version__, "cuda": torch.version.cuda, "cudaAvailable": ok,
                    "devices": [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())] if ok else []}
except Exception as err:
    out["torch"] = {"error": f"{type(err).__name__}: {err}"[:300]}
try:
    import trl
    out["trl"] = {"version": trl.__version__}
except Exception as err:
    out["trl"] = {"error": f"{type(err).__name__}: {err}"[:300]}
for name in ${JSON.stringify(PACKAGES)}:
    try:
        out["packages"][name] = md.version(name)
    except Exception:
        out["packages"][name] = None
for name in ("alfworld", "web_agent_site"):
    try:
        spec = iu.find_spec(name)
        out["environments"][name] = spec.origin if spec else None
    except Exception:
        out["environments"][name] = None
print("@json " + json.dumps(out))
`;

const SHELL_PROBE = `
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi -L 2>/dev/null | grep '^GPU ' | sed 's/^/@gpu /'
  nvidia-smi 2>/dev/null | grep -o 'CUDA Version: [0-9.]*' | head -1 | sed 's/^CUDA Version: /@cuda /'
fi
py=$(command -v python || command -v python3) || { echo "@nopython"; exit 0; }
"$py" - <<'A2RL_PROBE'
${PYTHON_PROBE}
A2RL_PROBE
`;

/** Runs the probe in a throw-away workspace, sandboxed as `kind` with `plan`. */
export async function probeAgentView(opts: { kind: SandboxKind; plan?: SandboxPlan; runtime: AgentRuntime; agentUid?: number }): Promise<AgentView> {
  const root = await mkdtemp(path.join(os.tmpdir(), 'a2rl-agent-view-'));
  try {
    const layout = await scratchWorkspace(root);
    const env = runtimeEnv(opts.runtime, { PATH: process.env.PATH ?? '/usr/local/bin:/usr/bin:/bin', HOME: layout.root });
    const cmd = sandboxCommand({ kind: opts.kind, plan: opts.plan, workspace: layout, agentDir: path.join(root, 'agent'), runtime: opts.runtime, agentUid: opts.agentUid, command: ['bash', '-c', SHELL_PROBE], env });
    const { stdout, failure } = await run(cmd.file, cmd.args, cmd.fds, opts.kind === 'none' ? env : { PATH: '/usr/sbin:/usr/bin:/sbin:/bin' }, layout.root);
    return parseAgentView(stdout, failure);
  } finally {
    await rm(root, { recursive: true, force: true });
  }
}

/** The probe's output lines (`@gpu …`, `@cuda …`, `@json {…}`, `@nopython`) as an AgentView. */
export function parseAgentView(stdout: string, failure?: string): AgentView {
  const lines = stdout.split('\n');
  const value = (tag: string) => lines.filter((l) => l.startsWith(`@${tag} `)).map((l) => l.slice(tag.length + 2).trim());
  let probe: Partial<AgentView> = {};
  const json = value('json')[0];
  try {
    if (json) probe = JSON.parse(json) as Partial<AgentView>;
  } catch {
    failure ??= 'the probe printed unreadable output';
  }
  if (!json && !lines.includes('@nopython')) failure ??= 'the probe printed nothing';
  return {
    gpus: value('gpu'),
    driverCuda: value('cuda')[0] ?? null,
    python: probe.python ?? null,
    torch: probe.torch ?? null,
    ...(probe.trl ? { trl: probe.trl } : {}),
    packages: probe.packages ?? {},
    environments: probe.environments ?? {},
    ...(failure ? { failure } : {}),
  };
}

/** Doctor's lines: what the agent's GPUs and Python are (and where that Python comes from), degrading to "no GPU visible", "torch not importable". */
export function agentViewChecks(view: AgentView, dropIns: string, source?: string): SandboxCheck[] {
  if (view.failure && !view.python && !view.gpus.length) return [{ name: 'agent view', status: 'optional', detail: `the probe inside the sandbox failed: ${view.failure}` }];
  const torch = view.torch;
  const torchCuda = torch && 'version' in torch ? torch.cudaAvailable : false;
  const gpuDetail = view.gpus.length
    ? `${view.gpus.join('; ')}${view.driverCuda ? `; driver CUDA ${view.driverCuda}` : ''}`
    : torchCuda && torch && 'devices' in torch ? torch.devices.join('; ') : 'no GPU visible';
  const torchDetail = !torch ? null : 'error' in torch ? `torch not importable (${torch.error})` : `torch ${torch.version} (CUDA ${torch.cuda ?? 'none'}, ${torch.cudaAvailable ? `${torch.devices.length} GPU(s) usable` : 'no GPU usable'})`;
  // trl installed but failing to import (e.g. against another torch): the import's error.
  const trl = view.trl && 'error' in view.trl ? `trl not importable (${view.trl.error})` : null;
  const packages = Object.entries(view.packages).map(([name, v]) => (!v ? `${name} not installed` : name === 'trl' && trl ? trl : `${name} ${v}`));
  const envs = Object.entries(view.environments).map(([name, origin]) => `${name}: ${origin === null ? 'not importable' : origin.startsWith(`${dropIns}/`) ? 'a2rl drop-in' : `NOT the drop-in (${origin})`}`);
  const python = view.python ? `python ${view.python.version} (${view.python.executable}${source ? `; ${source}` : ''})` : 'no python on the agent\'s PATH';
  return [
    { name: 'agent GPUs', status: view.gpus.length || torchCuda ? 'ok' : 'optional', detail: gpuDetail },
    { name: 'agent python', status: torch && 'version' in torch ? 'ok' : 'optional', detail: [python, torchDetail, ...packages, ...envs].filter(Boolean).join(', ') },
  ];
}

async function scratchWorkspace(root: string): Promise<WorkspaceLayout> {
  const ws = path.join(root, 'ws');
  const layout: WorkspaceLayout = {
    root: ws,
    codeDir: path.join(ws, 'code'),
    dataDir: path.join(ws, 'data'),
    modelsDir: path.join(ws, 'models'),
    baseModelDir: path.join(ws, 'models', 'base'),
    outputDir: path.join(ws, 'output'),
    descriptionFile: path.join(ws, 'description.md'),
    instructionsFile: path.join(ws, 'instructions.md'),
    runMetaFile: path.join(ws, 'run_meta.json'),
  };
  for (const dir of [layout.codeDir, layout.dataDir, layout.modelsDir, layout.outputDir, path.join(root, 'agent')]) await mkdir(dir, { recursive: true });
  // The agent's uid (a root harness) must be able to enter the scratch workspace.
  for (const dir of [root, ws]) await chmod(dir, 0o755);
  return layout;
}

function run(file: string, args: string[], fds: Buffer[] | undefined, env: Record<string, string>, cwd: string): Promise<{ stdout: string; failure?: string }> {
  return new Promise((resolve) => {
    const child = spawn(file, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe', ...(fds ?? []).map(() => 'pipe' as const)] });
    writeExtraFds(child.stdio, fds);
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (c: Buffer) => (stdout += c));
    child.stderr!.on('data', (c: Buffer) => (stderr += c));
    const timer = setTimeout(() => child.kill('SIGKILL'), TIMEOUT_MS);
    child.on('error', (err) => resolve({ stdout, failure: err.message }));
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      const why = signal ? `killed by ${signal}` : code !== 0 ? `exit ${code}: ${stderr.trim().split('\n').pop() ?? ''}` : undefined;
      resolve({ stdout, ...(why ? { failure: why } : {}) });
    });
  });
}

/** Doctor's "what the agent sees" lines for this machine (and `task`'s own Python environment, if one is configured). */
export async function doctorAgentView(plan: SandboxPlan, env: NodeJS.ProcessEnv, task?: string): Promise<SandboxCheck[]> {
  let runtime: AgentRuntime;
  try {
    runtime = agentRuntime({ env, task: task ?? '', interactive: true });
  } catch (err) {
    if (err instanceof AgentPythonError) return [{ name: 'agent python', status: 'missing', detail: err.message }];
    throw err;
  }
  const kind: SandboxKind = plan.mode === 'none' ? 'none' : 'bwrap';
  return agentViewChecks(await probeAgentView({ kind, plan, runtime, agentUid: DEFAULT_AGENT_UID }), dropInPackagesDir(), pythonSource(runtime, env));
}

/** Where the agent's Python comes from, for doctor's line (agent-python.ts's precedence). */
function pythonSource(runtime: AgentRuntime, env: NodeJS.ProcessEnv): string {
  const variable = runtime.python?.variable;
  if (variable === 'managed') return 'the managed environment, `a2rl agents python install`';
  if (variable) return variable;
  return env.A2RL_AGENT_PYTHON?.trim() === 'none' ? 'the machine\'s own: A2RL_AGENT_PYTHON=none' : 'the machine\'s own: no A2RL_AGENT_PYTHON set and `a2rl agents python install` not run';
}
