import { createHash } from 'node:crypto';
import path from 'node:path';
import { startLlmGateway } from '../../llm-gateway/gateway.js';
import { upstreamsFromEnv } from '../../llm-gateway/upstreams.js';
import type { RunContext } from '../../run-context/run-context.js';
import { startEgressProxy } from '../../sandbox/egress-proxy.js';
import { openLifeline } from '../../sandbox/lifeline.js';
import { SANDBOX_PORTS, type SandboxForward } from '../../sandbox/sandbox.js';
import { restrictSocket } from '../../sandbox/unix-socket.js';
import { closeInOrder } from '../disposal-stack.js';
import type { RunDeps, RunSession } from '../run-session.js';
import { epochSeconds } from '../workspace.js';
import type { Baselined } from './baseline.js';
import type { Prepared } from './prepare.js';

/** What `observe` produced: how the agent reaches the harness, and the lock that names its process group. */
export interface Observed {
  /** The capability token of the run's grading API. */
  token: string;
  /** The harness's sockets bridged to loopback ports inside the sandbox. */
  forwards: SandboxForward[];
  /** The LLM gateway's base URL as the agent sees it, and the token it holds (LLM-driven agents only). */
  gateway?: { url: string; token: string };
  /** Where the agent's process group is written, for killing leftovers after a harness crash. */
  pidFile: string;
}

/** What the harness serves into the sandbox (grading socket, egress proxy, LLM gateway), closed in the order opened. */
type Endpoints = Array<{ close(): Promise<void> }>;

/**
 * Serves the run's grading API (and, with --allow-net, the egress proxy; for an LLM agent its gateway)
 * to the sandbox and starts watching the workspace (its current tree is the baseline). Torn down in
 * reverse: the grading API unregistered (gradings in flight finish, rollouts flushed), the endpoints
 * closed, the observers stopped (final file states, output, process facts).
 */
export async function observe(deps: RunDeps, s: RunSession, prepared: Prepared, baselined: Baselined): Promise<Observed> {
  s.stack.defer(() => s.instrumentation.stop());
  const endpoints: Endpoints = [];
  s.stack.defer(() => closeInOrder(endpoints.splice(0)));
  const token = deps.ids.token();
  s.instrumentation.redaction?.add([{ kind: 'run-token', value: token }]);
  register(deps, s, prepared, baselined, token);
  const forwards: SandboxForward[] = [];
  if (prepared.sandbox === 'bwrap') await openSandboxEndpoints(deps, s, prepared, token, endpoints, forwards);
  const gateway = s.spec.llm ? await openGateway(deps, s, prepared, endpoints, forwards) : undefined;
  await s.instrumentation.start();
  // After a harness crash the next start kills what is left of this agent (the sandbox's own defences first).
  const pidFile = deps.locks.pidFile(s.runId);
  deps.locks.write({ runId: s.runId, pid: process.pid, pidFile, segment: s.segment.number });
  return { token, forwards, gateway, pidFile };
}

function register(deps: RunDeps, s: RunSession, prepared: Prepared, baselined: Baselined, token: string): void {
  const { workspace } = prepared;
  const ctx: RunContext = {
    runId: s.runId,
    task: s.task,
    workspace: workspace.layout,
    privateDir: workspace.privateDir,
    token,
    budgetSeconds: s.request.budgetSeconds,
    record: s.instrumentation.record,
    artifacts: deps.artifacts,
    limits: s.limits,
    ...(s.request.gpus ? { gpus: s.request.gpus } : {}),
  };
  s.stack.defer(() => deps.registry.unregister(s.runId));
  deps.registry.register(ctx, {
    deadline: new Date(deps.clock().getTime() + s.segment.budgetSeconds * 1000),
    baselineScore: baselined.score,
    ...(s.segment.resume ? { continueFrom: { submissions: s.segment.resume.submissions, best: s.tally.best } } : {}),
    envContext: baselined.evaluation,
    onSubmitted: () => void workspace.runMeta.update({ last_submit_time: epochSeconds(deps.clock()) }),
    beforeGrading: (submissionId) => prepared.integrity.beforeGrading(submissionId),
    runMeta: () => workspace.runMeta.current,
  });
}

