import { useEffect, useRef } from 'preact/hooks';
import { qs, useJson } from '../api.js';
import type { LedgerEvent } from '../types.js';
import { when } from './format.js';
import { EventLink, takeOpener } from './event-link.js';
import { BlobView } from './blob-view.js';

/** The envelope's fields first, then the payload: easier to read than the server's sorted keys. */
function envelopeFirst(event: LedgerEvent) {
  const { type, seq, runId, id, occurredAt, schemaVersion, data, ...rest } = event;
  return { type, seq, runId, id, occurredAt, schemaVersion, ...rest, data };
}

/** The event's `causedBy` (docs/event-catalog.md#causation), when it names one. */
function causeOf(event: LedgerEvent): { seq: number; pid?: number; submissionId?: string; toolCallId?: string; command?: string } | null {
  const cause = event.data.causedBy as { seq?: unknown } | undefined;
  return cause && typeof cause === 'object' && typeof cause.seq === 'number' ? (cause as { seq: number }) : null;
}

/** What a causal link was made on, in words: "pid 4121", "submission s-3", "tool call toolu_1: python train.py". */
function evidenceOf(cause: NonNullable<ReturnType<typeof causeOf>>): string {
  const parts = [
    cause.pid !== undefined ? `pid ${cause.pid}` : null,
    cause.submissionId !== undefined ? `submission ${cause.submissionId}` : null,
    cause.toolCallId !== undefined ? `tool call ${cause.toolCallId}${cause.command !== undefined ? `: ${cause.command}` : ''}` : null,
  ].filter((p): p is string => p !== null);
  return parts.length ? ` (${parts.join(', ')})` : '';
}

/**
 * The event drawer: a modal dialog showing one event's JSON, fetched by seq (one event, never the
 * run). Escape or the close button closes it; focus goes back to the link that opened it.
 */
export function EventDrawer({ runId, seq, onClose }: { runId: string; seq: number; onClose: () => void }) {
  const dialog = useRef<HTMLDialogElement>(null);
  const closeButton = useRef<HTMLButtonElement>(null);
  const opener = useRef<HTMLElement | null>(null);
  const page = useJson<LedgerEvent[]>(`/runs/${encodeURIComponent(runId)}/events${qs({ format: 'json', after_seq: seq - 1, limit: 1 })}`);
  const event = page.data?.find((e) => e.seq === seq) ?? null;
  const cause = event ? causeOf(event) : null;

  useEffect(() => {
    opener.current = takeOpener() ?? (document.activeElement instanceof HTMLElement && document.activeElement !== document.body ? document.activeElement : null);
    const element = dialog.current;
    if (element && !element.open) element.showModal();
    closeButton.current?.focus();
    return () => {
      if (element?.open) element.close();
      const back = opener.current;
      if (back && back.isConnected) back.focus();
    };
  }, []);

  return (
    <dialog
      ref={dialog}
      class="drawer"
      aria-labelledby="event-drawer-title"
      data-testid="event-drawer"
      onCancel={(e) => {
        e.preventDefault();
        onClose();
      }}
      onClick={(e) => {
        if (e.target === dialog.current) onClose(); // a click on the backdrop
      }}
    >
      <div class="drawer-body">
        <header class="drawer-header">
          <h2 id="event-drawer-title">
            Event {seq}
            {event ? ` · ${event.type}` : ''}
          </h2>
          <button type="button" ref={closeButton} onClick={onClose} aria-label="Close the event">
            ✕
          </button>
        </header>
        {page.error ? <p role="alert">{page.error}</p> : null}
        {page.loading && !event ? <p class="muted">Loading…</p> : null}
        {!page.loading && !page.error && !event ? <p>Run {runId} has no event {seq}.</p> : null}
        {event ? (
          <>
            <dl class="facts">
              <dt>type</dt>
              <dd>{event.type}</dd>
              <dt>seq</dt>
              <dd>{event.seq}</dd>
              <dt>occurred</dt>
              <dd>{when(event.occurredAt)}</dd>
              {event.id ? (
                <>
                  <dt>id</dt>
                  <dd>
                    <code>{event.id}</code>
                  </dd>
                </>
              ) : null}
              {cause ? (
                <>
                  <dt>caused by</dt>
                  <dd data-testid="event-cause">
                    <EventLink runId={runId} seq={cause.seq}>{`event ${cause.seq}`}</EventLink>
                    {evidenceOf(cause)}
                  </dd>
                </>
              ) : null}
            </dl>
            <BlobView runId={runId} event={event} />
            <pre class="json" tabIndex={0} aria-label="the event as JSON" data-testid="event-json">
              {JSON.stringify(envelopeFirst(event), null, 2)}
            </pre>
          </>
        ) : null}
      </div>
    </dialog>
  );
}
