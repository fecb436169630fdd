import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { assertServableCheckpoint, copyBaseModel, datasetDirOf } from '../paper-common/dataset.js';
import { evaluateOnEnvServer, openServerTraining, round4, THINK_OBSERVATION, type EpisodePolicy } from '../paper-common/env-episodes.js';
import { SERVING_REQUIREMENTS } from '../paper-common/served-chat.js';
import type { EnvResetResult, EnvStepResult, EvaluationContext, EvaluationResult, TaskPack, TaskPaths } from '../task-pack.js';

const TASK_ID = 'webshop';
const BASE_MODEL = 'base-model';
/** The environment server's name (A2RL_ENV_WEBSHOP_COMMAND / _URL) and its bundled backend's import. */
const ENV_SERVER = 'webshop';
/** Model replies per evaluation episode (thinking included) and environment steps per training episode. */
export const MAX_STEPS = 50;
export const MAX_TOKENS = 150;
/** The private sessions: WebShop goals 0..99 (the env server's `eval` split). */
export const EVAL_SESSIONS = 100;
/** A purchase this good counts as a success (WebShop's reward is in [0, 1]). */
export const SUCCESS_REWARD = 0.5;
/** Episodes in flight: the env server answers one request at a time, vLLM batches the replies. */
const CONCURRENCY = 4;
/** What both the bundled backend and the test backend answer to an action the page does not offer. */
export const INVALID_OBSERVATION = 'Invalid action!';
/** Longest pass-through of a reply without an action (it only has to earn "Invalid action!"). */
const MAX_PASSTHROUGH = 200;

/** The first user message's fixed part, before the first observation (written for a2rl). */
export const INSTRUCTIONS = `You are a shopping assistant in a simulated web store. The first page shows a customer's request after "Instruction:". Find the product that best fits it (the kind of item, its attributes, the options such as size or colour, and the price limit) and buy it.

Pages are shown as text, their elements separated by [SEP]. You act with these actions:
- search[<query>] types <query> into the search box (only on a page that has one);
- click[<element>] clicks a button, a product or an option of the current page, named as in the list of available actions (products are listed by their product ID);
- think[<reasoning>] lets you reason; the store is not touched and answers "${THINK_OBSERVATION}".
Reply with exactly one action per turn and nothing else. An action the page does not offer is answered "${INVALID_OBSERVATION}".
Select the options the request asks for on the product page before you click "buy now": the purchase ends the episode. You have at most ${MAX_STEPS} turns, thinking included.`;

function withActions(observation: string, actions: readonly string[]): string {
  return actions.length ? `Observation: ${observation}\nAvailable actions: ${actions.join(', ')}` : `Observation: ${observation}`;
}

export function firstMessage(reset: EnvResetResult): string {
  return `${INSTRUCTIONS}\n\n${withActions(reset.observation, reset.admissibleActions)}`;
}

export function nextMessage(step: EnvStepResult): string {
  return withActions(step.observation, step.admissibleActions);
}

/** Index of the `]` closing the `[` at `open` (nested pairs allowed), or -1. */
function closingBracket(text: string, open: number): number {
  let depth = 0;
  for (let i = open; i < text.length; i++) {
    if (text[i] === '[') depth++;
    else if (text[i] === ']' && --depth === 0) return i;
  }
  return -1;
}

export type ParsedReply = { think: true } | { action: string };

/**
 * The action of a reply: its first `search[...]`, `click[...]` or `think[...]` (case-insensitive
 * name, argument up to the matching bracket, trimmed; text around it is ignored). A `think[` left
 * open (cut off by the token limit) is still a think. A reply with no complete action is passed to
 * the environment as its trimmed first line, which answers "Invalid action!" and costs the step.
 */
