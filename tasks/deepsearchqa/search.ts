import { EvaluatorError } from '../task-pack.js';

export interface SearchResult {
  title: string;
  url: string;
  snippet: string;
}

/** Where the ReAct agent's `Search[query]` actions go. */
export interface SearchBackend {
  readonly name: string;
  search(query: string, signal?: AbortSignal): Promise<SearchResult[]>;
}

/** Results shown to the model per search. */
export const MAX_RESULTS = 5;
const TIMEOUT_MS = 30_000;
export const DUCKDUCKGO_HTML_URL = 'https://html.duckduckgo.com/html/';

/**
 * The configured search API: `GET <A2RL_SEARCH_URL>?q=<query>&count=5` with
 * `Authorization: Bearer <A2RL_SEARCH_API_KEY>`, answering
 * `{"results": [{"title": "...", "url": "...", "snippet": "..."}]}` (a thin proxy in front of any
 * commercial search API fits this shape).
 */
export class ApiSearchBackend implements SearchBackend {
  readonly name = 'api';
  constructor(private readonly url: string, private readonly apiKey: string) {}

  async search(query: string, signal?: AbortSignal): Promise<SearchResult[]> {
    const target = withParams(this.url, { q: query, count: String(MAX_RESULTS) });
    const body = await getText(target, { authorization: `Bearer ${this.apiKey}`, accept: 'application/json' }, signal);
    let parsed: unknown;
    try {
      parsed = JSON.parse(body);
    } catch {
      throw new EvaluatorError(`search API ${this.url} answered with something that is not JSON`);
    }
    const results = (parsed as { results?: unknown })?.results;
    if (!Array.isArray(results)) throw new EvaluatorError(`search API ${this.url} answered without a "results" array`);
    return results.slice(0, MAX_RESULTS).map((r: Record<string, unknown>) => ({
      title: String(r?.title ?? ''),
      url: String(r?.url ?? ''),
      snippet: String(r?.snippet ?? ''),
    }));
  }
}

/**
 * The keyless fallback: DuckDuckGo's HTML results page (`GET <url>?q=<query>`), read minimally —
 * each `<a class="result__a" href>` is a title and link, the following `class="result__snippet"`
 * element its snippet; DuckDuckGo's `/l/?uddg=<url>` redirect links are unwrapped.
 */
export class DuckDuckGoHtmlBackend implements SearchBackend {
  readonly name = 'duckduckgo-html';
  constructor(private readonly url = DUCKDUCKGO_HTML_URL) {}

  async search(query: string, signal?: AbortSignal): Promise<SearchResult[]> {
    const html = await getText(withParams(this.url, { q: query }), { accept: 'text/html', 'user-agent': 'a2rl-deepsearchqa/1' }, signal);
    return parseDuckDuckGoHtml(html).slice(0, MAX_RESULTS);
  }
}

export function parseDuckDuckGoHtml(html: string): SearchResult[] {
  const results: SearchResult[] = [];
  const anchors = [...html.matchAll(/<a\b[^>]*class="[^"]*\bresult__a\b[^"]*"[^>]*>([\s\S]*?)<\/a>/g)];
  anchors.forEach((anchor, i) => {
    const href = /\bhref="([^"]*)"/.exec(anchor[0])?.[1] ?? '';
    const until = anchors[i + 1]?.index ?? html.length;
    const tail = html.slice(anchor.index! + anchor[0].length, until);
    const snippet = /class="[^"]*\bresult__snippet\b[^"]*"[^>]*>([\s\S]*?)<\/(?:a|div|td)>/.exec(tail)?.[1] ?? '';
    results.push({ title: text(anchor[1]!), url: unwrapRedirect(decodeEntities(href)), snippet: text(snippet) });
  });
  return results;
}

function unwrapRedirect(href: string): string {
  try {
    const url = new URL(href, 'https://duckduckgo.com');
    const target = url.pathname === '/l/' ? url.searchParams.get('uddg') : null;
    return target ?? url.toString();
  } catch {
    return href;
  }
}

const text = (html: string) => decodeEntities(html.replace(/<[^>]*>/g, '')).replace(/\s+/g, ' ').trim();

function decodeEntities(s: string): string {
  const named: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'", nbsp: ' ' };
  return s.replace(/&(#x[0-9a-f]+|#\d+|[a-z]+);/gi, (whole, e: string) => {
    if (e[0] === '#') return String.fromCodePoint(e[1] === 'x' || e[1] === 'X' ? parseInt(e.slice(2), 16) : Number(e.slice(1)));
    return named[e.toLowerCase()] ?? whole;
  });
}

/**
 * `A2RL_SEARCH_API_KEY` set → the API backend at `A2RL_SEARCH_URL` (required with a key); no key →
 * the DuckDuckGo HTML fallback (`A2RL_SEARCH_FALLBACK_URL` overrides its address).
 */
export function searchBackendFromEnv(env: NodeJS.ProcessEnv = process.env): SearchBackend {
  const key = env.A2RL_SEARCH_API_KEY?.trim();
  if (key) {
    const url = env.A2RL_SEARCH_URL?.trim();
    if (!url) throw new EvaluatorError('A2RL_SEARCH_API_KEY is set but A2RL_SEARCH_URL is not: set the search API URL (GET ?q=<query> → {"results": [{title, url, snippet}]})');
    return new ApiSearchBackend(url, key);
  }
  return new DuckDuckGoHtmlBackend(env.A2RL_SEARCH_FALLBACK_URL?.trim() || DUCKDUCKGO_HTML_URL);
}

function withParams(base: string, params: Record<string, string>): string {
  const url = new URL(base);
  for (const [k, v] of Object.entries(params)) url.searchParams.set(k, v);
  return url.toString();
}

/** Search failures are the harness's (network, quota, misconfiguration), never the agent's. */
async function getText(url: string, headers: Record<string, string>, signal?: AbortSignal): Promise<string> {
  const timeout = AbortSignal.timeout(TIMEOUT_MS);
  const where = new URL(url).origin + new URL(url).pathname;
  let response: Response;
  try {
    response = await fetch(url, { headers, signal: signal ? AbortSignal.any([signal, timeout]) : timeout });
  } catch (error) {
    if (signal?.aborted) throw new EvaluatorError(`search request to ${where} aborted: the evaluation was cancelled`);
    throw new EvaluatorError(`search backend ${where} unreachable: ${(error as Error).message}`);
  }
  const body = await response.text();
  if (!response.ok) throw new EvaluatorError(`search backend ${where} answered HTTP ${response.status}: ${body.slice(0, 200)}`);
  return body;
}
