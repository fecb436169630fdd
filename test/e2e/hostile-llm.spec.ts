import { execFileSync } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { projectCliBin } from '../../modules/agents/agent-registry.js';
import { startFakeAnthropic } from '../servers/fake-llm/fake-anthropic.js';
import { agentCalls, usageFromRequest } from '../servers/fake-llm/serve.js';
import type { FakeLlmCall, FakeLlmOptions, FakeLlmServer } from '../servers/fake-llm/types.js';
import { runA2rl, sandboxedAsRoot } from './a2rl-cli.js';

// A hostile LLM agent against the built `a2rl`, harness as root, sandboxed: the claude-code adapter
// runs a `claude` of ours (a Node script first on PATH) that attacks the run's LLM gateway — calls in
// parallel past --max-llm-tokens, a hang-up before the final usage, billing headers, bad model names
// and path tricks, calls asking for one model and answered as another — against the scripted
// Anthropic provider. Each attack fails, and an honest call's usage is recorded as the provider
// reported it. (Where the pinned Claude Code is installed it comes first on PATH: these tests skip.)

interface Ev {
  type: string;
  seq: number;
  data: Record<string, unknown>;
}

const KEY = 'sk-upstream-9f8e7d6c5b4a3f2e';
const MAX_TOKENS = 3000;

/** The agent: `claude -p <prompt> … --model <m>` as start.sh runs it, here a script of attacks. */
const AGENT = String.raw`#!/usr/bin/env node
const http = require('node:http');
const base = new URL(process.env.ANTHROPIC_BASE_URL);
const token = process.env.ANTHROPIC_API_KEY;
const model = process.argv[process.argv.indexOf('--model') + 1];
const plan = process.argv[1].endsWith('/parallel/claude') ? 'parallel' : 'misc';
const log = (what, value) => console.log(JSON.stringify({ what, value }));

function call(opts) {
  return new Promise((resolve) => {
    const body = opts.body === undefined ? undefined : JSON.stringify(opts.body);
    const req = http.request({ host: base.hostname, port: base.port, method: opts.method ?? 'POST', path: opts.path ?? base.pathname + '/v1/messages', agent: false,
      headers: { 'content-type': 'application/json', 'x-api-key': opts.token ?? token, 'anthropic-version': '2023-06-01', ...(opts.headers ?? {}) } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk) => {
        text += chunk;
        if (opts.hangUpAfter && text.includes(opts.hangUpAfter)) { req.destroy(); resolve({ status: res.statusCode, text, hungUp: true }); }
      });
      res.on('end', () => resolve({ status: res.statusCode, text }));
      res.on('error', () => resolve({ status: res.statusCode, text }));
    });
    req.on('error', () => undefined);
    req.end(body);
  });
}
const messages = (extra = {}) => ({ model, max_tokens: 400, messages: [{ role: 'user', content: 'hi' }], ...extra });

async function main() {
if (plan === 'parallel') {
  const replies = await Promise.all(Array.from({ length: 10 }, () => call({ body: messages({ stream: true }) })));
  log('statuses', replies.map((r) => r.status));
} else {
  // Billing headers with an honest call (the control: its usage is recorded as the provider reported it).
  log('headers', (await call({ body: messages(), headers: { 'OpenAI-Organization': 'org-evil', 'OpenAI-Project': 'proj-evil', 'anthropic-workspace': 'wrk-evil', 'x-goog-user-project': 'evil', 'x-forwarded-for': '203.0.113.9', cookie: 'a=b' } })).status);
  // Hang up after the content, before message_delta (the usage); then a listing tells the provider to go on.
  const cut = await call({ body: messages({ stream: true }), hangUpAfter: 'content_block_stop' });
  log('hangup', { hungUp: cut.hungUp === true, sawUsage: cut.text.includes('message_delta') });
  await call({ method: 'GET', path: base.pathname + '/v1/models' });
  // Model names that are not ids, and paths that are not the provider's routes.
  const names = ['../../v1/files', 'x\u001b[31m', 'a'.repeat(300), 'm?beta=false'];
  log('names', await Promise.all(names.map(async (m) => (await call({ body: messages({ model: m }) })).status)));
  const paths = ['/v1/../v1/messages', '/v1/messages%2F..%2Fcount_tokens', '/v1//messages', '/v1/messages?beta=true&organization=evil'];
  log('paths', await Promise.all(paths.map(async (p) => (await call({ path: base.pathname + p, body: messages() })).status)));
  // Five calls for another model that no answer names (wrong token: refused), to file the run under it.
  for (let i = 0; i < 5; i++) await call({ body: messages({ model: 'gpt-x-pro' }), token: 'wrong-token-0123456789abcdef' });
}
}
main().catch((err) => { console.error(err); process.exit(1); });
`;