export function parseReply(reply: string): ParsedReply & { parsed: boolean } {
  for (const m of reply.matchAll(/\b(search|click|think)\[/gi)) {
    const kind = m[1]!.toLowerCase();
    const open = m.index + m[0].length - 1;
    const close = closingBracket(reply, open);
    if (kind === 'think') return { think: true, parsed: true };
    if (close < 0) break;
    return { action: `${kind}[${reply.slice(open + 1, close).trim()}]`, parsed: true };
  }
  return { action: (reply.trim().split('\n')[0] ?? '').trim().slice(0, MAX_PASSTHROUGH), parsed: false };
}

/** The evaluation policy, counting (over one evaluation) replies without an action and refused actions. */
function policyWithCounters() {
  const counts = { unparsedReplies: 0, invalidActions: 0 };
  const policy: EpisodePolicy = {
    firstMessage,
    nextMessage(step) {
      if (step.observation.trim() === INVALID_OBSERVATION || step.info.invalid === true) counts.invalidActions++;
      return nextMessage(step);
    },
    parseReply(reply) {
      const { parsed, ...action } = parseReply(reply);
      if (!parsed) counts.unparsedReplies++;
      return action;
    },
    maxSteps: MAX_STEPS,
    maxTokens: MAX_TOKENS,
    // No stop sequences: the chat template ends the turn, and only the first action counts anyway.
  };
  return { policy, counts };
}

const indent = (text: string) => text.split('\n').map((line) => (line ? `    ${line}` : '')).join('\n');

const PROMPT_BLOCK = indent(`${INSTRUCTIONS}

Observation: <the first page>
Available actions: <the page's actions, comma-separated>`);

const SCORING = `Score = success rate × 100, where an episode succeeds when its final reward is at least ${SUCCESS_REWARD}.
The final reward is WebShop's purchase reward (0–1: how well the bought product's type, attributes,
options and price match the instruction); an episode that ends without a purchase (${MAX_STEPS} replies
used up) has final reward 0. The details also give the mean final reward, the mean number of replies,
the outcomes (\`bought\`, \`ran_out_of_steps\`) and the counts of thinks, replies without an action and
refused actions.`;

const DESCRIPTION = `# webshop — buy what the customer asked for in a simulated web store (L3, interactive, WebShop)

Improve the base model (\`models/${BASE_MODEL}/\`, a Hugging Face checkpoint) as a WebShop agent: read a
customer's instruction, search the store, open products, choose options and buy the best match.

## Training environment
There is no static training data: roll out WebShop episodes through the grading API,
\`POST $GRADING_SERVER_URL/env/reset\` \`{"seed": <n>}\` and \`POST $GRADING_SERVER_URL/env/step\`
\`{"session_id", "action"}\` (every step is recorded). They are played on WebShop's training goals; the
private evaluation sessions are never served. \`data/README.md\` documents the API and the action syntax.

## Evaluation
${EVAL_SESSIONS} private sessions (WebShop goals 0–${EVAL_SESSIONS - 1}, human-written instructions). Your checkpoint is served
with vLLM (chat completions, its own chat template, temperature 0, at most ${MAX_TOKENS} new tokens per reply,
no stop sequences) and plays each session for at most ${MAX_STEPS} replies. The first user message is:

${PROMPT_BLOCK}

After each action the next user message is \`Observation: <page>\` and, unless the episode ended,
\`Available actions: …\`. The first \`search[...]\`, \`click[...]\` or \`think[...]\` of a reply is its action
(argument up to the matching bracket, trimmed); \`think[...]\` is answered \`${THINK_OBSERVATION}\` without touching the
store but still uses one of the ${MAX_STEPS} replies. A reply without an action is sent to the store as its first
line and answered \`${INVALID_OBSERVATION}\`, like any action the page does not offer.

${SCORING}

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
  \`{"session_id", "observation", "admissible_actions", "info"}\`. The seed picks a WebShop *training* goal
  (goal 1500 + seed modulo the number of training goals: WebShop's own train split); the same seed always
  gives the same instruction. The private evaluation sessions (goals 0–${EVAL_SESSIONS - 1}) are never served.
- \`POST $GRADING_SERVER_URL/env/step\` with \`{"session_id", "action"}\` →
  \`{"observation", "reward", "done", "admissible_actions", "info"}\`.

An episode ends (\`done\`) when you buy a product, or after ${MAX_STEPS} steps (then \`info.truncated\` is true and the
reward is 0). The reward is 0 on every step but the purchase, where it is WebShop's purchase reward in [0, 1]:
how well the product's type, attributes, chosen options and price match the instruction.

## Observations and actions
An observation is the current page as text, elements separated by \`[SEP]\`; the first page starts with
\`WebShop [SEP] Instruction: [SEP] <the customer's request> [SEP] Search\`. Actions:
- \`search[<query>]\` on a page with a search box (\`admissible_actions\` then contains \`search[<query>]\`);
- \`click[<element>]\` with an element of the page exactly as listed in \`admissible_actions\`
  (\`click[back to search]\`, \`click[next >]\`, a product ID such as \`click[b09abc1234]\`, an option
  such as \`click[large]\`, \`click[description]\`, \`click[< prev]\`, \`click[buy now]\`).
An action the page does not offer is answered \`${INVALID_OBSERVATION}\` (the page stays as it was) and costs a step.

## Evaluation
Your checkpoint plays ${EVAL_SESSIONS} private sessions, served with vLLM (chat completions, its own chat template,
temperature 0, at most ${MAX_TOKENS} new tokens per reply, no stop sequences), at most ${MAX_STEPS} replies each. The first
user message is exactly:

${PROMPT_BLOCK}

then, after each action, \`Observation: <page>\` followed (unless the episode ended) by \`Available actions: …\`.
The first \`search[...]\`, \`click[...]\` or \`think[...]\` of a reply is its action (argument up to the matching
bracket, trimmed, text around it ignored). \`think[...]\` is answered \`${THINK_OBSERVATION}\` without touching the store but
counts as one of the ${MAX_STEPS} replies. A reply without an action is sent as its first line and answered
\`${INVALID_OBSERVATION}\`.

${SCORING}
`;

async function materialize(paths: TaskPaths): Promise<void> {
  const datasetDir = datasetDirOf(TASK_ID, paths);
  await Promise.all([mkdir(paths.dataDir, { recursive: true }), mkdir(paths.privateDir, { recursive: true })]);
  await writeFile(join(paths.dataDir, 'README.md'), DATA_README);
  await copyBaseModel(TASK_ID, datasetDir, paths.modelDir);
}

async function evaluate(checkpointDir: string, _privateDir: string, signal?: AbortSignal, ctx?: EvaluationContext): Promise<EvaluationResult> {
  await assertServableCheckpoint(checkpointDir);
  const { policy, counts } = policyWithCounters();
  const { outcomes, health } = await evaluateOnEnvServer(TASK_ID, ENV_SERVER, ctx, checkpointDir, policy, { concurrency: CONCURRENCY, signal });
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
      thinks: sum(outcomes.map((o) => o.thinks)),
      unparsedReplies: counts.unparsedReplies,
      invalidActions: counts.invalidActions,
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
  evaluatorVersion: 'webshop-eval-1',
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
