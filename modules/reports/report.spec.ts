import { describe, expect, it } from '@jest/globals';
import { analyzeRun } from '../../projections/run-analysis/analyze.js';
import { buildReport } from './report-model.js';
import { CITED_RUNS_SHOWN, renderReport, REPORT_FORMATS, seqRanges, shownCitation } from './render.js';
import { memoryBlobs, sampleRun, TRAIN_V1 } from '../../projections/run-analysis/testing/run-fixture.js';
import type { A2rlEvent, EventData } from '../ledger/events/catalog.js';
import { buildEvent } from '../ledger/events/envelope.js';
import { failedCall, llmCall } from '../../projections/transcript/testing/llm-call.js';

/** The sample run with integrity checks appended (before sub-2's grading and at the end). */
function checkedRun(end: Partial<EventData<'WorkspaceIntegrityChecked'>>) {
  const run = sampleRun();
  const next = run.events.length;
  const t = (s: number) => new Date(Date.UTC(2026, 0, 1) + s * 1000).toISOString();
  const base = { ok: true, checked: 4, differences: [] };
  run.events.push(
    buildEvent('WorkspaceIntegrityChecked', run.analysis.runId, next, t(21), { ...base, phase: 'grading', submissionId: 'sub-2', full: false, observedAt: t(17.2) }),
    buildEvent('WorkspaceIntegrityChecked', run.analysis.runId, next + 1, t(22), { ...base, phase: 'end', full: true, observedAt: t(21.5), ...end }),
  );
  return { run, seqs: [next, next + 1] };
}

/**
 * The sample run as an LLM-driven agent's: scheduled with `driver`, its AgentStarted with a gateway,
 * three model calls (a turn, a failed retry, the final answer with a long tool result) before it exits.
 */
async function llmRun(driver = 'gpt-5') {
  const base = sampleRun('fx-llm');
  const exit = base.events.findIndex((e) => e.type === 'AgentExited');
  const call = (data: EventData<'LlmCallRecorded'>) => ({ type: 'LlmCallRecorded', occurredAt: base.events[exit].occurredAt, data }) as A2rlEvent;
  const specs: A2rlEvent[] = [
    ...base.events.slice(0, exit),
    call(llmCall({ callId: 'c1', userText: 'Train the model', toolCalls: [{ id: 't1', name: 'Bash', input: '{"command":"python3 code/train.py"}' }] })),
    call(failedCall({ callId: 'c2', messages: 3, toolResults: [{ id: 't1', name: 'Bash', output: 'epoch 1' }] })),
    call(llmCall({ callId: 'c3', messages: 3, toolResults: [{ id: 't1', name: 'Bash', output: `${'x'.repeat(700)} <end>` }], toolCalls: [], outputText: 'Done: **submitted** `sub-2`.', stopReason: 'end_turn' })),
    ...base.events.slice(exit),
  ];
  const events = specs.map((e, seq) => {
    const data = e.type === 'RunScheduled' ? { ...e.data, driver } : e.type === 'AgentStarted' ? { ...e.data, gateway: { providers: ['anthropic' as const], url: 'http://127.0.0.1:5001' } } : e.data;
    return buildEvent(e.type, 'fx-llm', seq, e.occurredAt, data as never);
  });
  const analysis = await analyzeRun(events, base.blobs);
  return { run: { analysis, events, blobs: base.blobs }, calls: [exit, exit + 1, exit + 2] };
}

/** The first line of `text` starting with `prefix` (a small value to compare, not the whole report). */
const lineOf = (text: string, prefix: string) => text.split('\n').find((l) => l.startsWith(prefix)) ?? null;

