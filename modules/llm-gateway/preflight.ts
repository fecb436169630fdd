import { ConfigError } from '../settings/settings.port.js';
import type { LlmGatewayOptions } from './gateway.js';
import type { Provider } from './protocol.js';

// Before an LLM-driven agent starts, each model upstream it needs is asked for its model list: a
// run whose agent would never reach its model is refused before anything is recorded, instead of
// burning a budget and showing as a completed run. Only `GET …/models` is asked: free on every
// provider, never a billable call. An upstream that lists models but fails calls passes (calls fail
// for reasons a listing cannot see; the run records them).

/** How long one upstream has to answer the listing. */
export const PREFLIGHT_TIMEOUT_MS = 15_000;

/** The upstream did not answer its model listing: exit 2 and nothing recorded (`a2rl run`). */
export class UpstreamUnreachableError extends ConfigError {
  constructor(
    variable: string,
    message: string,
    readonly provider: Provider,
  ) {
    super(variable, message);
  }
}

/** The user agent of the pre-flight request: the provider (and a test's upstream) can tell it from an agent's calls. */
export const PREFLIGHT_USER_AGENT = 'a2rl-preflight';

/** The provider's model listing under its base URL, and the headers that carry the key. */
function listing(provider: Provider, url: string, key: string): { url: string; headers: Record<string, string> } {
  const agent = { 'user-agent': PREFLIGHT_USER_AGENT };
  switch (provider) {
    case 'anthropic':
      return { url: `${url}/v1/models`, headers: { ...agent, 'x-api-key': key, 'anthropic-version': '2023-06-01' } };
    case 'openai':
      return { url: `${url}/models`, headers: { ...agent, authorization: `Bearer ${key}` } };
    case 'gemini':
      return { url: `${url}/v1beta/models`, headers: { ...agent, 'x-goog-api-key': key } };
  }
}

function cause(err: unknown, timeoutMs: number): string {
  const e = err as { name?: string; message?: string; cause?: { code?: string; message?: string } };
  if (e?.name === 'TimeoutError' || e?.name === 'AbortError') return `no answer within ${timeoutMs / 1000} s`;
  return e?.cause?.code ?? e?.cause?.message ?? e?.message ?? String(err);
}

export interface PreflightOptions {
  fetch?: typeof fetch;
  timeoutMs?: number;
}

/**
 * Asks each provider's upstream for its model list; throws UpstreamUnreachableError (one line naming
 * the variable, the URL and what went wrong) for the first that has no key, does not answer, or
 * answers other than 2xx. The key is sent as the provider expects and never appears in the message.
 */
export async function checkUpstreams(providers: readonly Provider[], upstreams: LlmGatewayOptions['upstreams'], options: PreflightOptions = {}): Promise<void> {
  const get = options.fetch ?? fetch;
  const timeoutMs = options.timeoutMs ?? PREFLIGHT_TIMEOUT_MS;
  for (const provider of [...new Set(providers)]) {
    const variable = `A2RL_LLM_${provider.toUpperCase()}_URL`;
    const upstream = upstreams[provider];
    if (!upstream) throw new UpstreamUnreachableError(`A2RL_LLM_${provider.toUpperCase()}_KEY`, `not set: the ${provider} upstream the agent needs has no key`, provider);
    const ask = listing(provider, upstream.url, upstream.key);
    let res: Response;
    try {
      res = await get(ask.url, { method: 'GET', headers: ask.headers, signal: AbortSignal.timeout(timeoutMs), redirect: 'error' });
    } catch (err) {
      throw new UpstreamUnreachableError(variable, `the ${provider} upstream at ${upstream.url} did not answer GET ${ask.url} (${cause(err, timeoutMs)}); the run was not started`, provider);
    }
    await res.body?.cancel().catch(() => undefined);
    if (!res.ok) {
      const why = res.status === 401 || res.status === 403 ? 'refused the key' : 'failed';
      throw new UpstreamUnreachableError(variable, `the ${provider} upstream at ${upstream.url} ${why}: GET ${ask.url} answered ${res.status}; the run was not started`, provider);
    }
  }
}