/** The sandbox's only ways out: the run's grading socket and, when hosts are allowed, the egress proxy. */
async function openSandboxEndpoints(deps: RunDeps, s: RunSession, prepared: Prepared, token: string, endpoints: Endpoints, forwards: SandboxForward[]): Promise<void> {
  const { runDir } = prepared.workspace;
  const owner = prepared.agentUid === undefined ? undefined : { uid: prepared.agentUid, gid: prepared.agentUid };
  endpoints.push(await openLifeline(path.join(runDir, 'lifeline.sock'), owner));
  endpoints.push(await deps.gradingSockets.open(path.join(runDir, 'grading.sock'), token, owner));
  forwards.push({ port: SANDBOX_PORTS.grading, socket: 'grading.sock' });
  const allow = s.request.allowNet ?? [];
  if (allow.length > 0) {
    const socket = path.join(runDir, 'egress.sock');
    const proxy = await startEgressProxy({
      listen: { path: socket },
      allow,
      record: (data) => s.record('EgressConnection', data),
      clock: deps.clock,
      onError: (err) => s.warn(`[${s.runId}] egress proxy: ${err instanceof Error ? err.message : String(err)}`),
    });
    endpoints.push(proxy);
    await restrictSocket(socket, owner);
    forwards.push({ port: SANDBOX_PORTS.egress, socket: 'egress.sock' });
  }
}

/**
 * The run's LLM gateway: the agent's one way to its model, every call an LlmCallRecorded. Sandboxed,
 * it is a Unix socket of the run directory bridged to a loopback port; unsandboxed, a loopback port.
 */
async function openGateway(deps: RunDeps, s: RunSession, prepared: Prepared, endpoints: Endpoints, forwards: SandboxForward[]): Promise<Observed['gateway']> {
  const token = deps.ids.token();
  s.instrumentation.redaction?.add([{ kind: 'gateway-token', value: token }]);
  const sandboxed = prepared.sandbox === 'bwrap';
  const socket = path.join(prepared.workspace.runDir, 'llm.sock');
  const gateway = await startLlmGateway({
    listen: sandboxed ? { path: socket } : { port: 0, host: '127.0.0.1' },
    token,
    upstreams: upstreamsFromEnv(deps.env),
    limits: { maxTokens: s.limits.llmTokens, maxCostUsd: s.limits.llmCostUsd },
    ...(s.segment.resume ? { spentBefore: s.segment.resume.llmSpent } : {}),
    // A resumed run's calls say which segment made them (the transcript marks them).
    record: (data) => s.record('LlmCallRecorded', s.segment.number > 1 ? { ...data, segment: s.segment.number } : data),
    storeBlob: async (body) => {
      const put = await s.instrumentation.store.put(body, { sha256: sha256Hex(body), size: body.length });
      return { sha256: put.sha256, size: put.size, key: put.key };
    },
    wouldRedact: (body) => s.instrumentation.redaction?.redactor.redactBlob(body) != null,
    onLimit: (limit, value, max, callId) => void s.record('LimitReached', { limit, value, max, scope: callId, observedAt: deps.clock().toISOString() }), // the action is the limit's (projections/derived-facts.ts)
    clock: deps.clock,
    onError: (err) => s.warn(`[${s.runId}] LLM gateway: ${err instanceof Error ? err.message : String(err)}`),
  });
  endpoints.push(gateway);
  if (!sandboxed) {
    if (gateway.url === undefined) throw new Error('the LLM gateway listens on no loopback port');
    return { url: gateway.url, token };
  }
  await restrictSocket(socket, prepared.agentUid === undefined ? undefined : { gid: prepared.agentUid });
  forwards.push({ port: SANDBOX_PORTS.llm, socket: 'llm.sock' });
  return { url: `http://127.0.0.1:${SANDBOX_PORTS.llm}`, token };
}

const sha256Hex = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex');
