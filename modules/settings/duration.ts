/** Durations as the operator writes them (budgets, time-outs): pure helpers shared by the settings and the CLI. */

/** Parses budgets like `90s`, `5m`, `12h`, `1h30m` or a plain number of seconds into seconds. */
export function parseDuration(text: string): number {
  const trimmed = text.trim();
  if (/^\d+(\.\d+)?$/.test(trimmed)) return check(Number(trimmed), text);
  const parts = [...trimmed.matchAll(/(\d+(?:\.\d+)?)\s*(h|m|s)/g)];
  if (!parts.length || parts.map((p) => p[0]).join('') !== trimmed.replace(/\s+/g, '')) {
    throw new Error(`invalid duration "${text}": use e.g. 90s, 5m, 12h or 1h30m`);
  }
  const unit = { h: 3600, m: 60, s: 1 } as const;
  return check(parts.reduce((sum, p) => sum + Number(p[1]) * unit[p[2] as keyof typeof unit], 0), text);
}

function check(seconds: number, text: string): number {
  if (!(seconds >= 1) || seconds > 30 * 24 * 3600) throw new Error(`invalid duration "${text}": between 1 s and 30 days`);
  return Math.round(seconds);
}

export function formatSeconds(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const r = s % 60;
  return h ? `${h}h${String(m).padStart(2, '0')}m` : m ? `${m}m${String(r).padStart(2, '0')}s` : `${r}s`;
}
