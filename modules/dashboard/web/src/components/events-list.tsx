import type { ComponentChildren } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { ApiError, getJson, qs } from '../api.js';
import type { LedgerEvent } from '../types.js';
import { EventLink } from './event-link.js';
import { clip, when } from './format.js';

const LIMIT = 50;

const SCAN_PAGE = 200;
const SCAN_MAX = 2000;

/** Up to LIMIT events of the given types after `after`, reading at most SCAN_MAX events (bounded work per click). */
async function scan(path: string, after: number, types: string): Promise<{ events: LedgerEvent[]; scanned: number; end: boolean }> {
  const wanted = new Set(types.split(','));
  const events: LedgerEvent[] = [];
  let last = after;
  for (let read = 0; read < SCAN_MAX; read += SCAN_PAGE) {
    const page = await getJson<LedgerEvent[]>(`${path}${qs({ format: 'json', after_seq: last, limit: SCAN_PAGE })}`);
    for (const e of page) {
      last = e.seq;
      if (wanted.has(e.type) && events.push(e) >= LIMIT) return { events, scanned: last, end: false };
    }
    if (page.length < SCAN_PAGE) return { events, scanned: last, end: true };
  }
  return { events, scanned: last, end: false };
}

/** One line of an event's data for the list (the drawer shows all of it). */
export function eventGist(event: LedgerEvent): string {
  const d = event.data ?? {};
  const pick = (...keys: string[]) =>
    keys
      .filter((k) => d[k] !== undefined && d[k] !== null)
      .map((k) => `${k} ${Array.isArray(d[k]) ? (d[k] as unknown[]).join(' ') : typeof d[k] === 'object' ? JSON.stringify(d[k]) : String(d[k])}`)
      .join(' · ');
  const gist = pick('path', 'op', 'argv', 'pid', 'exitCode', 'submissionId', 'score', 'reasonClass', 'stream', 'episodes', 'successRate', 'model', 'modelAnswered', 'outcome', 'reason');
  return clip(gist || JSON.stringify(d), 160);
}

interface EventsListProps {
  runId: string;
  /** Events the live stream brought, shown once the list has reached the end of what was stored. */
  liveTail: readonly LedgerEvent[];
  /** Event types to ask for (comma separated), '' for all. */
  types?: string;
  testId?: string;
  label: string;
  render?: (event: LedgerEvent) => ComponentChildren;
}

/** A run's events, read from the server 50 at a time ("Load more"); never the whole run. */
export function EventsList({ runId, liveTail, types = '', testId, label, render }: EventsListProps) {
  const [items, setItems] = useState<LedgerEvent[]>([]);
  const [done, setDone] = useState(false);
  const [loading, setLoading] = useState(false);
  const [error, setError] = useState<string | null>(null);

  const [filterHere, setFilterHere] = useState(false);
  const [scanned, setScanned] = useState(-1);

  const load = async (after: number, replace: boolean) => {
    const path = `/runs/${encodeURIComponent(runId)}/events`;
    const add = (page: LedgerEvent[]) => setItems((current) => (replace ? page : [...current, ...page]));
    setLoading(true);
    setError(null);
    try {
      if (!(types && filterHere)) {
        try {
          const page = await getJson<LedgerEvent[]>(`${path}${qs({ format: 'json', after_seq: after, limit: LIMIT, type: types })}`);
          add(page);
          setDone(page.length < LIMIT);
          return;
        } catch (err) {
          if (!(types && err instanceof ApiError && err.status === 400)) throw err;
          // A server that cannot filter by type: read plain pages and filter them here.
          setFilterHere(true);
        }
      }
      const found = await scan(path, replace ? -1 : scanned, types);
      add(found.events);
      setScanned(found.scanned);
      setDone(found.end);
    } catch (err) {
      setError(err instanceof Error ? err.message : String(err));
    } finally {
      setLoading(false);
    }
  };

  useEffect(() => {
    setItems([]);
    setDone(false);
    setScanned(-1);
    void load(-1, true);
  }, [runId, types]);

  const lastSeq = items.length ? items[items.length - 1]!.seq : -1;
  const wanted = types ? new Set(types.split(',')) : null;
  const tail = done ? liveTail.filter((e) => e.seq > lastSeq && (!wanted || wanted.has(e.type))) : [];
  const shown = tail.length ? [...items, ...tail] : items;

  return (
    <div>
      <ol class="events" data-testid={testId} aria-label={label}>
        {shown.map((e) => (
          <li key={e.seq}>
            {render ? (
              render(e)
            ) : (
              <>
                <EventLink runId={runId} seq={e.seq} label={`event ${e.seq}, ${e.type}`} />
                <span class="event-type">{e.type}</span>
                <time class="muted" dateTime={e.occurredAt}>
                  {when(e.occurredAt)}
                </time>
                <span class="gist">{eventGist(e)}</span>
              </>
            )}
          </li>
        ))}
      </ol>
      {error ? <p role="alert">Could not load events: {error}</p> : null}
      {!loading && !error && shown.length === 0 ? <p class="muted">No events.</p> : null}
      <p class="pager">
        {!done ? (
          <button type="button" onClick={() => load(lastSeq, false)} disabled={loading}>
            {loading ? 'Loading…' : `Load ${LIMIT} more`}
          </button>
        ) : (
          <span class="muted">{shown.length ? `End of the stored events (${shown.length} shown).` : ''}</span>
        )}
      </p>
    </div>
  );
}
