import { Fragment, type ComponentChildren } from 'preact';
import { link } from '../router.js';

let opener: HTMLElement | null = null;

/** The element that last opened the event drawer, to give focus back to when it closes. */
export function takeOpener(): HTMLElement | null {
  const element = opener;
  opener = null;
  return element;
}

export function eventHref(runId: string, seq: number): string {
  return link(`/runs/${encodeURIComponent(runId)}`, { seq });
}

/**
 * A link to the event behind a value: opens the run page's event drawer (`#/runs/<id>?seq=<n>`).
 * Without children it reads "#<seq>".
 */
export function EventLink({ runId, seq, children, label }: { runId: string; seq: number; children?: ComponentChildren; label?: string }) {
  return (
    <a
      href={eventHref(runId, seq)}
      class="event-link"
      aria-label={label ?? (children ? undefined : `event ${seq}`)}
      title={`event ${seq}`}
      onClick={(e) => {
        opener = e.currentTarget as HTMLElement;
      }}
    >
      {children ?? `#${seq}`}
    </a>
  );
}

/** A value followed by links to the events that prove it. */
export function Proven({ runId, seqs, children }: { runId: string; seqs: readonly number[]; children: ComponentChildren }) {
  if (!seqs.length) return <>{children}</>;
  if (seqs.length === 1)
    return (
      <EventLink runId={runId} seq={seqs[0]!} label={`${typeof children === 'string' || typeof children === 'number' ? `${children}, ` : ''}event ${seqs[0]}`}>
        {children}
      </EventLink>
    );
  const shown = seqs.slice(0, 4);
  return (
    <span>
      {children}{' '}
      <span class="evidence">
        (
        {shown.map((seq, i) => (
          <Fragment key={seq}>
            {i ? ' ' : ''}
            <EventLink runId={runId} seq={seq} />
          </Fragment>
        ))}
        {seqs.length > shown.length ? ` +${seqs.length - shown.length}` : ''})
      </span>
    </span>
  );
}
