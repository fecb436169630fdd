/**
 * What the gateway checks of a request before anything of it goes upstream (pure): the request
 * target (provider prefix, a path made of plain segments, only the provider's own query parameters)
 * and the syntax of model names. Meaning is never checked: an agent may call any model.
 */

/** A path segment's characters: no `%` (no encoded slash or dot), no `\`; a dot-only segment (`.`, `..`) is refused apart. */
const SEGMENT = /^[A-Za-z0-9._~:@+-]+$/;
/** One part of a model id: starts with a letter or digit, then letters, digits and `. _ - : @ +`. */
const MODEL_PART = /^[A-Za-z0-9][A-Za-z0-9._:@+-]*$/;
export const MAX_MODEL_NAME = 200;

export interface RequestTarget {
  /** The first path segment: which provider's codec serves the request. */
  provider: string;
  /** The path below the provider prefix, as sent (`''` for none). */
  path: string;
  query: URLSearchParams;
}

/** The request target taken apart; a string saying what is wrong when it is not a plain one. */
export function requestTarget(raw: string, queryParameters: (provider: string) => readonly string[] | undefined): RequestTarget | string {
  const parts = /^\/([^/?#]*)([^?#]*)(?:\?([^#]*))?$/.exec(raw);
  if (!parts) return 'the request target must be a path with an optional query, without a fragment';
  const [, provider, path, search = ''] = parts;
  const segments = path.split('/').slice(1);
  // A trailing slash is tolerated; an empty, dot-only or encoded segment anywhere else is not.
  const plain = (s: string, i: number) => (SEGMENT.test(s) && !/^\.+$/.test(s)) || (s === '' && i === segments.length - 1 && i > 0);
  if (!segments.every(plain)) {
    return 'the path must be plain segments: letters, digits and . _ ~ : @ + - (no encoded characters, no . or .. segments, no empty segment)';
  }
  const query = new URLSearchParams(search);
  const allowed = queryParameters(provider) ?? [];
  const names = [...query.keys()];
  if (names.some((name) => !allowed.includes(name))) return `the query may only carry ${allowed.length ? allowed.join(', ') : 'no parameter'}`;
  if (new Set(names).size !== names.length) return 'a query parameter is repeated';
  return { provider, path, query };
}

/**
 * Why a model name is not an id, or null when it is one: 1 to 200 characters, parts as MODEL_PART;
 * `/` between parts only where the name travels in a body (`openai/gpt-4o` for OpenRouter or LiteLLM),
 * never in a URL.
 */
export function modelNameProblem(name: string, where: 'body' | 'path'): string | null {
  const parts = where === 'body' ? name.split('/') : [name];
  if (name.length === 0 || name.length > MAX_MODEL_NAME || parts.some((part) => !MODEL_PART.test(part))) {
    return `the model name is not a model id: 1 to ${MAX_MODEL_NAME} characters, letters, digits and . _ - : @ +${where === 'body' ? ', / between parts' : ''}`;
  }
  return null;
}