describe('model calls, driver and transcript in the report', () => {
  it('flags a driver mismatch in the header and right below it, in every format', async () => {
    const { run, calls } = await llmRun('gpt-5');
    const md = await renderReport(run, 'md');
    expect(lineOf(md, '| Driver |')).toBe(`| Driver | \`claude-sonnet-4-5-20250929\` used by the model calls — **driver mismatch**: declared \`gpt-5\` [seq 0, ${calls[0]}, ${calls[2]}] |`);
    expect(lineOf(md, '> ')).toBe(
      `> **Driver mismatch:** the run was scheduled with driver \`gpt-5\`, but the agent's model calls went to \`claude-sonnet-4-5-20250929\` (3 model calls of 3). The scoreboard counts this run under claude-sonnet-4-5-20250929. [seq 0, ${calls[0]}, ${calls[2]}]`,
    );
    expect(md.indexOf('Driver mismatch:')).toBeLessThan(md.indexOf('## Score trajectory'));
    const html = await renderReport(run, 'html');
    expect(html.includes('<p class="alert"><strong>Driver mismatch:</strong>')).toBe(true);
    const doc = JSON.parse(await renderReport(run, 'json'));
    expect(doc.run).toMatchObject({ driver: 'claude-sonnet-4-5-20250929', declaredDriver: 'gpt-5', driverMismatch: true });
  });

  it('a matching declared driver is no mismatch', async () => {
    const { run, calls } = await llmRun('claude-sonnet-4-5');
    const md = await renderReport(run, 'md');
    expect(lineOf(md, '| Driver |')).toBe(`| Driver | \`claude-sonnet-4-5-20250929\` (3 model calls of 3, declared claude-sonnet-4-5) [seq 0, ${calls[0]}, ${calls[2]}] |`);
    expect(/mismatch/i.test(md)).toBe(false);
  });

  it('has a model-calls section with per-model usage, cost and failures', async () => {
    const { run, calls } = await llmRun();
    const md = await renderReport(run, 'md');
    const cost = '≥ $0.0075 (1 call without a price)'; // two answered calls priced, the failed one not
    expect(lineOf(md, '| Model calls |')).toBe(`| Model calls | 3 calls, 2 turns, 2,000 input / 100 output tokens, cost ${cost}, failed: upstream\\_timeout×1 [seq ${calls[0]}, ${calls[2]}] |`);
    expect(md.includes('\n## Model calls\n')).toBe(true);
    expect(lineOf(md, '| `claude-sonnet-4-5-20250929` |')).toBe(
      `| \`claude-sonnet-4-5-20250929\` | 3 | 2 | 2,000 | 100 | 0 / 0 | ${cost} | upstream\\_timeout×1 | 1.2 s | 0.3 s | [seq ${calls[0]}, ${calls[2]}] |`,
    );
    const doc = JSON.parse(await renderReport(run, 'json'));
    expect(doc.llm.models.map((m: { model: string }) => m.model)).toEqual(['claude-sonnet-4-5-20250929']);
  });

  it('the transcript: readable text in Markdown (no SVG, texts fenced), collapsed in HTML, cut texts in all', async () => {
    const { run, calls } = await llmRun();
    const md = await renderReport(run, 'md');
    const section = md.slice(md.indexOf('## Transcript'), md.indexOf('## Cited events'));
    expect(lineOf(section, '**Turn 1**')).toBe(`**Turn 1** \`claude-sonnet-4-5-20250929\` · 1,000 in / 50 out · 200 ok (tool\\_use) · 1.2 s [seq ${calls[0]}]`);
    expect(lineOf(section, '**Failed call')).toBe(`**Failed call (upstream\\_timeout)** \`claude-sonnet-4-5\` · ? in / ? out · 504 upstream\\_timeout · 1.2 s [seq ${calls[1]}]`);
    for (const text of [
      'Prompt:\n\n```text\nTrain the model\n```',
      'Tool call `Bash`:\n\n```text\n{"command":"python3 code/train.py"}\n```',
      'Answer:\n\n```text\nDone: **submitted** `sub-2`.\n```',
      'Error: upstream did not answer',
      '… (106 more characters)', // 700 x + ' <end>', cut at 600
    ]) {
      expect([text, section.includes(text)]).toEqual([text, true]);
    }
    expect(/<end>|<svg|<details/.test(section)).toBe(false);
    expect(new RegExp(`\\| ${calls[2]} \\| [^|]+ \\| LlmCallRecorded \\|`).test(md)).toBe(true); // cited
    const html = await renderReport(run, 'html');
    expect(/<h2>Transcript<\/h2>\n<details><summary>2 turns, 3 calls \(0 on the side, 1 failed\)/.test(html)).toBe(true);
    expect(html.includes('<details open')).toBe(false);
    expect(html.includes('<pre class="text">Done: **submitted** `sub-2`.</pre>')).toBe(true);
    expect(/<script|<link|src=/.test(html)).toBe(false);
    const doc = JSON.parse(await renderReport(run, 'json'));
    expect(doc.transcript.entries.map((e: { role: string; turn: number | null }) => [e.role, e.turn])).toEqual([['turn', 1], ['failed', null], ['turn', 2]]);
    expect(doc.transcript.entries[2].request.toolResults[0].output.length).toBeLessThan(700);
  });

  it('renders the same bytes twice', async () => {
    for (const format of REPORT_FORMATS) {
      const [first, second] = [await renderReport((await llmRun()).run, format), await renderReport((await llmRun()).run, format)];
      expect(first === second).toBe(true);
    }
  });

  it('adds nothing to a run that is not LLM-driven (its report keeps its bytes)', async () => {
    const run = sampleRun();
    const doc = JSON.parse(await renderReport(run, 'json'));
    expect(['llm', 'transcript'].filter((k) => k in doc)).toEqual([]);
    expect('declaredDriver' in doc.run).toBe(false);
    for (const format of ['md', 'html'] as const) expect(/Model calls|Transcript|mismatch|class="alert"|pre\.text/.test(await renderReport(run, format))).toBe(false);
    expect(lineOf(await renderReport(run, 'md'), '| Driver |')).toBe('| Driver | `none` [seq 0] |');
  });
});

