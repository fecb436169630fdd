import { OpenAiClient, type ChatMessage } from '../../modules/serving/openai-client.js';
import type { OpenAiEndpoint } from '../task-pack.js';
import { MAX_RESULTS, type SearchBackend, type SearchResult } from './search.js';

/** Model replies (each `Search[...]` or the final `Answer[...]`) per question. */
export const MAX_STEPS = 6;
export const MAX_TOKENS_PER_STEP = 512;
const SNIPPET_CHARS = 300;

export type Action = { kind: 'search'; query: string } | { kind: 'answer'; answer: string } | { kind: 'malformed' };

/** The first user turn (the model's own chat template renders it). */
export function reactPrompt(problem: string): ChatMessage[] {
  return [{
    role: 'user',
    content:
      'Answer the question using web search. Work in steps; end every reply with exactly one action:\n' +
      'Search[<query>] runs a web search and shows you the top results as an Observation.\n' +
      'Answer[<final answer>] ends the task. If the question asks for several items, give all of them in one Answer, separated by commas.\n' +
      `You have at most ${MAX_STEPS} steps. You may reason briefly before the action.\n\n` +
      `Question: ${problem}`,
  }];
}

export const INVALID_ACTION = 'Observation: invalid action. End your reply with Search[<query>] or Answer[<final answer>].';
export const LAST_STEP = 'This is your last step: reply with Answer[<final answer>].';

/**
 * The first `Search[...]` or `Answer[...]` in a reply; the bracket closes at its matching `]`
 * (nested brackets allowed). No action, an unclosed bracket or an empty argument is malformed.
 */
export function parseAction(reply: string): { action: Action; end: number } {
  const start = /\b(Search|Answer)\[/.exec(reply);
  if (!start) return { action: { kind: 'malformed' }, end: reply.length };
  let depth = 0;
  for (let i = start.index + start[1]!.length; i < reply.length; i++) {
    if (reply[i] === '[') depth++;
    else if (reply[i] === ']' && --depth === 0) {
      const arg = reply.slice(start.index + start[1]!.length + 1, i).trim();
      if (arg === '') return { action: { kind: 'malformed' }, end: i + 1 };
      return { action: start[1] === 'Search' ? { kind: 'search', query: arg } : { kind: 'answer', answer: arg }, end: i + 1 };
    }
  }
  return { action: { kind: 'malformed' }, end: reply.length };
}

export function formatObservation(results: readonly SearchResult[]): string {
  if (results.length === 0) return 'Observation: no results.';
  const lines = results.slice(0, MAX_RESULTS).map((r, i) => {
    const snippet = r.snippet.length > SNIPPET_CHARS ? `${r.snippet.slice(0, SNIPPET_CHARS)}…` : r.snippet;
    return `[${i + 1}] ${r.title} (${r.url})\n${snippet}`;
  });
  return `Observation:\n${lines.join('\n')}`;
}

export interface Episode {
  /** Null when the model never gave a well-formed Answer within MAX_STEPS (counted wrong). */
  answer: string | null;
  steps: number;
  searches: number;
  malformed: number;
}

/** One ReAct episode: at most MAX_STEPS greedy replies, each ending in one action. */
export async function runEpisode(model: OpenAiEndpoint, problem: string, search: SearchBackend, signal?: AbortSignal): Promise<Episode> {
  const client = new OpenAiClient(model, 300_000);
  const messages = reactPrompt(problem);
  const episode: Episode = { answer: null, steps: 0, searches: 0, malformed: 0 };
  while (episode.steps < MAX_STEPS) {
    episode.steps++;
    // The stop sequence keeps the model from inventing its own observations.
    const reply = (await client.chat(messages, { maxTokens: MAX_TOKENS_PER_STEP, stop: ['\nObservation:'], signal })).text;
    const { action, end } = parseAction(reply);
    messages.push({ role: 'assistant', content: reply.slice(0, end) });
    if (action.kind === 'answer') {
      episode.answer = action.answer;
      return episode;
    }
    let observation: string;
    if (action.kind === 'search') {
      episode.searches++;
      observation = formatObservation(await search.search(action.query, signal));
    } else {
      episode.malformed++;
      observation = INVALID_ACTION;
    }
    messages.push({ role: 'user', content: episode.steps === MAX_STEPS - 1 ? `${observation}\n\n${LAST_STEP}` : observation });
  }
  return episode;
}
