import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { assertServableCheckpoint, copyBaseModel, datasetDirOf } from '../paper-common/dataset.js';
import { evaluateOnEnvServer, openServerTraining, round4, type EpisodePolicy, type EpisodeTranscript } from '../paper-common/env-episodes.js';
import { fillTemplate, loadProtocol, protocolNumber, protocolString, ProtocolError, type EvalProtocol } from '../paper-common/protocol.js';
import { SERVING_REQUIREMENTS } from '../paper-common/served-chat.js';
import type { EnvResetResult, EvaluationContext, EvaluationResult, TaskPack, TaskPaths } from '../task-pack.js';

const TASK_ID = 'webshop';
const BASE_MODEL = 'base-model';
/** The environment server's name (A2RL_ENV_WEBSHOP_COMMAND / _URL) and its bundled backend's import. */
const ENV_SERVER = 'webshop';
/** tasks/webshop/protocol.json: the paper harness's WebShop protocol. */
export const PROTOCOL: EvalProtocol = loadProtocol(TASK_ID);
/** Model replies per evaluation episode and environment steps per training episode. */
export const MAX_STEPS = protocolNumber(PROTOCOL, 'settings', 'maxSteps');
/** The private sessions: goals 0..99 of WebShop's goal list (the env server's `eval` split). */
export const EVAL_SESSIONS = protocolNumber(PROTOCOL, 'settings', 'evalSessions');
/** A purchase this good counts as a success (WebShop's reward is in [0, 1]). */
export const SUCCESS_REWARD = protocolNumber(PROTOCOL, 'postprocess', 'successReward');
/** Episodes in flight: the env server answers one request at a time, vLLM batches the replies. */
const CONCURRENCY = 4;
const P = (key: string) => protocolString(PROTOCOL, 'prompt', key);
const HISTORY_WINDOW = protocolNumber(PROTOCOL, 'prompt', 'historyWindow');
const RENAME = PROTOCOL.postprocess.renamePrefix as { from?: unknown; to?: unknown } | undefined;
if (typeof RENAME?.from !== 'string' || typeof RENAME.to !== 'string') throw new ProtocolError('tasks/webshop/protocol.json: postprocess.renamePrefix needs from and to');
const DROP_PREFIX = protocolString(PROTOCOL, 'postprocess', 'dropPrefix');

/** What the page offers, as WebShop's `get_available_actions()` (the backend passes it in `info.available`). */
export interface Available {
  has_search_bar: boolean;
  clickables: string[];
}

/**
 * The page's actions: `info.available` from a2rl's backend (WebShop's own list), else rebuilt from the
 * protocol's admissible actions (another server: `search[<query>]` means a search bar, `click[x]` a clickable).
 */
export function availableOf(info: Record<string, unknown>, admissible: readonly string[]): Available {
  const a = info.available as Partial<Available> | undefined;
  if (typeof a?.has_search_bar === 'boolean' && Array.isArray(a.clickables)) return { has_search_bar: a.has_search_bar, clickables: a.clickables.map(String) };
  return {
    has_search_bar: admissible.some((x) => x.startsWith('search[')),
    clickables: admissible.flatMap((x) => (x.startsWith('click[') && x.endsWith(']') ? [x.slice(6, -1)] : [])),
  };
}

/** The harness's available-actions list: `search[<your query>]` when there is a search bar, then every clickable, one per indented line. */
export function formatAvailable(available: Available): string {
  const actions = [...(available.has_search_bar ? [P('searchAction')] : []), ...available.clickables.map((clickable) => fillTemplate(P('clickTemplate'), { clickable }))];
  return actions.map((a) => `${P('actionLinePrefix')}${a}`).join('\n');
}

/** The instruction text WebShop shows (`info.instruction` from the backend, else read off the first page). */
export function instructionOf(reset: EnvResetResult): string {
  if (typeof reset.info.instruction === 'string') return reset.info.instruction;
  const m = /Instruction:\s*\[SEP\]\s*(.*?)\s*\[SEP\]/.exec(reset.observation);
  return m ? m[1]! : '';
}

/** The harness's user message: instructions, the last steps (at most the window) and the current observation. */
export function userMessage(instruction: string, history: readonly { action: string; observation: string }[], observation: string, available: Available): string {
  let prompt = fillTemplate(P('userTemplate'), { instruction, available_actions: formatAvailable(available) });
  const recent = history.slice(-HISTORY_WINDOW);
  const offset = history.length - recent.length;
  recent.forEach((step, i) => {
    prompt += fillTemplate(P('historyStepTemplate'), { n: String(offset + i + 1), observation: step.observation, action: step.action });
  });
  return prompt + fillTemplate(P('currentTemplate'), { n: String(history.length + 1), observation });
}

