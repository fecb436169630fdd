import { useState } from 'preact/hooks';
import { inertText } from '../../../../reports/inert-text.js';

/** Characters shown before "Show all": a prompt or a script is read in full on request, never cut for good. */
export const SHOWN_CHARS = 600;

/**
 * Recorded text (an agent's output, a prompt, a tool call) shown as text, never as HTML: Preact
 * writes it as a text node, and control characters (terminal escapes, bidirectional overrides) are
 * shown as visible escapes (modules/reports/inert-text.ts). Longer than `max`: cut, with a button
 * that shows the rest.
 */
export function LongText({ text, max = SHOWN_CHARS, as = 'span', class: cls, label }: { text: string; max?: number; as?: 'span' | 'pre' | 'code'; class?: string; label?: string }) {
  const [open, setOpen] = useState(false);
  const shown = inertText(open || text.length <= max ? text : text.slice(0, max));
  const Tag = as;
  return (
    <>
      <Tag class={cls} data-testid="long-text">
        {shown}
        {!open && text.length > max ? '…' : ''}
      </Tag>
      {text.length > max ? (
        <button type="button" class="link-button" aria-expanded={open} aria-label={`${open ? 'Show less of' : 'Show all of'} ${label ?? 'the text'} (${text.length.toLocaleString('en')} characters)`} onClick={() => setOpen(!open)}>
          {open ? 'Show less' : `Show all ${text.length.toLocaleString('en')} characters`}
        </button>
      ) : null}
    </>
  );
}

/** A tool call's input: pretty-printed when it is JSON, as written otherwise. */
export function prettyJson(text: string): string {
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return text;
  }
}
