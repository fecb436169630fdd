import { searchBackendFromEnv } from '../../tasks/deepsearchqa/search.js';
import type { OpenAiEndpoint } from '../../tasks/task-pack.js';
import { OpenAiClient } from '../serving/openai-client.js';

/** How long `a2rl doctor` waits for one live call. */
export const PROBE_TIMEOUT_MS = 15_000;

const oneLine = (err: unknown) => String((err as Error)?.message ?? err).replace(/\s+/g, ' ').trim().slice(0, 300);

/** One real 1-token chat completion against the judge: null when it answered, else why not (one line). */
export async function probeJudge(judge: OpenAiEndpoint, timeoutMs = PROBE_TIMEOUT_MS): Promise<string | null> {
  try {
    await new OpenAiClient(judge, timeoutMs).chat([{ role: 'user', content: 'Reply with the single word OK.' }], { maxTokens: 1 });
    return null;
  } catch (err) {
    return oneLine(err);
  }
}

/** One real query to the search backend the tasks would use (searchBackendFromEnv): null when it answered with results. */
export async function probeSearch(env: NodeJS.ProcessEnv, timeoutMs = PROBE_TIMEOUT_MS): Promise<string | null> {
  const signal = AbortSignal.timeout(timeoutMs);
  try {
    const backend = searchBackendFromEnv(env);
    const results = await backend.search('Agent2 RL-Bench', signal);
    return results.length ? null : `the ${backend.name} search backend answered without results`;
  } catch (err) {
    return signal.aborted ? `the search backend did not answer within ${Math.round(timeoutMs / 1000)} s` : oneLine(err);
  }
}
