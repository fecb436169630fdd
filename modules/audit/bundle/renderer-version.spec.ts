import { createHash } from 'node:crypto';
import { describe, expect, it } from '@jest/globals';
import { sampleRun, sha } from '../../../projections/run-analysis/testing/run-fixture.js';
import { llmCall } from '../../../projections/transcript/testing/llm-call.js';
import type { A2rlEvent, EventData } from '../../ledger/events/catalog.js';
import { buildEvent } from '../../ledger/events/envelope.js';
import type { ReportFormat } from '../../reports/render.js';
import { renderBundleReports, REPORT_RENDERER } from './reports.js';

// The guard of REPORT_RENDERER (modules/reports/render.ts): audit bundles record the renderer version
// their reports were rendered by, and `a2rl verify-bundle` compares the reports byte for byte only
// with a bundle of the version it renders. A change of report bytes without a version bump would make
// every bundle exported before it fail verification although nothing in it was forged; so the reports
// of one fixed run are pinned here by sha256, per renderer version.
//
// When this fails after a deliberate change of the reports (render.ts, report-model.ts, charts.ts, the
// run-analysis projection): bump REPORT_RENDERER and add the new digests under the new version (the
// failure prints them). Keep the older versions' rows: they record what each version rendered.

const RECORDED: Record<string, Record<ReportFormat, string>> = {
  'a2rl.report/2': {
    md: '88532b38cc5e22bbec04b3e3b0e3253f8ca4b48b702e699b80a444ef3129b5bb',
    html: '3731b1f758644f8f67d3822dae07c471f928f2b72b3f15031c7c698c816d8fc5',
    json: '6265c21348f05311e82b3be51d0b3140ebd78e2264ffcd95204eb9ec481cda27',
  },
  // 3: a timeline lane shows at most TIMELINE_LANE_ITEMS items (a long run's; this run's are the same bytes).
  'a2rl.report/3': {
    md: '88532b38cc5e22bbec04b3e3b0e3253f8ca4b48b702e699b80a444ef3129b5bb',
    html: '3731b1f758644f8f67d3822dae07c471f928f2b72b3f15031c7c698c816d8fc5',
    json: '6265c21348f05311e82b3be51d0b3140ebd78e2264ffcd95204eb9ec481cda27',
  },
  // 4: a citation of more than CITED_RUNS_SHOWN runs of seqs shows the first and last half of them and
  // how many seqs between, in md and HTML, and the cited-events table lists the seqs shown (a long run's; this run's are the same bytes).
  'a2rl.report/4': {
    md: '88532b38cc5e22bbec04b3e3b0e3253f8ca4b48b702e699b80a444ef3129b5bb',
    html: '3731b1f758644f8f67d3822dae07c471f928f2b72b3f15031c7c698c816d8fc5',
    json: '6265c21348f05311e82b3be51d0b3140ebd78e2264ffcd95204eb9ec481cda27',
  },
};

const OUTPUT = ['step 1 loss 0.5\n', 'warning: "slow" <b>\n'];

/**
 * A fixed LLM-agent run: the sample run (two graded submissions, processes, a rollout batch) driven by
 * a model through the gateway, with a model call, a limit reached and the agent's own output, so that
 * every part of the report (timeline lanes, model calls, limits, output, long values) is rendered.
 */
function fixedRun(): { events: A2rlEvent[]; blobs: { read(sha256: string): Promise<Buffer | null> } } {
  const base = sampleRun('renderer-guard');
  const exit = base.events.findIndex((e) => e.type === 'AgentExited');
  const started = base.events.findIndex((e) => e.type === 'ProcessStarted');
  const at = base.events[exit].occurredAt;
  const script = `cat > code/train.sh <<'EOF'\n# a comment\npython3 code/train.py --lr 0.01\n${'x'.repeat(400)}\nEOF`;
  const specs: Array<Pick<A2rlEvent, 'type' | 'occurredAt' | 'data'>> = [
    ...base.events.slice(0, exit),
    { type: 'LlmCallRecorded', occurredAt: at, data: llmCall({ callId: 'c1', userText: '# Task\nPost-train the model.', toolCalls: [{ id: 't1', name: 'Bash', input: JSON.stringify({ command: script }) }] }) },
    { type: 'LimitReached', occurredAt: at, data: { limit: 'llm_tokens', value: 3820, max: 2000, scope: 'c1', action: 'billable LLM calls answered 429', observedAt: at } },
    ...OUTPUT.map((text, i) => ({
      type: 'AgentOutput' as const,
      occurredAt: at,
      data: { stream: i === 1 ? 'stderr' : 'stdout', chunk: { sha256: sha(text), size: Buffer.byteLength(text), key: `sha256/${sha(text).slice(0, 2)}/${sha(text)}` }, observedAt: at },
    })),
    ...base.events.slice(exit),
  ] as Array<Pick<A2rlEvent, 'type' | 'occurredAt' | 'data'>>;
  const events = specs.map((e, seq) => {
    let data = e.data as Record<string, unknown>;
    if (e.type === 'RunScheduled') data = { ...data, driver: 'claude-sonnet-4-5-20250929', agent: 'claude-code' };
    if (e.type === 'AgentStarted') data = { ...data, gateway: { providers: ['anthropic'], url: 'http://127.0.0.1:5001' } };
    if (seq === started) data = { ...data, argv: ['bash', '-lc', script] };
    return buildEvent(e.type, 'renderer-guard', seq, e.occurredAt, data as EventData<typeof e.type>);
  });
  const blobs = {
    async read(sha256: string) {
      const out = OUTPUT.find((t) => sha(t) === sha256);
      return out !== undefined ? Buffer.from(out) : base.blobs.read(sha256);
    },
  };
  return { events, blobs };
}

describe('REPORT_RENDERER: the reports of a fixed run are the bytes recorded for this renderer version', () => {
  it('renders md, html and json to the digests recorded under the current REPORT_RENDERER', async () => {
    const { events, blobs } = fixedRun();
    const rendered = await renderBundleReports(events, blobs, 1);
    const digests = Object.fromEntries(Object.entries(rendered).map(([format, text]) => [format, createHash('sha256').update(text, 'utf8').digest('hex')])) as Record<ReportFormat, string>;
    const recorded = RECORDED[REPORT_RENDERER];
    const changed = (['md', 'html', 'json'] as const).filter((f) => recorded?.[f] !== digests[f]);
    if (changed.length) {
      throw new Error(
        (recorded
          ? `the report bytes changed (${changed.join(', ')}) but REPORT_RENDERER is still "${REPORT_RENDERER}": bundles exported before this change would fail \`a2rl verify-bundle\`. `
          : `no digests are recorded for REPORT_RENDERER "${REPORT_RENDERER}". `) +
          `If the change is meant, bump REPORT_RENDERER in modules/reports/render.ts and record under the new version, in ${import.meta.url.replace(/^file:\/\//, '')}: ${JSON.stringify(digests)}`,
      );
    }
    expect(digests).toEqual(recorded);
    // The fixed run reaches the parts of the report that LLM-agent runs added (what version 2 changed).
    expect(rendered.md).toEqual(expect.stringContaining('## Model calls'));
    expect(rendered.md).toEqual(expect.stringContaining('## Limits and overruns'));
    expect(rendered.md).toEqual(expect.stringContaining('## Agent output'));
  });

  it('renders the same bytes twice (the digests pin the renderer, not chance)', async () => {
    const a = fixedRun();
    const b = fixedRun();
    expect(await renderBundleReports(a.events, a.blobs, 1)).toEqual(await renderBundleReports(b.events, b.blobs, 1));
  });
});