const pinnedClaude = existsSync(path.join(projectCliBin(), 'claude'));
const describeRun = sandboxedAsRoot && !pinnedClaude ? describe : describe.skip;

let home: string;
let bin: string;
const a2rl = (args: string[], env: Record<string, string> = {}) => runA2rl(args, { env: { ...process.env, A2RL_HOME: home, ...env } });
const ofType = (evs: Ev[], type: string) => evs.filter((e) => e.type === type);
const tokens = (u: Record<string, number | null>) => (u.inputTokens ?? 0) + (u.outputTokens ?? 0) + (u.cacheReadTokens ?? 0) + (u.cacheWriteTokens ?? 0);

/** One run of the hostile `claude` (`plan`: its folder) against `fake`. */
async function runAgent(plan: 'parallel' | 'misc', fake: FakeLlmServer, args: string[]) {
  const env = { PATH: `${path.join(bin, plan)}:${process.env.PATH}`, A2RL_LLM_ANTHROPIC_URL: fake.url, A2RL_LLM_ANTHROPIC_KEY: KEY };
  const r = await a2rl(['run', '--task', 'ref-arith', '--agent', 'claude-code', '--budget', '120s', '--json', ...args], env);
  if (r.code !== 0) throw new Error(`a2rl run failed (${r.code}): ${r.stderr.slice(-2000)}`);
  const runId = (JSON.parse(r.stdout.trim().split('\n').pop()!) as { runId: string }).runId;
  const events = (await a2rl(['events', runId, '--json'])).stdout.trim().split('\n').map((l) => JSON.parse(l) as Ev);
  return { runId, events };
}

async function withFake<T>(options: Partial<FakeLlmOptions>, use: (fake: FakeLlmServer) => Promise<T>): Promise<T> {
  const fake = await startFakeAnthropic({ script: [], expectKey: KEY, ...options });
  try {
    return await use(fake);
  } finally {
    await fake.close();
  }
}

