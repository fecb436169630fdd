import { scale, tickLabel, ticks, tightDomain } from './scale.js';
import { num } from './format.js';
import type { ScoreboardRow } from '../types.js';

// The scoreboard's headline figures (as `a2rl analysis tables --format html` draws them): the
// improvement of each row with its 95% interval against the task's noise floor band, and the
// failure classes of each row's runs. Inline SVG, no chart library (docs/dashboard.md).

const W = 720;
const LEFT = 250;
const RIGHT = 16;
const ROW = 26;
const TOP = 8;

const label = (r: ScoreboardRow) => `${r.task ?? '—'} · ${r.agent ?? '—'} · ${r.driver ?? '—'}`;

/** Improvement over the baseline per row: the mean (dot), its 95% interval (whisker), the noise floor's interval (grey band), all relative to the row's baseline. */
export function ImprovementFigure({ rows }: { rows: ScoreboardRow[] }) {
  const shown = rows.filter((r) => r.improvement !== null && r.baseline !== null);
  if (!shown.length) return null;
  const rel = (v: number, r: ScoreboardRow) => v - r.baseline!;
  const values = shown.flatMap((r) => [r.improvement!, ...(r.best.ci95 ?? []).map((v) => rel(v, r)), ...(r.noiseFloor?.ci95 ?? []).map((v) => rel(v, r)), 0]);
  const domain = tightDomain(values);
  const x = scale(domain, LEFT, W - RIGHT);
  const h = TOP + shown.length * ROW + 30;
  return (
    <figure class="figure" data-testid="scoreboard-improvement-figure">
      <svg width={W} height={h} viewBox={`0 0 ${W} ${h}`} role="img" aria-label="Improvement over the baseline per task, agent and driver, with 95% intervals and the noise floor">
        <line x1={x(0)} x2={x(0)} y1={TOP} y2={TOP + shown.length * ROW} stroke="currentColor" stroke-opacity="0.4" stroke-dasharray="3,3" />
        {shown.map((r, i) => {
          const y = TOP + i * ROW + ROW / 2;
          const floor = r.noiseFloor?.ci95;
          const ci = r.best.ci95;
          return (
            <g key={label(r)}>
              <text x={LEFT - 8} y={y + 4} font-size="11" text-anchor="end">{label(r)}</text>
              {floor ? <rect x={x(rel(floor[0], r))} y={y - 9} width={Math.max(1, x(rel(floor[1], r)) - x(rel(floor[0], r)))} height={18} fill="currentColor" fill-opacity="0.12"><title>noise floor {num(floor[0])}–{num(floor[1])}</title></rect> : null}
              {ci ? <line x1={x(rel(ci[0], r))} x2={x(rel(ci[1], r))} y1={y} y2={y} stroke="currentColor" stroke-width="2" /> : null}
              <circle cx={x(r.improvement!)} cy={y} r={4} fill="currentColor"><title>{label(r)}: improvement {num(r.improvement)}</title></circle>
            </g>
          );
        })}
        {ticks(domain, 5).map((t, _, all) => (
          <text key={t} x={x(t)} y={TOP + shown.length * ROW + 16} font-size="10" text-anchor="middle">{tickLabel(t, all)}</text>
        ))}
      </svg>
      <figcaption class="muted">Improvement over the baseline (points): the mean, its 95% interval, and the task's noise floor (grey band) relative to the row's baseline.</figcaption>
    </figure>
  );
}

const PALETTE = ['#2b6cb0', '#38a169', '#dd6b20', '#b83280', '#6b46c1', '#718096', '#d69e2e', '#319795', '#c53030', '#4a5568', '#805ad5', '#2f855a', '#9c4221', '#1a202c'];

/** The failure classes of each row's runs as one stacked bar per row. */
export function FailureFigure({ rows }: { rows: ScoreboardRow[] }) {
  const shown = rows.filter((r) => (r.failureClasses ?? []).length);
  if (!shown.length) return null;
  const classes = [...new Set(shown.flatMap((r) => r.failureClasses!.map((f) => f.class)))].sort();
  const max = Math.max(1, ...shown.map((r) => r.failureClasses!.reduce((n, f) => n + f.count, 0)));
  const h = TOP + shown.length * ROW + 10 + Math.ceil(classes.length / 4) * 16;
  return (
    <figure class="figure" data-testid="scoreboard-failure-figure">
      <svg width={W} height={h} viewBox={`0 0 ${W} ${h}`} role="img" aria-label="Failure classes per task, agent and driver">
        {shown.map((r, i) => {
          const y = TOP + i * ROW;
          let at = LEFT;
          return (
            <g key={label(r)}>
              <text x={LEFT - 8} y={y + 16} font-size="11" text-anchor="end">{label(r)}</text>
              {classes.map((c, k) => {
                const count = r.failureClasses!.find((f) => f.class === c)?.count ?? 0;
                if (!count) return null;
                const w = (count / max) * (W - LEFT - RIGHT);
                const rect = <rect key={c} x={at} y={y + 4} width={w} height={16} fill={PALETTE[k % PALETTE.length]}><title>{c}: {count}</title></rect>;
                at += w;
                return rect;
              })}
            </g>
          );
        })}
        {classes.map((c, k) => (
          <g key={c}>
            <rect x={LEFT + (k % 4) * 160} y={TOP + shown.length * ROW + 2 + Math.floor(k / 4) * 16} width={10} height={10} fill={PALETTE[k % PALETTE.length]} />
            <text x={LEFT + (k % 4) * 160 + 14} y={TOP + shown.length * ROW + 11 + Math.floor(k / 4) * 16} font-size="10">{c}</text>
          </g>
        ))}
      </svg>
      <figcaption class="muted">Failure classes of each row's ended runs.</figcaption>
    </figure>
  );
}
