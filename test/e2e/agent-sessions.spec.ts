import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from '@jest/globals';
import { MemoryArtifactStore } from '../../infra/artifacts/memory-artifact-store.js';
import { projectCliBin, loadAgent } from '../../modules/agents/agent-registry.js';
import { pythonAgentBinDirs } from '../../modules/agents/python-agent-systems.js';
import { agentSessionEnv } from '../../modules/agents/agent-session.js';
import { RedactingArtifactStore } from '../../modules/instrumentation/redacting-artifact-store.js';
import { RunRedaction } from '../../modules/instrumentation/run-redaction.js';
import { archiveAgentHome, restoreAgentHome, writeAgentHomeFiles } from '../../modules/runs/agent-home.js';
import { conversationOf, lastUserText } from '../servers/fake-llm/conversation.js';
import { AGENT_UID, filesUnder, killProcessesUnder, prepareDirectRun, runStartScript, type DirectRun } from '../servers/fake-llm/direct-run.js';
import { startFakeAnthropic } from '../servers/fake-llm/fake-anthropic.js';
import { startFakeGemini } from '../servers/fake-llm/fake-gemini.js';
import { startFakeOpenAI } from '../servers/fake-llm/fake-openai.js';
import type { FakeLlmCall, FakeLlmOptions, FakeLlmServer } from '../servers/fake-llm/types.js';

// Each real agent CLI (pinned in infra/agent-clis) run twice through its start.sh, as a resumed run
// launches it: first with the run's A2RL_SESSION_ID until its first tool call has been answered, then
// SIGKILLed (the harness lost) while its next model request is pending; then again with A2RL_RESUMED=1
// and the harness's note, in the same home, or (another machine) in a home restored from the first
// one's archive with the workspace at another path. The scripted fake records every request body, so
// the test reads what the resumed CLI sent: the earlier conversation (the prompt, the first tool
// result) with the note as the newest user message. A CLI resumed before it saved any session starts
// afresh with the prompt and the note. Run directly, not through `a2rl run`: the harness's resume is
// tested with the run's other steps. A CLI that is not installed is skipped.

const TOKEN = 'fake-gateway-token-sessions-5e1c';
/** The first command prints a line its own text does not contain, so a tool result is told from a tool call. */
const SCRIPT = ["printf 'first%s\\n' -tool-result-7c3a", 'echo resumed > after-resume.txt'];
const FIRST_RESULT = 'first-tool-result-7c3a';
const NOTE = 'a2rl: this run was resumed after the harness was lost (note-4f1b). Your workspace is as it was; 170 s of the budget are left.';
const RUN_ID = 'ref-arith-20260101T000000Z-abcdef';
/** Generous caps for a busy machine: a launch, and a test (two launches and the rest). */
const LAUNCH_CAP_MS = 300_000;
const TEST_CAP_MS = 700_000;

/** A direct run of a CLI, as the agent's uid or (a Python agent system) as the harness's. */
type SessionRun = DirectRun & { asAgent: boolean };

interface Cli {
  agent: string;
  binary: string;
  gatewayPrefix: string;
  start: (o: FakeLlmOptions) => Promise<FakeLlmServer>;
  /**
   * A Python agent system (infra/python-agents, installed under the harness's cache): run as the
   * harness's user, whose cache the agent's uid cannot reach outside the sandbox.
   */
  python?: true;
}

const CLIS: Cli[] = [
  { agent: 'claude-code', binary: 'claude', gatewayPrefix: '{gateway}/anthropic', start: startFakeAnthropic },
  { agent: 'codex-cli', binary: 'codex', gatewayPrefix: '{gateway}/openai', start: startFakeOpenAI },
  { agent: 'gemini-cli', binary: 'gemini', gatewayPrefix: '{gateway}/gemini', start: startFakeGemini },
  { agent: 'opencode', binary: 'opencode', gatewayPrefix: '{gateway}/openai', start: startFakeOpenAI },
  { agent: 'openhands', binary: 'openhands', gatewayPrefix: '{gateway}/openai', start: startFakeOpenAI, python: true },
];

const binDir = (cli: Cli) => (cli.python ? pythonAgentBinDirs().find((dir) => existsSync(path.join(dir, cli.binary))) : projectCliBin());
const installed = (cli: Cli) => {
  const dir = binDir(cli);
  return !!dir && existsSync(path.join(dir, cli.binary));
};

/** Model requests that offer tools: the agent's turns, not the titles and checks a CLI asks for on the side. */
const agentTurns = (fake: FakeLlmServer): FakeLlmCall[] => fake.calls.filter((c) => c.tools.length > 0 && c.body !== undefined);

