import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { currentLocation, link, navigate } from './router.js';

/** A failed API call, with a one-line message for the page to show. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/** Sends the user to the sign-in page, remembering where they were. */
export function toSignIn(): void {
  const here = currentLocation();
  if (here.path === '/sign-in') return;
  navigate(link('/sign-in', { next: window.location.hash.replace(/^#/, '') || '/' }), true);
}

async function failure(res: Response): Promise<ApiError> {
  let message = `${res.status} ${res.statusText}`.trim();
  try {
    const body = (await res.json()) as { message?: unknown };
    const text = Array.isArray(body.message) ? body.message.join('; ') : body.message;
    if (typeof text === 'string' && text) message = text;
  } catch {
    // not JSON: keep the status line
  }
  return new ApiError(res.status, message.split('\n')[0]!);
}

/** Fetches JSON from the API (same origin, with the session cookie); on 401 goes to the sign-in page. */
export async function getJson<T>(path: string, signal?: AbortSignal): Promise<T> {
  return request<T>(path, { method: 'GET', signal });
}

export async function postJson<T>(path: string, body?: unknown, signal?: AbortSignal): Promise<T | null> {
  return request<T | null>(path, { method: 'POST', signal, body: body === undefined ? undefined : JSON.stringify(body) });
}

async function request<T>(path: string, init: { method: string; signal?: AbortSignal; body?: string }): Promise<T> {
  const headers: Record<string, string> = { Accept: 'application/json' };
  if (init.body !== undefined) headers['Content-Type'] = 'application/json';
  const res = await fetch(path, { ...init, headers, credentials: 'same-origin' });
  if (!res.ok) {
    const error = await failure(res);
    if (res.status === 401) toSignIn();
    throw error;
  }
  if (res.status === 204) return null as T;
  return (await res.json()) as T;
}

/** Query string from the given values, empty ones left out: `qs({a: 1, b: ''})` → `?a=1`. */
export function qs(params: Record<string, string | number | null | undefined>): string {
  const search = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) if (value !== null && value !== undefined && value !== '') search.set(key, String(value));
  const text = search.toString();
  return text ? `?${text}` : '';
}

export interface Loaded<T> {
  data: T | null;
  error: string | null;
  loading: boolean;
  reload: () => void;
  /** Replaces the data in place (a live update). */
  set: (update: (current: T | null) => T | null) => void;
}

/** Loads `path` (null: nothing to load) whenever it changes; the last answer wins. */
export function useJson<T>(path: string | null): Loaded<T> {
  const [state, setState] = useState<{ data: T | null; error: string | null; loading: boolean }>({ data: null, error: null, loading: path !== null });
  const [tick, setTick] = useState(0);
  useEffect(() => {
    if (path === null) return;
    const abort = new AbortController();
    setState((s) => ({ ...s, loading: true, error: null }));
    getJson<T>(path, abort.signal).then(
      (data) => setState({ data, error: null, loading: false }),
      (err: unknown) => {
        if (abort.signal.aborted) return;
        setState((s) => ({ ...s, error: err instanceof Error ? err.message : String(err), loading: false }));
      },
    );
    return () => abort.abort();
  }, [path, tick]);
  const reload = useCallback(() => setTick((t) => t + 1), []);
  const set = useCallback((update: (current: T | null) => T | null) => setState((s) => ({ ...s, data: update(s.data) })), []);
  return { ...state, reload, set };
}

export type LiveHandlers = Record<string, (data: unknown) => void>;

export interface LiveOptions {
  /** Called when the stream (re)opens. */
  onOpen?: () => void;
  /** Called when the stream is down, before a reconnect is scheduled. */
  onDown?: () => void;
}

const RETRY_MIN_MS = 1000;
const RETRY_MAX_MS = 15000;

/**
 * Subscribes to a Server-Sent Events stream. `url` is asked again on each reconnect, so a stream
 * that resumes (`?after_seq=`) can say where. The browser retries a dropped stream by itself; when it
 * gives up (the server refused or closed for good), this reconnects with a growing pause. An `end`
 * event closes the stream for good. Returns the unsubscribe function.
 */
export function subscribe(url: () => string, handlers: LiveHandlers, options: LiveOptions = {}): () => void {
  let source: EventSource | null = null;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let delay = RETRY_MIN_MS;
  let closed = false;

  const open = () => {
    if (closed) return;
    const es = new EventSource(url());
    source = es;
    es.onopen = () => {
      delay = RETRY_MIN_MS;
      options.onOpen?.();
    };
    es.onerror = () => {
      options.onDown?.();
      if (es.readyState !== EventSource.CLOSED || closed) return;
      timer = setTimeout(open, delay);
      delay = Math.min(delay * 2, RETRY_MAX_MS);
    };
    for (const [name, handle] of Object.entries(handlers)) {
      es.addEventListener(name, (message) => {
        const text = (message as MessageEvent<string>).data;
        let data: unknown = text;
        try {
          data = text ? JSON.parse(text) : null;
        } catch {
          // not JSON: hand over the text
        }
        handle(data);
      });
    }
    es.addEventListener('end', () => {
      stop();
      options.onDown?.();
    });
  };

  const stop = () => {
    closed = true;
    clearTimeout(timer);
    source?.close();
  };

  open();
  return stop;
}

/** Keeps a live subscription open while the component is mounted (and `url` is not null). */
export function useLive(url: (() => string) | null, handlers: LiveHandlers, key: string): boolean {
  const [up, setUp] = useState(false);
  const handlersRef = useRef(handlers);
  handlersRef.current = handlers;
  const urlRef = useRef(url);
  urlRef.current = url;
  const enabled = url !== null;
  useEffect(() => {
    if (!enabled || typeof EventSource === 'undefined') return;
    const names = Object.keys(handlersRef.current);
    const relay: LiveHandlers = Object.fromEntries(names.map((name) => [name, (data: unknown) => handlersRef.current[name]?.(data)]));
    const stop = subscribe(() => urlRef.current!(), relay, { onOpen: () => setUp(true), onDown: () => setUp(false) });
    return () => {
      stop();
      setUp(false);
    };
  }, [key, enabled]);
  return up;
}