/** The harness's action cleaning: stripped, a leading `Action:` dropped, `choose[` read as `click[`. */
export function parseReply(reply: string): string {
  let action = reply.trim();
  if (action.startsWith(DROP_PREFIX)) action = action.slice(DROP_PREFIX.length).trim();
  if (action.startsWith(RENAME!.from as string)) action = `${RENAME!.to as string}${action.slice((RENAME!.from as string).length)}`;
  return action;
}

/** The evaluation policy: each step is a fresh [system, user] chat; every reply is sent to the store as an action. */
export function webshopPolicy(): EpisodePolicy {
  return {
    request: PROTOCOL.request,
    maxSteps: MAX_STEPS,
    start(reset): EpisodeTranscript {
      const instruction = instructionOf(reset);
      const history: { action: string; observation: string }[] = [];
      let observation = reset.observation;
      let available = availableOf(reset.info, reset.admissibleActions);
      return {
        input: () => ({ messages: [{ role: 'system', content: P('system') }, { role: 'user', content: userMessage(instruction, history, observation, available) }] }),
        parseReply: (reply) => ({ action: parseReply(reply) }),
        record(_reply, action, result) {
          if (action === null || result === null) return;
          observation = result.observation;
          history.push({ action, observation });
          if (!result.done) available = availableOf(result.info, result.admissibleActions);
        },
      };
    },
  };
}

const indent = (text: string) => text.split('\n').map((line) => (line ? `    ${line}` : '')).join('\n');

const EXAMPLE_USER = userMessage('<the instruction>', [], '<the current page>', { has_search_bar: true, clickables: ['<clickable 1>', '<clickable 2>'] });

const SCORING = `Score = success rate × 100, where an episode succeeds when its final reward is at least ${SUCCESS_REWARD}.
The final reward is WebShop's purchase reward (0–1: how well the bought product's type, attributes,
options and price match the instruction); an episode that ends without a purchase (${MAX_STEPS} replies
used up) has final reward 0. The details also give the mean final reward, the mean number of replies and
the outcomes (\`bought\`, \`ran_out_of_steps\`).`;

const EVALUATION = `As the paper's harness does: your checkpoint plays ${EVAL_SESSIONS} private sessions (goals 0–${EVAL_SESSIONS - 1} of WebShop's goal list
for the 1,000-product set with its synthetic instructions), served with vLLM (chat completions, its own chat
template, temperature ${PROTOCOL.request.temperature}, at most ${PROTOCOL.request.maxTokens} new tokens per reply, generation stopping at the first newline), at most
${MAX_STEPS} replies each. Every reply is a fresh conversation: the system message

${indent(P('system'))}

and one user message holding the instruction, the page's actions, the last ${HISTORY_WINDOW} steps and the current page:

${indent(EXAMPLE_USER)}

(after k steps, the last ${HISTORY_WINDOW} of them appear as \`Observation i: <page after action i>\` / \`Action i: <action i>\`
before \`Observation k+1\`). The reply, stripped, with a leading \`Action:\` dropped and \`choose[\` read as \`click[\`,
is sent to the store as the action; an action the page does not offer changes nothing and costs the reply.

${SCORING}`;

const DESCRIPTION = `# webshop — buy what the customer asked for in a simulated web store (L3, interactive, WebShop)

Improve the base model (\`models/${BASE_MODEL}/\`, a Hugging Face checkpoint) as a WebShop agent: read a
customer's instruction, search the store, open products, choose options and buy the best match.

## Training environment
There is no static training data: roll out WebShop episodes through the grading API,
\`POST $GRADING_SERVER_URL/env/reset\` \`{"seed": <n>}\` and \`POST $GRADING_SERVER_URL/env/step\`
\`{"session_id", "action"}\` (every step is recorded). They are played on WebShop goals from 1500 on; the
private evaluation sessions are never served. \`data/README.md\` documents the API and the action syntax.

## Evaluation
${EVALUATION}

## Submitting
Save a full model directory (\`save_pretrained\` weights, \`config.json\` and the tokenizer; merge LoRA adapters
first) under \`output/\` and submit its path.
`;

