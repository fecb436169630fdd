import { useEffect, useState } from 'preact/hooks';
import { getJson, qs } from '../api.js';
import { inertText } from '../../../../reports/inert-text.js';
import type { LedgerEvent } from '../types.js';
import { EventLink } from './event-link.js';

/** GET /runs/:id/output (modules/dashboard/blobs.controller.ts). */
interface OutputPage {
  chunks: { seq: number; stream: string; observedAt: string | null; text: string | null; binary: boolean; truncated: boolean }[];
  lastSeq: number;
  more: boolean;
}

type Chunk = OutputPage['chunks'][number];
type Filter = 'all' | 'stdout' | 'stderr';

/**
 * The agent's own output (its stdout and stderr as recorded in AgentOutput chunks), page by page
 * from the store, then live: each new output event fetches what came after the last chunk shown.
 * Shown as text (control characters as visible escapes), stderr marked.
 */
export function OutputView({ runId, liveTail }: { runId: string; liveTail: readonly LedgerEvent[] }) {
  const [chunks, setChunks] = useState<Chunk[]>([]);
  const [lastSeq, setLastSeq] = useState(-1);
  const [more, setMore] = useState(false);
  const [loading, setLoading] = useState(true);
  const [error, setError] = useState<string | null>(null);
  const [filter, setFilter] = useState<Filter>('all');

  const load = async (after: number) => {
    setLoading(true);
    setError(null);
    try {
      const page = await getJson<OutputPage>(`/runs/${encodeURIComponent(runId)}/output${qs({ after_seq: after })}`);
      setChunks((current) => [...current.filter((c) => c.seq <= after), ...page.chunks]);
      setLastSeq(Math.max(after, page.lastSeq));
      setMore(page.more);
    } catch (err) {
      setError(err instanceof Error ? err.message : String(err));
    } finally {
      setLoading(false);
    }
  };

  useEffect(() => {
    setChunks([]);
    void load(-1);
  }, [runId]);

  const outputs = liveTail.filter((e) => e.type === 'AgentOutput');
  const newest = outputs.length ? outputs[outputs.length - 1]!.seq : null;
  useEffect(() => {
    if (loading || more || error || newest === null || newest <= lastSeq) return;
    void load(lastSeq);
  }, [newest, loading, more, error, lastSeq]);

  const shown = chunks.filter((c) => filter === 'all' || c.stream === filter);
  return (
    <div data-testid="output-view">
      <div class="tabs" role="tablist" aria-label="Which output">
        {(['all', 'stdout', 'stderr'] as const).map((f) => (
          <button key={f} type="button" role="tab" aria-selected={f === filter} onClick={() => setFilter(f)}>
            {f === 'all' ? 'stdout and stderr' : f}
          </button>
        ))}
      </div>
      {error ? <p role="alert">Could not load the output: {error}</p> : null}
      {shown.length ? (
        <pre class="agent-output" tabIndex={0} aria-label="The agent's output" data-testid="agent-output">
          {shown.map((c) => (
            <span key={c.seq} class={`chunk stream-${c.stream}`} data-seq={c.seq}>
              {c.binary ? `[binary output, event ${c.seq}]\n` : inertText(c.text ?? '')}
              {c.truncated ? `\n[cut at 1 MiB: event ${c.seq} holds the rest]\n` : ''}
            </span>
          ))}
        </pre>
      ) : !loading ? (
        <p class="muted" data-testid="output-empty">No output recorded{filter !== 'all' ? ` on ${filter}` : ''} yet.</p>
      ) : null}
      {shown.length ? (
        <p class="muted small">
          {shown.length} chunks, from <EventLink runId={runId} seq={shown[0]!.seq} /> to <EventLink runId={runId} seq={shown[shown.length - 1]!.seq} />; each opens its event.
        </p>
      ) : null}
      {more ? (
        <p class="pager">
          <button type="button" onClick={() => load(lastSeq)} disabled={loading}>
            {loading ? 'Loading…' : 'Load more output'}
          </button>
        </p>
      ) : null}
    </div>
  );
}
