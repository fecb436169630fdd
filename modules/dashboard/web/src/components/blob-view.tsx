import { useState } from 'preact/hooks';
import { qs, useJson } from '../api.js';
import type { LedgerEvent } from '../types.js';
import { count } from './format.js';
import { LongText, prettyJson } from './long-text.js';

/** GET /runs/:id/blobs/:seq (modules/dashboard/blobs.controller.ts). */
interface BlobAnswer {
  seq: number;
  type: string;
  part: string;
  parts: { part: string; sha256: string; size: number }[];
  sha256: string;
  size: number;
  format: 'json' | 'sse' | 'text' | 'binary' | 'none';
  binary: boolean;
  content: string | null;
  truncated: boolean;
}

const SHA256 = /^[0-9a-f]{64}$/;

/** The blobs an event references, as the server names them (modules/dashboard/event-blobs.ts): content of a file revision, then each payload field holding a blob. */
export function eventBlobParts(event: LedgerEvent): string[] {
  const data = event.data ?? {};
  const parts: string[] = [];
  if (typeof data.sha256 === 'string' && SHA256.test(data.sha256) && typeof data.size === 'number') parts.push('content');
  for (const key of Object.keys(data).sort()) {
    const v = data[key] as Record<string, unknown> | null;
    // A model call's body stored as pieces (`requestPieces`) is the part `request`, rebuilt by the server (modules/query/event-blob.ts).
    if (v && typeof v === 'object' && typeof v.sha256 === 'string' && SHA256.test(v.sha256) && typeof v.size === 'number') parts.push(key.endsWith('Pieces') ? key.slice(0, -'Pieces'.length) : key);
  }
  return [...new Set(parts)];
}

/** Characters of a blob shown before "Show all" (a 90 KB request opens on request). */
const BLOB_SHOWN = 20_000;

function BlobBody({ runId, seq, part }: { runId: string; seq: number; part: string }) {
  const blob = useJson<BlobAnswer>(`/runs/${encodeURIComponent(runId)}/blobs/${seq}${qs({ part })}`);
  if (blob.error) return <p role="alert">Could not read the {part}: {blob.error}</p>;
  if (!blob.data) return <p class="muted">Loading the {part}…</p>;
  const b = blob.data;
  const facts = (
    <p class="muted small" data-testid="blob-facts">
      {count(b.size)} bytes · sha256 <code>{b.sha256.slice(0, 16)}…</code>
      {b.truncated ? ' · the first 1 MiB is shown' : ''}
    </p>
  );
  if (b.binary) return <>{facts}<p>Binary content: not shown.</p></>;
  if (b.content === null) return <>{facts}<p>No content recorded.</p></>;
  const text = b.format === 'json' ? prettyJson(b.content) : b.content;
  return (
    <>
      {facts}
      <LongText as="pre" class="json blob" text={text} max={BLOB_SHOWN} label={`the ${part}`} />
    </>
  );
}

/**
 * The blobs an event references (a model call's request and response, an output chunk, a file
 * revision), one at a time: as stored (redacted before storing), JSON pretty-printed, never as HTML.
 */
export function BlobView({ runId, event }: { runId: string; event: LedgerEvent }) {
  const parts = eventBlobParts(event);
  const [part, setPart] = useState<string | null>(parts.length === 1 ? parts[0]! : null);
  if (!parts.length) return null;
  return (
    <section class="blob-view" aria-label="What the event references" data-testid="blob-view">
      <h3>Recorded {parts.length === 1 ? 'content' : 'contents'}</h3>
      <div class="tabs" role="tablist" aria-label="Blobs of this event">
        {parts.map((p) => (
          <button key={p} type="button" role="tab" aria-selected={p === part} data-testid={`blob-part-${p}`} onClick={() => setPart(p)}>
            {p}
          </button>
        ))}
      </div>
      {part ? <BlobBody key={part} runId={runId} seq={event.seq} part={part} /> : <p class="muted">Choose one to read it.</p>}
    </section>
  );
}
