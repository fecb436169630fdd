/** Reading what a provider sent without trusting its shape: the codecs' shared helpers (pure). */
export type Json = Record<string, unknown>;

/** The body as a JSON object; {} for anything else (not JSON, an array, a scalar). */
export function parseJson(text: string): Json {
  try {
    return asObject(JSON.parse(text));
  } catch {
    return {};
  }
}

/** The JSON `data:` payloads of a server-sent event stream; `[DONE]`, keep-alives and partial lines are skipped. */
export function sseData(body: string): Json[] {
  const out: Json[] = [];
  for (const line of body.split(/\r?\n|\r/)) {
    if (!line.startsWith('data:')) continue;
    const data = line.slice(5).trim();
    if (!data || data === '[DONE]') continue;
    const parsed = parseJson(data);
    if (Object.keys(parsed).length) out.push(parsed);
  }
  return out;
}

/** A token count: a non-negative integer, else null (absent or malformed). */
export function count(value: unknown): number | null {
  return typeof value === 'number' && Number.isInteger(value) && value >= 0 ? value : null;
}

export function asObject(value: unknown): Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Json) : {};
}

export function asArray(value: unknown): unknown[] {
  return Array.isArray(value) ? value : [];
}