const DATA_README = `# webshop training environment

There is no static training data: WebShop's products, goals and search engine live in the environment
server the harness runs. Collect experience through the grading API (JSON bodies,
\`content-type: application/json\`, authenticated like your other grading API calls); every step is
recorded as a rollout.

## API
- \`POST $GRADING_SERVER_URL/env/reset\` with \`{"seed": <int ≥ 0>}\` (optional; default: the session's ordinal) →
  \`{"session_id", "observation", "admissible_actions", "info"}\`. The seed picks a WebShop goal from 1500 on
  (goal 1500 + seed modulo the number of those goals); the same seed always gives the same instruction. The
  private evaluation sessions (goals 0–${EVAL_SESSIONS - 1}) are never served. \`info.instruction\` is the instruction text,
  \`info.available\` WebShop's \`{"has_search_bar", "clickables"}\` for the page.
- \`POST $GRADING_SERVER_URL/env/step\` with \`{"session_id", "action"}\` →
  \`{"observation", "reward", "done", "admissible_actions", "info"}\`.

An episode ends (\`done\`) when you buy a product, or after ${MAX_STEPS} steps (then \`info.truncated\` is true and the
reward is 0). The reward is 0 on every step but the purchase, where it is WebShop's purchase reward in [0, 1]:
how well the product's type, attributes, chosen options and price match the instruction.

## Observations and actions
An observation is the current page as text, elements separated by \`[SEP]\`; the first page starts with
\`WebShop [SEP] Instruction: [SEP] <the customer's request> [SEP] Search\`. Actions:
- \`search[<query>]\` (\`admissible_actions\` then contains \`search[<query>]\`);
- \`click[<element>]\` with an element of the page as listed in \`admissible_actions\`
  (\`click[back to search]\`, \`click[next >]\`, a product ID such as \`click[b09abc1234]\`, an option
  such as \`click[large]\`, \`click[description]\`, \`click[< prev]\`, \`click[buy now]\`).
Any other action is passed to WebShop, which changes nothing (the page stays as it was); it costs a step.

## Evaluation
${EVALUATION}
`;

async function materialize(paths: TaskPaths): Promise<void> {
  const datasetDir = datasetDirOf(TASK_ID, paths);
  await Promise.all([mkdir(paths.dataDir, { recursive: true }), mkdir(paths.privateDir, { recursive: true })]);
  await writeFile(join(paths.dataDir, 'README.md'), DATA_README);
  await copyBaseModel(TASK_ID, datasetDir, paths.modelDir);
}

async function evaluate(checkpointDir: string, _privateDir: string, signal?: AbortSignal, ctx?: EvaluationContext): Promise<EvaluationResult> {
  await assertServableCheckpoint(checkpointDir);
  const { outcomes, health } = await evaluateOnEnvServer(TASK_ID, ENV_SERVER, ctx, checkpointDir, webshopPolicy(), { concurrency: CONCURRENCY, signal });
  // The reward of a purchase; an episode that never bought anything ends with 0 whatever came before.
  const finalReward = outcomes.map((o) => (o.done ? o.reward : 0));
  const episodes = outcomes.length;
  const successes = finalReward.filter((r) => r >= SUCCESS_REWARD).length;
  const bought = outcomes.filter((o) => o.done).length;
  const sum = (xs: readonly number[]) => xs.reduce((a, b) => a + b, 0);
  const successRate = episodes === 0 ? 0 : successes / episodes;
  return {
    score: Math.round(successRate * 10_000) / 100,
    details: {
      episodes,
      successes,
      successRate: round4(successRate),
      meanReward: episodes === 0 ? 0 : round4(sum(finalReward) / episodes),
      meanSteps: episodes === 0 ? 0 : round4(sum(outcomes.map((o) => o.steps)) / episodes),
      outcomes: { bought, ran_out_of_steps: episodes - bought },
      environment: health.env,
      evalSessions: health.splits.eval,
      fullEvalSet: health.splits.eval === EVAL_SESSIONS,
    },
  };
}

export const webshop: TaskPack = {
  id: TASK_ID,
  level: 3,
  title: 'WebShop simulated web shopping (interactive environment server, served with vLLM)',
  baseModel: BASE_MODEL,
  evaluatorVersion: 'webshop-eval-2',
  protocol: PROTOCOL,
  description: DESCRIPTION,
  requirements: [
    ...SERVING_REQUIREMENTS,
    { kind: 'dataset' },
    {
      kind: 'env-server',
      name: ENV_SERVER,
      pythonModule: 'web_agent_site',
      hint: 'clone https://github.com/princeton-nlp/WebShop and run its setup.sh (products + search index), then put it on PYTHONPATH',
    },
  ],
  environment: {
    name: 'webshop/v1',
    maxSteps: MAX_STEPS,
    open: (ctx, signal) => openServerTraining(ENV_SERVER, MAX_STEPS, ctx, signal),
  },
  materialize,
  evaluate,
};