describeRun('a hostile agent against its LLM gateway (harness as root, sandboxed)', () => {
  beforeAll(() => {
    home = mkdtempSync(path.join(os.tmpdir(), 'a2rl-hostile-llm-'));
    bin = mkdtempSync(path.join(os.tmpdir(), 'a2rl-hostile-claude-'));
    chmodSync(bin, 0o755);
    for (const plan of ['parallel', 'misc']) {
      const dir = path.join(bin, plan);
      execFileSync('mkdir', ['-m', '755', dir]);
      writeFileSync(path.join(dir, 'claude'), AGENT, { mode: 0o755 });
    }
  });
  afterAll(() => {
    rmSync(home, { recursive: true, force: true });
    rmSync(bin, { recursive: true, force: true });
  });

  it('ten calls at once do not take the run past --max-llm-tokens (beyond one call that went alone)', async () => {
    await withFake({ usage: usageFromRequest() }, async (fake) => {
      const { events } = await runAgent('parallel', fake, ['--driver', 'claude-sonnet-4-5', '--max-llm-tokens', String(MAX_TOKENS)]);
      const calls = ofType(events, 'LlmCallRecorded').map((e) => e.data as { outcome: string; status: number; usage: Record<string, number | null>; usageSource?: string });
      const answered = calls.filter((c) => c.outcome === 'ok');
      const total = answered.reduce((n, c) => n + tokens(c.usage), 0);
      const largest = Math.max(...answered.map((c) => tokens(c.usage)));
      const [reached] = ofType(events, 'LimitReached').map((e) => e.data);
      expect({
        calls: calls.length,
        refused: calls.filter((c) => c.outcome === 'limit_exceeded' && c.status === 429).length > 0,
        // Calls that fit their reservations end under the limit; one more may go alone while the spend is under it.
        withinBound: total <= MAX_TOKENS - 1 + largest,
        reachedTheProvider: agentCalls(fake).length,
        asReported: answered.map((c) => [c.usage.inputTokens, c.usage.outputTokens, c.usageSource]),
        limitReached: reached && { limit: reached.limit, value: reached.value, max: reached.max },
      }).toEqual({
        calls: 10,
        refused: true,
        withinBound: true,
        reachedTheProvider: answered.length,
        asReported: agentCalls(fake).map((c: FakeLlmCall) => [c.usage!.input, c.usage!.output, 'provider']),
        limitReached: { limit: 'llmTokens', value: total, max: MAX_TOKENS },
      });
    });
  }, 240_000);

  it('hang-ups, billing headers, bad names, path tricks and requested names get the agent nothing', async () => {
    // The provider answers every call as claude-y; a streamed answer waits before its usage until the agent's next call.
    let next!: () => void;
    const listed = new Promise<void>((resolve) => (next = resolve));
    let timer: NodeJS.Timeout | undefined;
    const hold = (call: FakeLlmCall) => (call.stream ? Promise.race([listed, new Promise<void>((r) => (timer = setTimeout(r, 60_000)))]) : undefined);
    await withFake({ model: 'claude-y', hold }, async (fake) => {
      // agentCalls filters into a new array: read it when needed, not once before the run.
      const watch = setInterval(() => agentCalls(fake).some((c) => c.path === '/v1/models') && next(), 50);
      const { runId, events } = await runAgent('misc', fake, ['--driver', 'gpt-x']).finally(() => (clearInterval(watch), clearTimeout(timer)));
      const seen = agentCalls(fake);
      const calls = ofType(events, 'LlmCallRecorded').map((e) => e.data as { api: string; outcome: string; status: number; modelRequested: string | null; usage: Record<string, number | null>; usageSource?: string; stream: boolean });
      const messages = calls.filter((c) => c.api === 'messages');

      // No billing, organisation, forwarding or cookie header reached the provider.
      const forwarded = new Set(seen.flatMap((c) => Object.keys(c.headers)));
      expect(['openai-organization', 'openai-project', 'anthropic-workspace', 'x-goog-user-project', 'x-forwarded-for', 'cookie'].filter((h) => forwarded.has(h))).toEqual([]);
      expect(seen.every((c) => c.authOk)).toBe(true);
      // Bad names and path tricks never reached it: it saw the honest call, the cut one and the listing.
      expect(seen.map((c) => [c.path, c.model])).toEqual([
        ['/v1/messages', 'gpt-x'],
        ['/v1/messages', 'gpt-x'],
        ['/v1/models', null],
      ]);
      // The cut call: the provider wrote its answer to the end, the record has the usage it reported.
      const [honest, cut] = messages.filter((c) => c.modelRequested === 'gpt-x');
      expect(seen[1].finished).toBe(true);
      expect([cut.outcome, cut.usage.inputTokens, cut.usage.outputTokens, cut.usageSource]).toEqual(['client_aborted', seen[1].usage!.input, seen[1].usage!.output, 'provider']);
      expect([honest.outcome, honest.usage.inputTokens, honest.usage.outputTokens, honest.usageSource]).toEqual(['ok', seen[0].usage!.input, seen[0].usage!.output, 'provider']);
      // Bad names: refused 400 without the name; the wrong-token calls refused 401.
      expect(messages.filter((c) => c.status === 400).map((c) => [c.outcome, c.modelRequested])).toEqual(Array.from({ length: 4 }, () => ['refused', null]));
      expect(messages.filter((c) => c.status === 401).map((c) => c.modelRequested)).toEqual(Array.from({ length: 5 }, () => 'gpt-x-pro'));

      // The run is filed under the model that answered, not the ones asked for.
      const report = JSON.parse((await a2rl(['report', runId, '--format', 'json'])).stdout) as { run: { driver: string | null; declaredDriver?: string | null } };
      expect(report.run.driver).toBe('claude-y');
      const board = JSON.parse((await a2rl(['scoreboard', '--json'])).stdout) as Array<{ driver: string | null; runIds: string[] }> | { rows: Array<{ driver: string | null; runIds: string[] }> };
      const rows = Array.isArray(board) ? board : board.rows;
      expect(rows.find((r) => r.runIds.includes(runId))?.driver).toBe('claude-y');
    });
  }, 240_000);
});
