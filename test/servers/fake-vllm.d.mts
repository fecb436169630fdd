import type { RequestListener } from 'node:http';

/** `answers.json` of a test checkpoint: the first rule whose `contains` occurs in the prompt answers. */
export interface ScriptedAnswers {
  /** `last`: match the last chat message only (multi-turn episodes); `tail`: the prompt ends with `contains`. */
  rules: { contains: string; reply: string; last?: boolean; tail?: boolean }[];
  default: string;
}

export function loadAnswers(checkpointDir: string): ScriptedAnswers;
export function cutAtStop(text: string, stop: unknown): string;
export function replyFor(answers: ScriptedAnswers, prompt: string, lastMessage?: string): string;
export function createOpenAiHandler(options: { model: string; answers: ScriptedAnswers; onGenerated?: () => void }): RequestListener;
