import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from '@jest/globals';
import { projectCliBin } from '../../../modules/agents/agent-registry.js';
import { AGENT_UID, filesUnder, prepareDirectRun, runStartScript } from './direct-run.js';
import { startFakeOpenAI } from './fake-openai.js';

const KEY = 'fake-gateway-token-openai-opencode';

/**
 * The real OpenCode CLI (infra/agent-clis, pinned) run the way the harness runs it: start.sh with only
 * the environment and home files agent.json's `llm` section declares, the gateway replaced by the
 * fake, as uid 4242 with a fresh HOME when this runs as root. The adapter's provider is `@ai-sdk/openai`
 * (Responses); `@ai-sdk/openai-compatible` (Chat Completions) is the alternative for endpoints without
 * Responses, run here too. OpenCode runs commands with `bash` and asks for a title on the side (no tools).
 */
const opencode = path.join(projectCliBin(), 'opencode');
const haveOpenCode = existsSync(opencode);
const SHELL_TOOL = 'bash';
const SCRIPT = [
  "mkdir -p code && cat > code/train.py <<'EOF'\nprint('trained', 6 * 7)\nEOF",
  'python3 code/train.py > trained.txt',
  'id -u > whoami.txt && echo "$LLM_MODEL" > model.txt && env > env.txt',
];
const CONFIG = path.join('.config', 'opencode', 'opencode.json');

describe('OpenCode against the fake OpenAI API', () => {
  const variants = [
    { api: 'responses', path: '/v1/responses', edit: (text: string) => text },
    { api: 'chat completions', path: '/v1/chat/completions', edit: (text: string) => text.replace('"@ai-sdk/openai"', '"@ai-sdk/openai-compatible"') },
  ];
  for (const variant of variants) {
    (haveOpenCode ? it : it.skip)(
      haveOpenCode
        ? `runs each scripted command through bash as the non-root agent and exits 0 (${variant.api})`
        : `skipped: OpenCode is not installed at ${opencode} (npm test's pretest or \`a2rl agents install\` puts it there)`,
      async () => {
        const root = mkdtempSync(path.join(tmpdir(), 'a2rl-opencode-'));
        const fake = await startFakeOpenAI({ script: SCRIPT, finalText: 'Training done and submitted.', expectKey: KEY });
        try {
          const { home, workspace, env, model } = prepareRun(root, fake.url, variant.edit);
          const { code, tail } = await runAgent(env, workspace, 120_000);
          expect({ code, tail: code === 0 ? '' : tail }).toEqual({ code: 0, tail: '' });

          expect(readFileSync(path.join(workspace, 'trained.txt'), 'utf8')).toBe('trained 42\n');
          expect(readFileSync(path.join(workspace, 'model.txt'), 'utf8').trim()).toBe(model);
          if (process.getuid?.() === 0) expect(readFileSync(path.join(workspace, 'whoami.txt'), 'utf8').trim()).toBe(String(AGENT_UID));
          // the token is in the config file only: not in the commands' environment, nowhere else in the home
          expect(readFileSync(path.join(workspace, 'env.txt'), 'utf8').includes(KEY)).toBe(false);
          expect(filesUnder(home).filter((f) => readFileSync(f).includes(KEY)).map((f) => path.relative(home, f))).toEqual([CONFIG]);
          // the CLI keeps its state (sessions database, logs) in the agent home, never in the workspace
          expect(readdirSync(workspace).sort()).toEqual(['code', 'description.md', 'env.txt', 'instructions.md', 'model.txt', 'trained.txt', 'whoami.txt']);
          expect(existsSync(path.join(home, '.local', 'share', 'opencode', 'opencode.db'))).toBe(true);

          expect(fake.calls.every((c) => c.authOk && c.status === 200 && c.path === variant.path && c.stream && c.model === model)).toBe(true);
          const turns = fake.calls.filter((c) => c.tools.length > 0);
          const side = fake.calls.filter((c) => c.tools.length === 0);
          expect(turns.map((c) => c.toolCall?.name ?? null)).toEqual([SHELL_TOOL, SHELL_TOOL, SHELL_TOOL, null]);
          expect(turns.every((c) => c.tools.includes(SHELL_TOOL))).toBe(true);
          expect(side.length <= 1 && side.every((c) => c.toolCall === undefined)).toBe(true);
        } finally {
          await fake.close();
          rmSync(root, { recursive: true, force: true });
        }
      },
      150_000,
    );
  }
});

const prepareRun = (root: string, fakeUrl: string, edit?: (text: string) => string) => prepareDirectRun(root, { agent: 'opencode', gatewayPrefix: '{gateway}/openai', fakeUrl, token: KEY, edit });
const runAgent = runStartScript;
