/** One Server-Sent Event as a client sees it. */
export interface SseEvent {
  event: string;
  data: string;
  id: string | null;
}

/**
 * Reads a text/event-stream with fetch (for specs): `next(until)` collects events until `until`
 * accepts one (returned last), `close()` disconnects. Node's fetch stands in for EventSource.
 */
export async function openSse(url: string, headers: Record<string, string> = {}) {
  const abort = new AbortController();
  const res = await fetch(url, { headers: { accept: 'text/event-stream', ...headers }, signal: abort.signal });
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  let ended = false;
  const queue: SseEvent[] = [];

  const parse = () => {
    for (let cut = buffer.indexOf('\n\n'); cut >= 0; cut = buffer.indexOf('\n\n')) {
      const frame = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      const e: SseEvent = { event: 'message', data: '', id: null };
      const data: string[] = [];
      for (const line of frame.split('\n')) {
        const colon = line.indexOf(':');
        if (colon === 0) continue; // a comment
        const field = colon < 0 ? line : line.slice(0, colon);
        const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
        if (field === 'event') e.event = value;
        else if (field === 'data') data.push(value);
        else if (field === 'id') e.id = value;
      }
      if (data.length || e.event !== 'message') queue.push({ ...e, data: data.join('\n') });
    }
  };

  /** Events up to and including the first that `until` accepts; throws if the stream ends first. */
  const next = async (until: (e: SseEvent) => boolean): Promise<SseEvent[]> => {
    const seen: SseEvent[] = [];
    for (;;) {
      while (queue.length) {
        const e = queue.shift()!;
        seen.push(e);
        if (until(e)) return seen;
      }
      if (ended) throw new Error(`the event stream ended before the awaited event; got ${seen.map((e) => e.event).join(', ') || 'nothing'}`);
      const { value, done } = await reader.read();
      if (done) ended = true;
      else buffer += decoder.decode(value, { stream: true }).replace(/\r\n?/g, '\n');
      parse();
    }
  };

  /** Everything until the server ends the stream. */
  const rest = async (): Promise<SseEvent[]> => {
    const seen: SseEvent[] = [];
    try {
      await next((e) => {
        seen.push(e);
        return false;
      });
    } catch {
      // ended
    }
    return seen;
  };

  return { status: res.status, type: res.headers.get('content-type') ?? '', next, rest, close: () => abort.abort() };
}
