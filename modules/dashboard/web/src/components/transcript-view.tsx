import { useEffect, useState } from 'preact/hooks';
import { getJson, qs } from '../api.js';
import type { LedgerEvent, LlmTotals, TranscriptEntry } from '../types.js';
import { EventLink } from './event-link.js';
import { EventsList } from './events-list.js';
import { clip, count, usd, when } from './format.js';

const LIMIT = 50;

/** One page of GET /runs/:id/transcript?after_seq=&limit= (the server reads just those calls from the store). */
interface TranscriptPage {
  entries: TranscriptEntry[];
  lastSeq: number;
  more?: boolean;
}

/** The run's model calls, 50 at a time; never the whole run. `enabled` false: none to ask for. */
function useTranscriptPages(runId: string, enabled: boolean) {
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
        {entry.outcome !== 'ok' ? <span class="badge tone-bad">{entry.outcome}</span> : null}
      </header>
      {entry.request.userText ? (
        <p class="said user">
          <span class="who">user</span> {clip(entry.request.userText)}
        </p>
      ) : null}
      {entry.request.toolResults.map((r, i) => (
        <pre key={`r${i}`} class="said tool-result">
          <span class="who">tool result</span> {clip(r.output)}
        </pre>
      ))}
      {entry.answer.text ? (
        <p class="said model">
          <span class="who">model</span> {clip(entry.answer.text)}
        </p>
      ) : null}
      {entry.answer.toolCalls.map((c, i) => (
        <pre key={`c${i}`} class="said tool-call">
          <span class="who">calls {c.name}</span> {clip(c.input)}
        </pre>
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
  const pages = useTranscriptPages(runId, !noModelCalls);
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
