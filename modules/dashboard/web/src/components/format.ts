// Number, time and text formatting shared by the pages.

export function num(value: number | null | undefined, digits = 4): string {
  if (value === null || value === undefined || Number.isNaN(value)) return '—';
  const fixed = value.toFixed(digits).replace(/\.?0+$/, '');
  return fixed === '-0' ? '0' : fixed;
}

export function signed(value: number | null | undefined, digits = 4): string {
  if (value === null || value === undefined) return '—';
  return value > 0 ? `+${num(value, digits)}` : num(value, digits);
}

export function interval(ci: [number, number] | null | undefined, digits = 3): string {
  return ci ? `[${num(ci[0], digits)}, ${num(ci[1], digits)}]` : '—';
}

/** 2.25 → "2.3s", 75 → "1m 15s", 4000 → "1h 6m". */
export function duration(seconds: number | null | undefined): string {
  if (seconds === null || seconds === undefined || !Number.isFinite(seconds)) return '—';
  if (seconds < 10 && !Number.isInteger(seconds)) return `${Math.max(0, seconds).toFixed(1)}s`;
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m ${s % 60}s`;
  return `${Math.floor(m / 60)}h ${m % 60}m`;
}

/** An ISO timestamp as local date and time to the second, or — . */
export function when(iso: string | null | undefined): string {
  if (!iso) return '—';
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return iso;
  const pad = (n: number) => String(n).padStart(2, '0');
  return `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())} ${pad(date.getHours())}:${pad(date.getMinutes())}:${pad(date.getSeconds())}`;
}

export function usd(value: number | null | undefined): string {
  if (value === null || value === undefined) return '—';
  return `$${value < 0.01 ? value.toFixed(4) : value.toFixed(2)}`;
}

export function count(value: number | null | undefined): string {
  return value === null || value === undefined ? '—' : value.toLocaleString('en');
}

export function clip(text: string | null | undefined, max = 400): string {
  if (!text) return '';
  return text.length > max ? `${text.slice(0, max)}… (${text.length - max} more characters)` : text;
}
