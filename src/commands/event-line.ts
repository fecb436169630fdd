import { inertLine } from '../../modules/reports/inert-text.js';

// `a2rl events` without --json: one readable, bounded line per event. What says what happened comes
// first, as key=value: the scalar fields (a SubmissionGraded shows its score before its details), then
// lists of scalars (a process's argv), then bookkeeping (hashes, storage keys, observation times), then
// nested values summarised (a blob as its size, a list as its length, an object as its keys). The whole
// line is cut at a width and shown inert (it quotes what the agent wrote). --json prints the whole event.

/** The longest a string value is shown within a line. */
const MAX_STRING = 80;
/** The most items of a list of scalars shown. */
const MAX_ITEMS = 8;
/** Fields that identify or time-stamp rather than say what happened: shown after the others. */
const BOOKKEEPING = new Set(['observedAt', 'closedAt', 'sha256', 'previousSha256', 'key', 'rootHash', 'signature', 'keyId', 'cwd', 'capture', 'workspace']);

const isBlobRef = (v: Record<string, unknown>) => typeof v.sha256 === 'string' && typeof v.size === 'number';

function bytes(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / 1024 / 1024).toFixed(1)} MiB`;
}

function scalar(value: string | number | boolean | null): string {
  if (typeof value !== 'string') return String(value);
  const cut = value.length > MAX_STRING ? `${value.slice(0, MAX_STRING - 1)}…` : value;
  return JSON.stringify(cut);
}

function scalarList(values: Array<string | number | boolean | null>): string {
  const shown = values.slice(0, MAX_ITEMS).map(scalar);
  return `[${shown.join(',')}${values.length > MAX_ITEMS ? `,…(${values.length})` : ''}]`;
}

function compound(value: object): string {
  if (Array.isArray(value)) return `[${value.length} item${value.length === 1 ? '' : 's'}]`;
  const v = value as Record<string, unknown>;
  if (isBlobRef(v)) return `blob(${bytes(v.size as number)})`;
  const keys = Object.keys(v);
  return `{${keys.slice(0, 4).join(',')}${keys.length > 4 ? ',…' : ''}}`;
}

/** An event's data as one line of at most `width` characters: scalars first (key=value), then nested values summarised. */
export function eventLine(data: unknown, width = 160): string {
  let text: string;
  if (data === null || typeof data !== 'object' || Array.isArray(data)) text = data === undefined ? '' : typeof data === 'object' ? compound(data as object) : scalar(data as string);
  else {
    const entries = Object.entries(data as Record<string, unknown>).filter(([, v]) => v !== undefined);
    const isScalar = (v: unknown) => v === null || typeof v !== 'object';
    const scalars = entries.filter(([k, v]) => isScalar(v) && !BOOKKEEPING.has(k)).map(([k, v]) => `${k}=${scalar(v as string | number | boolean | null)}`);
    const lists = entries.filter(([, v]) => Array.isArray(v) && v.length > 0 && v.every(isScalar)).map(([k, v]) => `${k}=${scalarList(v as Array<string | number | boolean | null>)}`);
    const bookkeeping = entries.filter(([k, v]) => isScalar(v) && BOOKKEEPING.has(k)).map(([k, v]) => `${k}=${scalar(v as string | number | boolean | null)}`);
    const nested = entries.filter(([, v]) => !isScalar(v) && !(Array.isArray(v) && v.length > 0 && v.every(isScalar))).map(([k, v]) => `${k}=${compound(v as object)}`);
    text = [...scalars, ...lists, ...bookkeeping, ...nested].join(' ');
  }
  const line = inertLine(text);
  return line.length > width ? `${line.slice(0, width - 1)}…` : line;
}