async function waitFor(what: string, ok: () => boolean, capMs = 90_000): Promise<void> {
  for (const started = Date.now(); !ok(); ) {
    if (Date.now() - started > capMs) throw new Error(`gave up waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The state of the harness's loss: requests are held while `holding`; `pending` once one is. */
interface Loss {
  holding: boolean;
  pending: boolean;
  release: () => void;
}

const offersTools = (request: unknown) => Array.isArray((request as { tools?: unknown[] } | undefined)?.tools) && (request as { tools: unknown[] }).tools.length > 0;

/**
 * A fake that, while `loss.holding`, does not begin to answer an agent request carrying the first tool
 * result: the CLI has had its first command answered and waits for its model when it is killed.
 */
async function fakeFor(cli: Cli): Promise<{ fake: FakeLlmServer; loss: Loss }> {
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  const loss: Loss = { holding: true, pending: false, release: () => release() };
  const fake = await cli.start({
    script: SCRIPT,
    finalText: 'Done after the resume.',
    expectKey: TOKEN,
    before: (_path, request) => {
      if (!loss.holding || !offersTools(request) || !conversationOf(request).some((t) => t.role === 'tool' && t.text.includes(FIRST_RESULT))) return undefined;
      loss.pending = true;
      return gate;
    },
  });
  return { fake, loss };
}

/** Some file of the agent home holds `text`: the CLI has written it to its session state. */
const homeHolds = (home: string, text: string) => filesUnder(home).some((f) => readFileSync(f).includes(text));

/**
 * The first launch, SIGKILLed once its request after the first tool result is pending and the CLI has
 * written that result to its session in the home (a CLI writes its transcript a moment after the fact:
 * what it had not written when the harness died is lost, as it would be in a real run). The held
 * request is never answered (released only when the fake has closed).
 */
async function launchAndLose(run: SessionRun, fake: FakeLlmServer, loss: Loss) {
  let killed!: () => void;
  const kill = new Promise<void>((r) => (killed = r));
  let exited = false;
  const first = runStartScript({ ...run.env, ...agentSessionEnv(RUN_ID) }, run.workspace, LAUNCH_CAP_MS, kill, run.asAgent).finally(() => (exited = true));
  // Ends early when the CLI exits on its own (the test then fails on its output).
  await waitFor('the request after the first tool result', () => exited || (loss.pending && homeHolds(run.home, FIRST_RESULT)));
  killed();
  const ended = await first;
  loss.holding = false;
  return { ended, callsBefore: fake.calls.length };
}

/** The resumed launch; what its first agent request carried, and how it ended. */
async function resume(run: SessionRun, fake: FakeLlmServer, callsBefore: number, where: { home: string; workspace: string } = run) {
  const env: Record<string, string> = { ...run.env, HOME: where.home, WORKSPACE: where.workspace, ...agentSessionEnv(RUN_ID, { note: NOTE }) };
  // agent.json's `{home}/.codex`, as the harness fills it in for the home the resumed run has.
  if (run.env.CODEX_HOME) env.CODEX_HOME = path.join(where.home, '.codex');
  const ended = await runStartScript(env, where.workspace, LAUNCH_CAP_MS, undefined, run.asAgent);
  const resumed = agentTurns({ ...fake, calls: fake.calls.slice(callsBefore) })[0];
  return { ended, resumed };
}

/** What the resumed request carried, in the order it carried it. */
function seen(call: FakeLlmCall | undefined) {
  const turns = conversationOf(call?.body);
  const at = (ok: (t: (typeof turns)[number]) => boolean) => turns.findIndex(ok);
  const prompt = at((t) => t.role === 'user' && t.text.includes('Train a model.'));
  const result = at((t) => t.role === 'tool' && t.text.includes(FIRST_RESULT));
  return {
    prompt: prompt >= 0,
    firstToolResult: result >= 0,
    inOrder: prompt >= 0 && prompt < result,
    noteIsNewestUserMessage: lastUserText(call?.body)?.includes(NOTE) ?? false,
    noteOnce: turns.filter((t) => t.text.includes('note-4f1b')).length,
  };
}

describe('the agent CLIs continue their own session after a resume', () => {
  const roots: string[] = [];
  const servers: Array<{ fake: FakeLlmServer; loss: Loss }> = [];
  afterEach(async () => {
    await Promise.all(servers.map((s) => s.fake.close()));
    for (const { loss } of servers.splice(0)) loss.release();
    for (const root of roots.splice(0)) {
      killProcessesUnder(root); // OpenHands' tmux server outlives start.sh here (no sandbox to end it)
      rmSync(root, { recursive: true, force: true });
    }
  });

  async function setUp(cli: Cli) {
    const root = mkdtempSync(path.join(tmpdir(), `a2rl-session-${cli.agent}-`));
    roots.push(root);
    const { fake, loss } = await fakeFor(cli);
    servers.push({ fake, loss });
    const prepared = prepareDirectRun(root, { agent: cli.agent, gatewayPrefix: cli.gatewayPrefix, fakeUrl: fake.url, token: TOKEN });
    const run: SessionRun = { ...prepared, env: { ...prepared.env, PATH: `${binDir(cli)}:${prepared.env.PATH}` }, asAgent: !cli.python };
    return { root, fake, loss, run };
  }

  for (const cli of CLIS) {
    const resumable = loadAgent(cli.agent).session === 'resumable';
    const maybe = installed(cli) ? it : it.skip;
    maybe(`${cli.agent}: SIGKILLed after its first answered tool call, it resumes ${resumable ? 'its session' : 'afresh'} with the note as the newest user message`, async () => {
      const { fake, loss, run } = await setUp(cli);
      const { ended, callsBefore } = await launchAndLose(run, fake, loss);
      expect(ended.tail).toContain('[killed by the test]');
      expect(existsSync(path.join(run.workspace, 'after-resume.txt'))).toBe(false);

      const { ended: after, resumed } = await resume(run, fake, callsBefore);
      expect({ code: after.code, tail: after.code === 0 ? '' : after.tail.slice(-3000) }).toEqual({ code: 0, tail: '' });
      expect(seen(resumed)).toEqual(
        resumable
          ? { prompt: true, firstToolResult: true, inOrder: true, noteIsNewestUserMessage: true, noteOnce: 1 }
          : { prompt: true, firstToolResult: false, inOrder: false, noteIsNewestUserMessage: true, noteOnce: 1 },
      );
      // The session went on from where it was: the script's second step ran after the resume.
      expect(readFileSync(path.join(run.workspace, 'after-resume.txt'), 'utf8')).toBe('resumed\n');
    }, TEST_CAP_MS);
  }

  for (const cli of CLIS) {
    (installed(cli) ? it : it.skip)(`${cli.agent}: resumed before it wrote any session, it starts afresh with the prompt followed by the note`, async () => {
      const { fake, loss, run } = await setUp(cli);
      loss.holding = false;
      const { ended, resumed } = await resume(run, fake, 0);
      expect({ code: ended.code, tail: ended.code === 0 ? '' : ended.tail.slice(-3000) }).toEqual({ code: 0, tail: '' });
      expect(seen(resumed)).toEqual({ prompt: true, firstToolResult: false, inOrder: false, noteIsNewestUserMessage: true, noteOnce: 1 });
      expect(readFileSync(path.join(run.workspace, 'after-resume.txt'), 'utf8')).toBe('resumed\n');
    }, TEST_CAP_MS);
  }

  // Another machine: the home restored from its archive alone (redacted, through the store) and the
  // adapter's files written again, as the resumed run does; the workspace rebuilt at another path; the
  // first home and workspace gone.
  for (const cli of CLIS) {
    (installed(cli) ? it : it.skip)(`${cli.agent}: restored from the archive of its home into a new home, with the workspace at another path, it resumes its session there`, async () => {
      const { root, fake, loss, run } = await setUp(cli);
      const { callsBefore } = await launchAndLose(run, fake, loss);

      // Archived as the harness archives it: through the run's redacting store (the gateway token, if a
      // CLI kept it, becomes a marker; the resumed run writes the adapter's files again with its own).
      const store = new MemoryArtifactStore();
      const redacting = new RedactingArtifactStore(store, new RunRedaction({ secrets: [{ kind: 'gateway-token', value: TOKEN }] }));
      const archived = await archiveAgentHome(run.home, redacting, { maxFiles: 2000, maxFileBytes: 16 << 20 });
      const elsewhere = { home: path.join(root, 'other-machine', 'home'), workspace: path.join(root, 'other-machine', 'workspace') };
      mkdirSync(path.dirname(elsewhere.home));
      const uid = run.asAgent && process.getuid?.() === 0 ? AGENT_UID : undefined;
      await restoreAgentHome(elsewhere.home, archived.files, store, uid);
      await writeAgentHomeFiles(elsewhere.home, run.files, uid);
      execFileSync('cp', ['-a', run.workspace, elsewhere.workspace]);
      rmSync(run.home, { recursive: true, force: true });
      rmSync(run.workspace, { recursive: true, force: true });

      const { ended, resumed } = await resume(run, fake, callsBefore, elsewhere);
      expect({ code: ended.code, tail: ended.code === 0 ? '' : ended.tail.slice(-3000) }).toEqual({ code: 0, tail: '' });
      expect(seen(resumed)).toEqual({ prompt: true, firstToolResult: true, inOrder: true, noteIsNewestUserMessage: true, noteOnce: 1 });
      expect(readFileSync(path.join(elsewhere.workspace, 'after-resume.txt'), 'utf8')).toBe('resumed\n');
    }, TEST_CAP_MS);
  }
});
