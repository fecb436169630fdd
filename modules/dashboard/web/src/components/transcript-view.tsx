import { useEffect, useState } from 'preact/hooks';
import { getJson, qs } from '../api.js';
import type { LedgerEvent, LlmTotals, TranscriptEntry } from '../types.js';
import { EventLink, eventHref } from './event-link.js';
import { EventsList } from './events-list.js';
import { count, usd, when } from './format.js';
import { LongText, prettyJson } from './long-text.js';

const LIMIT = 50;

/** One page of GET /runs/:id/transcript?after_seq=&limit= (the server reads just those calls from the store). */
interface TranscriptPage {
  entries: TranscriptEntry[];
  lastSeq: number;
  more?: boolean;
}

/** The run's model calls, 50 at a time; never the whole run. `enabled` false: none to ask for. */
function useTranscriptPages(runId: string, enabled: boolean, liveNewest: number | null) {
  const [entries, setEntries] = useState<TranscriptEntry[]>([]);
  const [next, setNext] = useState(-1);
  const [done, setDone] = useState(false);
  const [loading, setLoading] = useState(enabled);
  const [error, setError] = useState<string | null>(null);
  const base = `/runs/${encodeURIComponent(runId)}/transcript`;

  const load = async (afterSeq: number, replace: boolean) => {
    setLoading(true);
    setError(null);
    try {
      const page = await getJson<TranscriptPage>(`${base}${qs({ format: 'json', after_seq: afterSeq, limit: LIMIT })}`);
      // An older server ignores the paging and sends every call: show one page of it at a time.
      const fresh = page.entries.filter((e) => e.seq > afterSeq).slice(0, LIMIT);
      setEntries((current) => (replace ? fresh : [...current, ...fresh]));
      setNext(fresh.length ? fresh[fresh.length - 1]!.seq : afterSeq);
      setDone(page.more !== undefined ? !page.more : page.entries.filter((e) => e.seq > afterSeq).length <= LIMIT);
    } catch (err) {
      setError(err instanceof Error ? err.message : String(err));
    } finally {
      setLoading(false);
    }
  };

  useEffect(() => {
    setEntries([]);
    setNext(-1);
    setDone(!enabled);
    if (enabled) void load(-1, true);
    else setLoading(false);
  }, [runId, enabled]);

  // Live: a model call recorded after the last one shown is fetched as soon as its event arrives
  // (a page opened before the first call shows the calls without a reload).
  const newest = liveNewest;
  useEffect(() => {
    if (!enabled || loading || !done || newest === null || newest <= next) return;
    void load(next, false);
  }, [newest, enabled, loading, done, next]);

  return { entries, done, loading, error, more: () => load(next, false) };
}

function Call({ runId, entry }: { runId: string; entry: TranscriptEntry }) {
  const heading = entry.turn !== null ? `Turn ${entry.turn}` : entry.role === 'failed' ? 'Failed call' : 'Side call';
  return (
    <article class={`call role-${entry.role}`}>
      <header>
        <strong>{heading}</strong> <EventLink runId={runId} seq={entry.seq} label={`${heading}, event ${entry.seq}`} /> <span class="muted">{entry.model ?? entry.api}</span>{' '}
        <span class="muted">
          {when(entry.startedAt)} · {entry.latencyMs} ms · in {count(entry.usage.inputTokens)} / out {count(entry.usage.outputTokens)} tokens · {usd(entry.costUsd)}
        </span>
        {entry.outcome !== 'ok' ? <span class="badge tone-bad">{entry.outcome}</span> : null}{' '}
        <a class="event-link" href={`${eventHref(runId, entry.seq)}`} aria-label={`the raw request and response of ${heading.toLowerCase()}, event ${entry.seq}`}>
          raw request and response
        </a>
      </header>
      {entry.request.userText ? (
        <p class="said user">
          <span class="who">user</span> <LongText text={entry.request.userText} label="the user text" />
        </p>
      ) : null}
      {entry.request.toolResults.map((r, i) => (
        <pre key={`r${i}`} class="said tool-result">
          <span class="who">tool result</span> <LongText text={r.output} label="the tool result" />
        </pre>
      ))}
      {entry.answer.text ? (
        <p class="said model">
          <span class="who">model</span> <LongText text={entry.answer.text} label="the model's answer" />
        </p>
      ) : null}
      {entry.answer.toolCalls.map((c, i) => (
        <div key={`c${i}`} class="said tool-call">
          <span class="who">calls {c.name}</span>
          <LongText as="pre" class="code" text={prettyJson(c.input)} label={`the call of ${c.name}`} />
        </div>
      ))}
      {entry.error ? <p class="said error">{entry.error}</p> : null}
    </article>
  );
}

function Totals({ totals }: { totals: LlmTotals }) {
  return (
    <dl class="facts inline">
      <dt>calls</dt>
      <dd>{count(totals.calls)}</dd>
      {totals.turns !== undefined ? (
        <>
          <dt>turns</dt>
          <dd>{count(totals.turns)}</dd>
        </>
      ) : null}
      <dt>input tokens</dt>
      <dd>{count(totals.inputTokens)}</dd>
      <dt>output tokens</dt>
      <dd>{count(totals.outputTokens)}</dd>
      <dt>cache read</dt>
      <dd>{count(totals.cacheReadTokens)}</dd>
      <dt>cost</dt>
      <dd>{usd(totals.costUsd)}</dd>
    </dl>
  );
}

const OUTPUT_TYPES = 'AgentOutput,ProcessStarted,ProcessExited';

/**
 * What the agent did: its model calls, or (an agent without a gateway) its output and processes.
 * `noModelCalls`: the analysis says the run has none and will have none, so the transcript is not
 * asked for (in a large run the server would scan every event to find none).
 */
export function TranscriptView({ runId, totals, liveTail, noModelCalls = false }: { runId: string; totals: LlmTotals | null; liveTail: readonly LedgerEvent[]; noModelCalls?: boolean }) {
  const calls = liveTail.filter((e) => e.type === 'LlmCallRecorded');
  const liveNewest = calls.length ? calls[calls.length - 1]!.seq : null;
  const pages = useTranscriptPages(runId, !noModelCalls || liveNewest !== null, liveNewest);
  const noCalls = !pages.loading && !pages.error && pages.entries.length === 0;
  return (
    <div data-testid="transcript">
      {totals ? <Totals totals={totals} /> : null}
      {pages.entries.map((e) => (
        <Call key={e.seq} runId={runId} entry={e} />
      ))}
      {pages.error ? <p role="alert">Could not load the transcript: {pages.error}</p> : null}
      {!pages.done && pages.entries.length ? (
        <p class="pager">
          <button type="button" onClick={pages.more} disabled={pages.loading}>
            {pages.loading ? 'Loading…' : `Load ${LIMIT} more calls`}
          </button>
        </p>
      ) : null}
      {noCalls ? (
        <>
          <p class="muted">No model calls recorded for this run. Its output and processes:</p>
          <EventsList runId={runId} liveTail={liveTail} types={OUTPUT_TYPES} label="Output and process events" testId="output-events" />
        </>
      ) : null}
    </div>
  );
}
