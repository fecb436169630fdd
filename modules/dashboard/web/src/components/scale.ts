// Axis scales for the SVG charts.

export interface Domain {
  min: number;
  max: number;
}

/**
 * A tight domain around the values: from their minimum to their maximum plus a small margin each
 * side (never stretched to 0), so small differences between scores stay visible.
 */
export function tightDomain(values: readonly number[], padFraction = 0.08): Domain {
  const finite = values.filter((v) => Number.isFinite(v));
  if (!finite.length) return { min: 0, max: 1 };
  const lo = Math.min(...finite);
  const hi = Math.max(...finite);
  if (lo === hi) {
    const pad = Math.abs(lo) * 0.05 || 0.5;
    return { min: lo - pad, max: hi + pad };
  }
  const pad = (hi - lo) * padFraction;
  return { min: lo - pad, max: hi + pad };
}

/** About `count` round tick values inside the domain (steps of 1, 2 or 5 × 10^k). */
export function ticks(domain: Domain, count = 5): number[] {
  const span = domain.max - domain.min;
  if (!(span > 0)) return [domain.min];
  const raw = span / count;
  const power = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * power).find((s) => span / s <= count * 1.5) ?? 10 * power;
  const out: number[] = [];
  for (let v = Math.ceil(domain.min / step) * step; v <= domain.max + step * 1e-9; v += step) out.push(Number(v.toPrecision(12)));
  return out;
}

/** Maps the domain onto [from, to] (pixels). */
export function scale(domain: Domain, from: number, to: number): (v: number) => number {
  const span = domain.max - domain.min || 1;
  return (v) => from + ((v - domain.min) / span) * (to - from);
}

/** Tick label: as many decimals as the step needs. */
export function tickLabel(value: number, all: readonly number[]): string {
  const step = all.length > 1 ? Math.abs(all[1]! - all[0]!) : Math.abs(value) || 1;
  const decimals = Math.max(0, Math.min(6, -Math.floor(Math.log10(step))));
  return value.toFixed(decimals);
}
