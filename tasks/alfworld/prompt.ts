import { fillTemplate, loadProtocol, protocolNumber, protocolString, protocolStrings, type EvalProtocol } from '../paper-common/protocol.js';
import type { EpisodePolicy, EpisodeTranscript } from '../paper-common/env-episodes.js';
import type { EnvResetResult } from '../task-pack.js';

/** tasks/alfworld/protocol.json: the paper harness's ReAct text-completion protocol. */
export const PROTOCOL: EvalProtocol = loadProtocol('alfworld');
/** Model replies per game (thinking included), as in the paper. */
export const MAX_STEPS = protocolNumber(PROTOCOL, 'settings', 'maxSteps');
/** Replies per game when the installed assets are micro (deviation alfworld-micro-max-steps). */
export const MICRO_MAX_STEPS = microMaxSteps(PROTOCOL);

function microMaxSteps(protocol: EvalProtocol): number {
  const micro = protocol.settings.micro as Record<string, unknown> | undefined;
  const n = micro?.maxSteps;
  if (!Number.isSafeInteger(n) || (n as number) < 1 || (n as number) > MAX_STEPS) {
    throw new Error(`tasks/alfworld/protocol.json: settings.micro.maxSteps must be an integer from 1 to settings.maxSteps (${MAX_STEPS})`);
  }
  return n as number;
}
export const PROMPTS_FILE = 'alfworld_3prompts.json';
const P = (key: string) => protocolString(PROTOCOL, 'prompt', key);
const POST = (key: string) => protocolString(PROTOCOL, 'postprocess', key);

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

/** The harness's `process_ob`: "You arrive at loc N. <rest>" → "<rest>". */
export function processObservation(observation: string): string {
  const prefix = POST('arrivePrefix');
  return observation.startsWith(prefix) ? observation.slice(observation.indexOf('. ') + 2) : observation;
}

/** The text prompt before the game's history: preamble, the two examples of its type, header, first observation and `>`. */
export function initialPrompt(prompts: Record<string, string>, reset: EnvResetResult): string {
  const key = taskTypeKey(String(reset.info.task_type ?? ''));
  if (!key) throw new Error(`unknown ALFWorld task type "${String(reset.info.task_type)}" (game ${String(reset.info.game)})`);
  const examples = protocolStrings(PROTOCOL, 'prompt', 'examples').map((name) => prompts[fillTemplate(name, { type: key })]!);
  return `${P('preamble')}${examples.join('')}${P('taskHeader')}${reset.observation}${P('firstObservationSuffix')}`;
}

/**
 * The ReAct policy of the paper's harness: one growing text completion prompt; each reply (generation
 * stops at the first newline) stripped is the action; `think:` is answered "OK."; every step appends
 * ` <action>\n<observation>\n>`.
 */
export function reactPolicy(prompts: Record<string, string>, maxSteps: number = MAX_STEPS): EpisodePolicy {
  return {
    request: PROTOCOL.request,
    maxSteps,
    start(reset): EpisodeTranscript {
      const init = initialPrompt(prompts, reset);
      let history = '';
      return {
        input: () => ({ prompt: init + history }),
        parseReply(reply) {
          const action = reply.trim();
          return action.startsWith(POST('thinkPrefix')) ? { think: true } : { action };
        },
        record(reply, action, result) {
          const observation = result === null ? POST('thinkObservation') : processObservation(result.observation);
          history += fillTemplate(P('historyTemplate'), { action: action ?? reply.trim(), observation });
        },
      };
    },
  };
}