describe('renderReport', () => {
  it('renders the same bytes twice in every format (no clock, fixed number formatting)', async () => {
    for (const format of REPORT_FORMATS) {
      const first = await renderReport(sampleRun(), format);
      const second = await renderReport(sampleRun(), format);
      expect(second).toBe(first);
      expect(first.length).toBeGreaterThan(500);
    }
  });

  it('JSON form carries failure.class, route.best, metrics.valid_submission_rate and submissions[] as canonical JSON', async () => {
    const text = await renderReport(sampleRun(), 'json');
    const doc = JSON.parse(text);
    expect(doc.failure.class).toBe('success');
    expect(doc.route.best).toBe('grpo');
    expect(doc.metrics.valid_submission_rate).toBe(1);
    expect(doc.submissions.map((s: { submissionId: string }) => s.submissionId)).toEqual(['sub-1', 'sub-2']);
    expect(text.indexOf('"failure"')).toBeLessThan(text.indexOf('"metrics"')); // keys sorted
    const file = doc.submissions[1].code.files[0];
    expect(file).toMatchObject({ path: 'code/train.py', op: 'modify', linesAdded: 2, linesRemoved: 1, evidence: [9] });
    expect(file.hunks[0].lines).toEqual([' import lib', '-lr = 0.1', '+lr = 0.01', ' epochs = 3', ' train(lr, epochs)', '+print("<done> & ok")']);
  });

  it('Markdown cites the events behind the header and each submission section', async () => {
    const md = await renderReport(sampleRun(), 'md');
    expect(md).toContain('| Baseline | 10 [seq 2] |');
    expect(md).toContain('| Best | 55 [seq 13–14] |');
    expect(md).toContain('| Failure class | **success** — best \\> baseline [seq 2, 14] |');
    expect(md).toContain('### Submission 2: sub-2 — score 55');
    expect(md).toContain('- Rollouts since the previous submission: 10 episodes, 50 steps, 1 batch, success rate 0.5 [seq 11]');
    expect(md).toContain('| 101 | training | `python code/train.py --grpo` | 10 s | 15 s | exit 0 after 5 s | [seq 10, 12] |');
    expect(md).toContain('```diff\n@@ -1,4 +1,5 @@\n import lib\n-lr = 0.1\n+lr = 0.01\n');
    expect(md).toMatch(/<svg [^\n]*aria-label="score trajectory"/);
  });

  it('HTML is self-contained: no scripts, no external stylesheets, images or links, content escaped', async () => {
    const html = await renderReport(sampleRun(), 'html');
    expect(html.startsWith('<!DOCTYPE html>')).toBe(true);
    expect(html).not.toMatch(/https?:|src=|<script|<link|<img|@import|url\(/i);
    expect(html.match(/href="([^"]*)"/g)!.every((h) => h.startsWith('href="#seq-'))).toBe(true);
    expect(html).toContain('<span class="add">+print(&quot;&lt;done&gt; &amp; ok&quot;)</span>');
    expect(html).toContain('<tr id="seq-14">');
    expect((html.match(/<svg /g) ?? []).length).toBe(2);
  });

  it('falls back to the analysis\'s line counts when a blob is missing, and renders a run with no submissions', async () => {
    const run = sampleRun();
    const doc = JSON.parse(await renderReport({ ...run, blobs: memoryBlobs([TRAIN_V1]) }, 'json'));
    expect(doc.submissions[1].code.files[0]).toMatchObject({ linesAdded: 2, linesRemoved: 1, hunks: [] });
    expect(doc.submissions[1].code.files[0].note).toMatch(/not in the artifact store/);
    const empty = { ...run, analysis: { ...run.analysis, submissions: [], best: null, improvement: null } };
    expect(await renderReport(empty, 'md')).toContain('The agent made no submission.');
  });

  it('counts lines with the same diff as the analysis derived from the events and blobs', async () => {
    const run = sampleRun();
    const analysis = await analyzeRun(run.events, run.blobs);
    const doc = JSON.parse(await renderReport({ ...run, analysis }, 'json'));
    const counts = [[[4, 0]], [[2, 1]]]; // TRAIN_V1 created (4 lines), then lr edited and a print appended
    expect(analysis.submissions.map((s) => s.codeChanges.map((c) => [c.linesAdded, c.linesRemoved]))).toEqual(counts);
    expect(doc.submissions.map((s: { code: { files: { linesAdded: number; linesRemoved: number }[] } }) => s.code.files.map((f) => [f.linesAdded, f.linesRemoved]))).toEqual(counts);
  });

  it('adds no integrity section to a run without integrity checks (reports of older runs stay byte-identical)', async () => {
    const run = sampleRun();
    expect(JSON.parse(await renderReport(run, 'json'))).not.toHaveProperty('integrity');
    for (const format of ['md', 'html'] as const) expect(await renderReport(run, format)).not.toMatch(/integrity|data\/models/i);
  });

  it('names the modified read-only paths in the header, an integrity section and the JSON form', async () => {
    const sha = (c: string) => c.repeat(64);
    const { run, seqs } = checkedRun({
      ok: false,
      differences: [
        { path: 'data/train.jsonl', expected: sha('a'), actual: sha('b') },
        { path: 'models/arith-base/weights.bin', expected: sha('c'), actual: null, found: 'symlink' },
      ],
      moreDifferences: 3,
    });
    const md = await renderReport(run, 'md');
    expect(md).toContain(`| Integrity | **failed** — read-only data/models modified: 5 paths [seq ${seqs[1]}] |`);
    expect(md).toContain(`## Integrity of data/ and models/\n\nread-only data/models modified: \`data/train.jsonl\`, \`models/arith-base/weights.bin\` and 3 paths counted but not listed [seq ${seqs[1]}]`);
    expect(md).toContain(`| \`models/arith-base/weights.bin\` | symlink instead of a file | cccccccccccc | symlink | [seq ${seqs[1]}] |`);
    expect(md).toContain(`| before grading sub-2 | stat, changed files hashed | 4 | unchanged | [seq ${seqs[0]}] |`);
    expect(md).toContain(`| end of run | every file hashed | 4 | 5 differences | [seq ${seqs[1]}] |`);
    expect(md).toMatch(new RegExp(`\\| ${seqs[1]} \\| [^|]+ \\| WorkspaceIntegrityChecked \\|`)); // cited
    const doc = JSON.parse(await renderReport(run, 'json'));
    expect(doc.integrity).toMatchObject({ ok: false, endChecked: true, unlisted: 3, evidence: seqs });
    expect(doc.integrity.modified.map((m: { path: string; change: string }) => [m.path, m.change])).toEqual([
      ['data/train.jsonl', 'changed'],
      ['models/arith-base/weights.bin', 'replaced'],
    ]);
    const html = await renderReport(run, 'html');
    expect(html).toContain('read-only data/models modified: <code>data/train.jsonl</code>');
  });

  it('says when data/ and models/ were found unchanged, and when no end-of-run check was recorded', async () => {
    const { run, seqs } = checkedRun({});
    const md = await renderReport(run, 'md');
    expect(md).toContain(`| Integrity | data/ and models/ unchanged (2 checks) [seq ${seqs[0]}–${seqs[1]}] |`);
    expect(md).not.toContain('modified');
    run.events.pop();
    const partial = await renderReport(run, 'md');
    expect(partial).toContain('unchanged (1 check, none at the end of the run)');
    expect(partial).toContain('No end-of-run check was recorded');
  });

  it('collapses consecutive seqs into ranges', () => {
    expect(seqRanges([9, 3, 4, 5, 11, 4])).toBe('3–5, 9, 11');
  });
});

describe('the process metrics’ evidence', () => {
  /** The sample run with its second training launch (seq 10, pid 101) given `pid`, and its exit (seq 12) replaced when `exited` is false. */
  function launches(pid: number, exited = true) {
    const base = sampleRun();
    const events = base.events.flatMap((e) => {
      if (e.type === 'ProcessStarted' && e.data.pid === 101) return [buildEvent(e.type, e.runId, e.seq, e.occurredAt, { ...e.data, pid })];
      if (e.type === 'ProcessExited' && e.data.pid === 101) return exited ? [buildEvent(e.type, e.runId, e.seq, e.occurredAt, { ...e.data, pid })] : [buildEvent('RolloutBatchRecorded', e.runId, e.seq, e.occurredAt, { env: 'fx/v1', episodes: 0, steps: 0, successRate: 0, meanReturn: 0, observedAt: e.occurredAt })];
      return [e];
    });
    return { ...base, events };
  }

  it('cites each training launch with the first exit of its pid after it', async () => {
    expect((await buildReport(launches(101))).metricsEvidence.total_training_time).toEqual([5, 6, 10, 12]);
    // pid 100 used again: its first exit (seq 6) comes before the second launch and is not that launch's
    expect((await buildReport(launches(100))).metricsEvidence.total_training_time).toEqual([5, 6, 10, 12]);
    expect((await buildReport(launches(101, false))).metricsEvidence.total_training_time).toEqual([5, 6, 10]);
  });
});

describe('a long citation', () => {
  it('shows every seq up to CITED_RUNS_SHOWN runs of consecutive seqs', () => {
    const seqs = Array.from({ length: CITED_RUNS_SHOWN }, (_, i) => 10 * i).concat([1, 2, 3]);
    expect(shownCitation(seqs)).toEqual({ head: [...new Set(seqs)].sort((a, b) => a - b), omitted: 0, tail: [] });
  });

  it('past that, the first and last half of the runs and how many seqs lie between', () => {
    const seqs = Array.from({ length: 1000 }, (_, i) => 4 * i).concat([5]); // 4 and 5 make one run
    const { head, omitted, tail } = shownCitation(seqs);
    expect(head).toEqual([0, 4, 5, ...Array.from({ length: 18 }, (_, i) => 8 + 4 * i)]);
    expect(tail).toEqual(Array.from({ length: 20 }, (_, i) => 4 * (980 + i)));
    expect(omitted).toBe(1001 - head.length - tail.length);
  });

  it('shows the same for its seqs in order, reversed or repeated, on either side of the cut', () => {
    for (const runs of [CITED_RUNS_SHOWN, CITED_RUNS_SHOWN + 1]) {
      const seqs = Array.from({ length: runs }, (_, i) => 3 * i).flatMap((s) => [s, s + 1]); // runs of two
      const shown = shownCitation(seqs);
      expect(shownCitation([...seqs].reverse().concat(seqs.slice(0, 5)))).toEqual(shown);
      expect(shown.omitted).toBe(runs > CITED_RUNS_SHOWN ? 2 : 0);
      expect(shown.head.length + shown.tail.length).toBe(2 * runs - shown.omitted);
    }
  });

  it('is cut in md and HTML, and the cited-events table lists only the seqs shown', async () => {
    const base = sampleRun();
    const exit = base.events.findIndex((e) => e.type === 'AgentExited');
    // 200 rollout batches while the second training process runs: the rollout_episodes metric cites them all.
    const batches = Array.from({ length: 200 }, (_, i) => ({ type: 'RolloutBatchRecorded', occurredAt: base.events[exit].occurredAt, data: { env: 'fx/v1', episodes: 1, steps: 5, successRate: 0, meanReturn: 0, observedAt: base.events[exit].occurredAt } }) as A2rlEvent);
    const events = [...base.events.slice(0, exit), ...batches, ...base.events.slice(exit)].map((e, seq) => buildEvent(e.type, base.analysis.runId, seq, e.occurredAt, e.data as never));
    const run = { analysis: await analyzeRun(events, base.blobs), events, blobs: base.blobs };
    const cited = (await buildReport(run)).metricsEvidence.rollout_episodes;
    expect(cited.length).toBe(201); // the sample's own batch and these, one run of consecutive seqs
    const md = await renderReport(run, 'md');
    expect(lineOf(md, '| `rollout_episodes` |')).toContain(`[seq ${seqRanges(cited)}]`); // consecutive: one range, shown whole

    // Every other one of them cited: 101 runs, cut.
    const sparse = events.filter((e) => e.type !== 'RolloutBatchRecorded' || e.seq % 2 === 0).map((e, seq) => buildEvent(e.type, e.runId, seq, e.occurredAt, e.data as never));
    const interleaved = sparse.flatMap((e) => (e.type === 'RolloutBatchRecorded' ? [e, { ...e, type: 'AgentOutput', data: { stream: 'stderr', chunk: { sha256: 'a'.repeat(64), size: 1, key: `sha256/aa/${'a'.repeat(64)}` }, observedAt: e.occurredAt } } as A2rlEvent] : [e]));
    const spread = interleaved.map((e, seq) => buildEvent(e.type, e.runId, seq, e.occurredAt, e.data as never));
    const run2 = { analysis: await analyzeRun(spread, base.blobs), events: spread, blobs: base.blobs };
    const all = (await buildReport(run2)).metricsEvidence.rollout_episodes;
    const { head, omitted, tail } = shownCitation(all);
    expect(omitted).toBeGreaterThan(0);
    const line = lineOf(await renderReport(run2, 'md'), '| `rollout_episodes` |')!;
    expect(line).toContain(`[seq ${seqRanges(head)}, … ${omitted} more …, ${seqRanges(tail)}]`);
    const table = (await renderReport(run2, 'md')).split('## Cited events')[1];
    const listed = (s: number) => table.includes(`\n| ${s} |`);
    expect(head.concat(tail).every(listed)).toBe(true);
    expect(all.filter((s) => !head.includes(s) && !tail.includes(s)).some(listed)).toBe(false);
    const html = await renderReport(run2, 'html');
    expect(html).toContain(`<a href="#seq-${head.at(-1)}">${head.at(-1)}</a>, … ${omitted} more …, <a href="#seq-${tail[0]}">${tail[0]}</a>`);
  });
});
