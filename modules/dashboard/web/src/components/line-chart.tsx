import { scale, tickLabel, ticks, tightDomain } from './scale.js';

export interface ChartPoint {
  x: number;
  y: number;
  label: string;
  href?: string;
}

export interface ReferenceLine {
  y: number;
  label: string;
  href?: string;
}

interface LineChartProps {
  title: string;
  points: ChartPoint[];
  references?: ReferenceLine[];
  xLabel: string;
  yLabel: string;
  formatX?: (x: number) => string;
  testId?: string;
}

const W = 640;
const H = 240;
const M = { top: 12, right: 16, bottom: 38, left: 56 };

/** A line chart as inline SVG; the y axis spans the data (and reference lines) tightly, not from 0. */
export function LineChart({ title, points, references = [], xLabel, yLabel, formatX = (x) => String(x), testId }: LineChartProps) {
  const yDomain = tightDomain([...points.map((p) => p.y), ...references.map((r) => r.y)]);
  const xDomain = tightDomain(points.map((p) => p.x), 0.03);
  const x = scale(xDomain, M.left, W - M.right);
  const y = scale(yDomain, H - M.bottom, M.top);
  const yTicks = ticks(yDomain, 5);
  const xTicks = ticks(xDomain, 6);
  const path = points.map((p, i) => `${i ? 'L' : 'M'}${x(p.x).toFixed(1)},${y(p.y).toFixed(1)}`).join(' ');
  const titleId = `${testId ?? 'chart'}-title`;
  return (
    <figure class="chart">
      <svg viewBox={`0 0 ${W} ${H}`} role="img" aria-labelledby={titleId} data-testid={testId} preserveAspectRatio="xMidYMid meet">
        <title id={titleId}>{title}</title>
        <g class="axis">
          {yTicks.map((t) => (
            <g key={`y${t}`}>
              <line x1={M.left} x2={W - M.right} y1={y(t)} y2={y(t)} class="grid" />
              <text x={M.left - 6} y={y(t)} dy="0.32em" text-anchor="end">
                {tickLabel(t, yTicks)}
              </text>
            </g>
          ))}
          {xTicks.map((t) => (
            <text key={`x${t}`} x={x(t)} y={H - M.bottom + 16} text-anchor="middle">
              {formatX(t)}
            </text>
          ))}
          <line x1={M.left} x2={W - M.right} y1={H - M.bottom} y2={H - M.bottom} class="baseline-axis" />
          <text x={(M.left + W - M.right) / 2} y={H - 4} text-anchor="middle" class="axis-label">
            {xLabel}
          </text>
          <text transform={`translate(14 ${(M.top + H - M.bottom) / 2}) rotate(-90)`} text-anchor="middle" class="axis-label">
            {yLabel}
          </text>
        </g>
        {references.map((r) => {
          const line = (
            <g class="reference">
              <line x1={M.left} x2={W - M.right} y1={y(r.y)} y2={y(r.y)} />
              <text x={W - M.right - 4} y={y(r.y) - 4} text-anchor="end">
                {r.label}
              </text>
              <title>{r.label}</title>
            </g>
          );
          return r.href ? (
            <a key={r.label} href={r.href} aria-label={r.label}>
              {line}
            </a>
          ) : (
            <g key={r.label}>{line}</g>
          );
        })}
        {points.length > 1 ? <path d={path} class="series" /> : null}
        {points.map((p, i) => {
          const dot = (
            <circle cx={x(p.x)} cy={y(p.y)} r={4.5} class="point">
              <title>{p.label}</title>
            </circle>
          );
          return p.href ? (
            <a key={i} href={p.href} aria-label={p.label}>
              {dot}
            </a>
          ) : (
            <g key={i}>{dot}</g>
          );
        })}
      </svg>
    </figure>
  );
}
