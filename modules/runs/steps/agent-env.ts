import path from 'node:path';
import { agentLlmSetup, agentsRoot, type AgentSpec } from '../../agents/agent-registry.js';
import { agentSessionEnv } from '../../agents/agent-session.js';
import { runtimeEnv } from '../../sandbox/agent-python.js';
import { SANDBOX_AGENT_DIR, SANDBOX_HOME, SANDBOX_PORTS, type SandboxKind } from '../../sandbox/sandbox.js';
import type { Environment } from '../run.ports.js';
import type { RunDeps, RunSession } from '../run-session.js';
import { writeAgentHomeFiles } from '../agent-home.js';
import type { Observed } from './observe.js';
import type { Prepared } from './prepare.js';

/** The agent's command line and environment, before the sandbox wraps them. */
export interface AgentCommand {
  command: string[];
  env: Record<string, string>;
  /** How AgentStarted names the command. */
  described: string;
}

/** What the agent runs, and the environment it is given (the grading API, the egress proxy, its model, its Python). */
export async function agentCommand(deps: RunDeps, s: RunSession, prepared: Prepared, observed: Observed): Promise<AgentCommand> {
  const { spec, request, task, driver } = s;
  const { layout } = prepared.workspace;
  const agentDir = spec.dir ? insideSandbox(prepared.sandbox, spec.dir) : '';
  const llm = await llmSetup(s, prepared, observed);
  const env: Record<string, string> = runtimeEnv(prepared.runtime, {
    PATH: [...s.commands.binDirs, deps.env.PATH ?? '/usr/local/bin:/usr/bin:/bin'].join(':'),
    TASK: task.id,
    BASE_MODEL: task.baseModel,
    WORKSPACE: layout.root,
    MODEL_PATH: layout.baseModelDir,
    DATA_PATH: layout.dataDir,
    OUTPUT_DIR: layout.outputDir,
    ...gradingEnv(prepared.sandbox, request.gradingBaseUrl, observed.token),
    ...egressEnv(observed),
    A2RL_AGENT_DIR: agentDir,
    ...(driver ? { LLM_MODEL: driver } : {}),
    ...(request.gpus ? { CUDA_VISIBLE_DEVICES: request.gpus.join(',') } : {}),
    ...(spec.llm ? llm.env : passThroughEnv(spec, deps.env)),
    // The run's agent session id on every launch; on resume, the marker and the harness's note (docs/resume.md).
    ...agentSessionEnv(s.runId, s.segment.resume),
  });
  if (spec.dir) {
    const command = ['bash', path.posix.join(agentDir, 'start.sh')];
    return { command, env, described: `${spec.id}: ${command.join(' ')}` };
  }
  // An ad-hoc agent (resolveAgent made it from request.agentCommand; its title is that command).
  const line = request.agentCommand ?? spec.title;
  return { command: ['bash', '-c', line], env, described: line };
}

/** Sandboxed, the grading API is the bridged loopback port and needs no credential: the agent holds no token. */
function gradingEnv(sandbox: SandboxKind, gradingBaseUrl: string, token: string): Record<string, string> {
  return sandbox === 'bwrap' ? { GRADING_SERVER_URL: `http://127.0.0.1:${SANDBOX_PORTS.grading}` } : { GRADING_SERVER_URL: `${gradingBaseUrl}/g/${token}`, A2RL_RUN_TOKEN: token };
}

function egressEnv(observed: Observed): Record<string, string> {
  if (!observed.forwards.some((f) => f.port === SANDBOX_PORTS.egress)) return {};
  const proxy = `http://127.0.0.1:${SANDBOX_PORTS.egress}`;
  return { HTTP_PROXY: proxy, HTTPS_PROXY: proxy, http_proxy: proxy, https_proxy: proxy };
}

/**
 * An LLM agent's CLI setup from its agent.json: the environment (base URLs, the gateway token as its
 * key, the model) and its config files, written into its home. HOME is that home.
 */
async function llmSetup(s: RunSession, prepared: Prepared, observed: Observed): Promise<{ env: Record<string, string> }> {
  const llm = s.spec.llm;
  if (!llm || !observed.gateway || !prepared.home) return { env: {} };
  const home = prepared.sandbox === 'bwrap' ? SANDBOX_HOME : prepared.home;
  const model = s.driver ?? llm.defaultModel;
  const setup = agentLlmSetup(llm, { gateway: observed.gateway.url, token: observed.gateway.token, model, home, workspace: prepared.workspace.layout.root });
  await writeAgentHomeFiles(prepared.home, setup.files, prepared.agentUid);
  return { env: { ...setup.env, HOME: home, LLM_MODEL: model } };
}

/** The agent folder as the sandboxed agent sees it. */
function insideSandbox(sandbox: SandboxKind, hostPath: string): string {
  return sandbox === 'bwrap' ? hostPath.replace(agentsRoot(), SANDBOX_AGENT_DIR) : hostPath;
}

/** Credentials external agents need (their declared API keys), passed into the sandbox by name. */
function passThroughEnv(spec: AgentSpec, env: Environment): Record<string, string> {
  const names = [...(spec.requires.env ?? []), ...(spec.requires.anyEnv ?? []), 'LLM_API_KEY', 'LLM_BASE_URL'];
  const out: Record<string, string> = {};
  for (const name of names) {
    const value = env[name];
    if (value) out[name] = value;
  }
  return out;
}
