import { anthropicCodec } from './protocols/anthropic.js';
import { geminiCodec } from './protocols/gemini.js';
import { openaiCodec } from './protocols/openai.js';
import type { Provider, ProviderCodec } from './protocol.js';

/** Where each provider's calls go and the key they are made with (the gateway's `upstreams`). */
export type UpstreamEndpoints = Partial<Record<Provider, { url: string; key: string }>>;

/** The codecs of every provider the gateway speaks (its default when `codecs` is not given). */
export function defaultCodecs(): ProviderCodec[] {
  return [anthropicCodec, openaiCodec, geminiCodec];
}

/**
 * The harness's upstreams from its environment: `A2RL_LLM_<PROVIDER>_KEY` (a provider without one
 * is absent: the gateway answers its calls 503) and `A2RL_LLM_<PROVIDER>_URL` (default: the
 * provider's own API; any OpenAI-compatible server, such as vLLM, LiteLLM or OpenRouter, as OPENAI).
 */
export function upstreamsFromEnv(env: NodeJS.ProcessEnv, codecs: readonly ProviderCodec[] = defaultCodecs()): UpstreamEndpoints {
  const upstreams: UpstreamEndpoints = {};
  for (const codec of codecs) {
    const name = `A2RL_LLM_${codec.provider.toUpperCase()}`;
    const key = env[`${name}_KEY`];
    if (!key) continue;
    const url = env[`${name}_URL`] || codec.defaultUpstream;
    upstreams[codec.provider] = { url: checkedUrl(url, `${name}_URL`), key };
  }
  return upstreams;
}

/** A2RL_LLM_DEFAULT_RESERVE_TOKENS: the output tokens a call without a maximum reserves; undefined when unset. */
export function reserveFromEnv(env: NodeJS.ProcessEnv): number | undefined {
  const raw = env.A2RL_LLM_DEFAULT_RESERVE_TOKENS;
  if (raw === undefined || raw === '') return undefined;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1) throw new Error(`A2RL_LLM_DEFAULT_RESERVE_TOKENS must be a positive integer, not ${JSON.stringify(raw)}`);
  return n;
}

function checkedUrl(url: string, variable: string): string {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new Error(`${variable} is not a URL: ${JSON.stringify(url)}`);
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') throw new Error(`${variable} must be an http(s) URL, not ${parsed.protocol}`);
  if (parsed.search || parsed.hash || parsed.username || parsed.password) throw new Error(`${variable} must be a base URL without query, fragment or credentials`);
  return url.replace(/\/+$/, '');
}
