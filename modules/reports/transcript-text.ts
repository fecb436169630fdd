import type { Transcript, TranscriptEntry, TranscriptTotals } from '../../projections/transcript/transcript.js';
import { inertLine, inertText } from './inert-text.js';
import { fmt, thousands, usd } from './render.js';

// The transcript as plain text for a terminal (`a2rl transcript`, GET /runs/:id/transcript?format=text):
// one block per call, its texts whole (the gateway already cut them), continuation lines indented.
// Every recorded string is shown inert (inert-text.ts): headers and labels on one line, so a model
// name or tool name cannot start a block of its own; texts keep their line breaks, indented.

const seconds = (ms: number | null) => (ms === null ? 'n/a' : `${fmt(ms / 1000, 2)} s`);
const tokens = (n: number | null) => (n === null ? '?' : thousands(n));
const plural = (n: number, one: string) => `${n} ${one}${n === 1 ? '' : 's'}`;

function labelled(label: string, text: string): string {
  const [first, ...rest] = inertText(text).split('\n');
  return `  ${inertLine(label)}: ${first}\n${rest.map((line) => `      ${line}\n`).join('')}`;
}

function title(e: TranscriptEntry): string {
  if (e.role === 'turn') return `turn ${e.turn}`;
  return e.role === 'side' ? `side call (${e.api})` : `failed call`;
}

export function entryText(e: TranscriptEntry): string {
  const u = e.usage;
  const head = [
    `── ${title(e)}${e.segment ? ` (resumed, segment ${e.segment})` : ''} · seq ${e.seq} · ${e.model ?? 'unknown model'} (${e.provider} ${e.api}${e.stream ? ', streamed' : ''})`,
    `${e.status} ${e.outcome}${e.answer.stopReason ? ` (${e.answer.stopReason})` : ''}`,
    `${seconds(e.latencyMs)}${e.ttftMs === null ? '' : `, first byte ${seconds(e.ttftMs)}`}`,
    `${tokens(u.inputTokens)} in / ${tokens(u.outputTokens)} out tokens${u.cacheReadTokens || u.cacheWriteTokens ? ` (cache ${tokens(u.cacheReadTokens)} read, ${tokens(u.cacheWriteTokens)} written)` : ''}`,
    e.costUsd === null ? 'cost unknown' : `$${fmt(e.costUsd, 6)}`,
  ].join(' · ');
  const parts = [`${inertLine(head)}\n`];
  if (e.request.userText !== null) parts.push(labelled('user', e.request.userText));
  for (const r of e.request.toolResults) parts.push(labelled(`tool result${r.name ? ` ${r.name}` : ''}${r.id ? ` [${r.id}]` : ''}${r.isError ? ' (error)' : ''}`, r.output));
  if (e.answer.text !== null) parts.push(labelled('assistant', e.answer.text));
  for (const c of e.answer.toolCalls) parts.push(labelled(`tool call ${c.name}${c.id ? ` [${c.id}]` : ''}`, c.input));
  if (e.error) parts.push(labelled('error', e.error));
  return parts.join('');
}

export function totalsText(t: TranscriptTotals): string {
  const outcomes = inertLine(Object.entries(t.outcomes).map(([outcome, n]) => `${outcome}×${n}`).join(', '));
  return [
    `══ ${plural(t.calls, 'call')}: ${plural(t.turns, 'turn')}, ${t.sideCalls} on the side, ${t.failedCalls} failed`,
    `${plural(t.toolCalls, 'tool call')}, ${plural(t.toolResults, 'tool result')}`,
    `${thousands(t.inputTokens)} in / ${thousands(t.outputTokens)} out tokens (cache ${thousands(t.cacheReadTokens)} read, ${thousands(t.cacheWriteTokens)} written)`,
    `cost ${usd(t)}${outcomes ? ` · ${outcomes}` : ''}\n`,
  ].join(' · ');
}

export function transcriptText(t: Transcript): string {
  return `${t.entries.map(entryText).join('\n')}${t.entries.length ? '\n' : ''}${totalsText(t.totals)}`;
}
