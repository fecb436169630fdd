import type { TimelineItem } from '../types.js';
import { scale, ticks } from './scale.js';
import { duration } from './format.js';

const LANES = ['submissions', 'model-calls', 'training', 'evaluation', 'install', 'agent-tool', 'other', 'files', 'rollouts'];
/** Items drawn at most: a huge run keeps a responsive page; the events list has the rest. */
const MAX_ITEMS = 1500;

const W = 640;
const LANE_H = 22;
const M = { top: 8, right: 16, bottom: 28, left: 96 };

/** The run's processes, file changes, rollouts and submissions over time, one lane each. */
export function TimelineChart({ items, endS, eventHref, testId }: { items: TimelineItem[]; endS: number; eventHref: (seq: number) => string; testId?: string }) {
  const lanes = LANES.filter((lane) => items.some((i) => i.lane === lane));
  for (const i of items) if (!lanes.includes(i.lane)) lanes.push(i.lane);
  const shown = items.length > MAX_ITEMS ? items.slice(0, MAX_ITEMS) : items;
  const lastS = Math.max(endS, ...shown.map((i) => i.endS ?? i.startS), 1);
  const domain = { min: 0, max: lastS };
  const x = scale(domain, M.left, W - M.right);
  const H = M.top + lanes.length * LANE_H + M.bottom;
  const laneY = (lane: string) => M.top + lanes.indexOf(lane) * LANE_H;
  const xTicks = ticks(domain, 6);
  if (!lanes.length) return <p class="muted">No processes, file changes, rollouts or submissions yet.</p>;
  return (
    <figure class="chart">
      <svg viewBox={`0 0 ${W} ${H}`} role="img" aria-labelledby={`${testId ?? 'timeline'}-title`} data-testid={testId}>
        <title id={`${testId ?? 'timeline'}-title`}>Timeline: what ran when, in seconds from the agent's start</title>
        {lanes.map((lane) => (
          <g key={lane} class="lane">
            <line x1={M.left} x2={W - M.right} y1={laneY(lane) + LANE_H - 1} y2={laneY(lane) + LANE_H - 1} class="grid" />
            <text x={M.left - 6} y={laneY(lane) + LANE_H / 2} dy="0.32em" text-anchor="end">
              {lane}
            </text>
          </g>
        ))}
        {xTicks.map((t) => (
          <text key={t} x={x(t)} y={H - 10} text-anchor="middle" class="axis">
            {duration(t)}
          </text>
        ))}
        {shown.map((item) => {
          const x0 = x(item.startS);
          const x1 = item.endS === null ? x0 : x(item.endS);
          const top = laneY(item.lane) + 4;
          const label = `${item.label} (${duration(item.startS)}${item.endS !== null ? `–${duration(item.endS)}` : ''}, event ${item.seq})`;
          return (
            // Not tab stops: the same items are links in the tables below.
            <a key={item.seq} href={eventHref(item.seq)} aria-label={label} tabIndex={-1}>
              {x1 - x0 >= 3 ? (
                <rect x={x0} y={top} width={x1 - x0} height={LANE_H - 9} class={`bar lane-${item.lane}`} />
              ) : (
                <rect x={x0 - 1.5} y={top} width={3} height={LANE_H - 9} class={`tick lane-${item.lane}`} />
              )}
              <title>{label}</title>
            </a>
          );
        })}
      </svg>
      {items.length > MAX_ITEMS ? <figcaption class="muted">Showing the first {MAX_ITEMS} of {items.length} items.</figcaption> : null}
    </figure>
  );
}
