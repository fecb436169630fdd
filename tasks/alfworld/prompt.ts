import type { EnvResetResult, EnvStepResult } from '../task-pack.js';
import type { EpisodePolicy } from '../paper-common/env-episodes.js';

/** Model replies per game (thinking included), as in the paper. */
export const MAX_STEPS = 50;
export const MAX_TOKENS_PER_STEP = 128;
export const PROMPTS_FILE = 'alfworld_3prompts.json';

/** ALFWorld's six task types: the game directory's prefix → the key of their few-shot examples in PROMPTS_FILE. */
export const TASK_TYPES = [
  ['pick_and_place', 'put'],
  ['pick_clean_then_place', 'clean'],
  ['pick_heat_then_place', 'heat'],
  ['pick_cool_then_place', 'cool'],
  ['look_at_obj', 'examine'],
  ['pick_two_obj', 'puttwo'],
] as const;
export type TaskTypeKey = (typeof TASK_TYPES)[number][1];

/** The few-shot key (`put`, `clean`…) of a game's task type (its directory name), or null for an unknown one. */
export function taskTypeKey(taskType: string): TaskTypeKey | null {
  return TASK_TYPES.find(([prefix]) => taskType.startsWith(prefix))?.[1] ?? null;
}

/** The keys every prompts file must hold: two examples per task type. */
export const PROMPT_KEYS = TASK_TYPES.flatMap(([, key]) => [`react_${key}_0`, `react_${key}_1`]);

/** Problems with a prompts file (missing keys, non-text values); empty when usable. */
export function promptsProblems(prompts: unknown): string[] {
  if (typeof prompts !== 'object' || prompts === null || Array.isArray(prompts)) return ['not a JSON object'];
  return PROMPT_KEYS.filter((k) => typeof (prompts as Record<string, unknown>)[k] !== 'string' || (prompts as Record<string, string>)[k].trim() === '').map((k) => `${k} is missing or empty`);
}

/**
 * The ReAct policy: the first user turn holds two solved examples of the game's task type, then the
 * game's first observation; each reply's first line is one action (a leading `>` is dropped), and
 * `think: …` is answered "OK." without acting. Every observation ends with the `>` prompt.
 */
export function reactPolicy(prompts: Record<string, string>): EpisodePolicy {
  return {
    maxSteps: MAX_STEPS,
    maxTokens: MAX_TOKENS_PER_STEP,
    stop: ['\n'],
    firstMessage(reset: EnvResetResult) {
      const key = taskTypeKey(String(reset.info.task_type ?? ''));
      if (!key) throw new Error(`unknown ALFWorld task type "${String(reset.info.task_type)}" (game ${String(reset.info.game)})`);
      return (
        'Interact with a household to solve a task. Here are two examples.\n' +
        prompts[`react_${key}_1`] +
        prompts[`react_${key}_0`] +
        '\nHere is the task.\n' +
        `${reset.observation}\n>`
      );
    },
    nextMessage: (step: EnvStepResult) => `${step.observation}\n>`,
    parseReply(reply: string) {
      const line = reply.split('\n').map((l) => l.trim()).find((l) => l !== '') ?? '';
      const action = line.replace(/^>\s*/, '').trim();
      return action.startsWith('think:') ? { think: true } : { action };
    },
  };
}
