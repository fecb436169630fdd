/**
 * The paper harness's DeepSearchQA ReAct loop (RD-Agent deepsearchqa/eval.py `_react_loop`), driven by
 * tasks/deepsearchqa/protocol.json: one raw text prompt (no chat template) that grows with every
 * reply; each reply is generated with the protocol's request settings, stripped and appended after a
 * space; the action is the first `Action: search[…]` / `Action: answer[…]` in that reply. A reply
 * without one gets a forced `\nAction: answer[` continuation (its own request settings) whose text is
 * the answer. Searches append `\nObservation: <snippets>\nThought:`. Out of steps, the last answer
 * the model wrote anywhere is taken, else "I don't know".
 */
import type { EvalProtocol } from '../paper-common/protocol.js';
import { fillTemplate, loadProtocol, protocolNumber, protocolString, ProtocolError, type RequestSettings } from '../paper-common/protocol.js';
import { generate } from '../paper-common/served-chat.js';
import type { OpenAiEndpoint } from '../task-pack.js';
import type { SearchBackend } from './search.js';

export const PROTOCOL: EvalProtocol = loadProtocol('deepsearchqa');
export const MAX_STEPS = protocolNumber(PROTOCOL, 'settings', 'maxSteps');
const P = (key: string) => protocolString(PROTOCOL, 'prompt', key);
const POST = (key: string) => protocolString(PROTOCOL, 'postprocess', key);
const PLACEHOLDER = POST('placeholderAnswer');
export const NO_ANSWER = POST('noAnswer');
const ACTION = new RegExp(POST('actionPattern').replace('(.+?)', '([\\s\\S]+?)'));
const ANSWERS = new RegExp(POST('actionPattern').replace('(search|answer)', '(answer)').replace('(.+?)', '([\\s\\S]+?)'), 'g');

/** The forced-answer request: the protocol's request with `settings.forceAnswerRequest` over it. */
export const FORCE_REQUEST: RequestSettings = (() => {
  const o = PROTOCOL.settings.forceAnswerRequest as Partial<RequestSettings> | undefined;
  if (!o || typeof o.maxTokens !== 'number' || !Array.isArray(o.stop)) throw new ProtocolError('tasks/deepsearchqa/protocol.json: settings.forceAnswerRequest needs maxTokens and stop');
  return { ...PROTOCOL.request, ...o };
})();

/** The first prompt: the ReAct instructions, then the question and its answer type. */
export function reactPrompt(question: string, answerType: string): string {
  return `${P('system')}${P('joiner')}${fillTemplate(P('questionTemplate'), { question, answer_type: answerType })}`;
}

export type Action = { kind: 'search' | 'answer'; content: string } | { kind: 'none' };

/** The first `Action: search[…]`/`Action: answer[…]` of a reply (up to its first `]`), content stripped. */
export function parseAction(reply: string): Action {
  const m = ACTION.exec(reply);
  return m ? { kind: m[1] as 'search' | 'answer', content: m[2]!.trim() } : { kind: 'none' };
}

/** A search's observation as the harness's SerpAPI branch writes it: the top snippets joined, or "No results found.". */
export async function searchObservation(search: SearchBackend, query: string, signal?: AbortSignal): Promise<{ text: string; error: boolean }> {
  try {
    const results = await search.search(query, signal);
    const snippets = results.slice(0, protocolNumber(PROTOCOL, 'postprocess', 'searchResults')).map((r) => r.snippet);
    return { text: snippets.join(POST('searchJoiner')) || POST('noResults'), error: false };
  } catch (err) {
    if (signal?.aborted) throw err;
    return { text: `Search error: ${(err as Error).message}`, error: true };
  }
}

export interface Episode {
  /** The answer graded: the model's, or "I don't know" when it gave none. */
  answer: string;
  answered: boolean;
  steps: number;
  searches: number;
  searchErrors: number;
  forcedAnswers: number;
}

/** One episode; `model` is the served checkpoint (text completions). */
export async function runEpisode(model: OpenAiEndpoint, question: string, answerType: string, search: SearchBackend, signal?: AbortSignal): Promise<Episode> {
  let prompt = reactPrompt(question, answerType);
  let trace = '';
  const episode: Episode = { answer: NO_ANSWER, answered: false, steps: 0, searches: 0, searchErrors: 0, forcedAnswers: 0 };
  const done = (answer: string) => Object.assign(episode, { answer, answered: true });
  while (episode.steps < MAX_STEPS) {
    episode.steps++;
    const reply = (await generate(model, PROTOCOL.request, { prompt }, { signal })).trim();
    trace += trace ? `\n${reply}` : reply;
    prompt += fillTemplate(P('afterReply'), { reply });
    const action = parseAction(reply);
    if (action.kind === 'none') {
      prompt += P('forceAnswer');
      episode.forcedAnswers++;
      const forced = (await generate(model, FORCE_REQUEST, { prompt }, { signal })).trim();
      if (forced) trace += `\n${forced}`;
      if (forced.toLowerCase() === PLACEHOLDER) continue;
      return done(forced);
    }
    if (action.kind === 'answer') {
      if (action.content.toLowerCase() !== PLACEHOLDER) return done(action.content);
      prompt += P('invalidAnswer');
      continue;
    }
    episode.searches++;
    const observation = await searchObservation(search, action.content, signal);
    if (observation.error) episode.searchErrors++;
    prompt += fillTemplate(P('observationTemplate'), { observation: observation.text });
  }
  const written = [...trace.matchAll(ANSWERS)].map((m) => m[2]!.trim()).filter((a) => a.toLowerCase() !== PLACEHOLDER);
  if (written.length) return done(written.at(-1)!);
  return episode;
}
