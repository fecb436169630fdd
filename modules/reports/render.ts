import type { ProcessMetrics } from '../../projections/run-analysis/analysis.types.js';
import type { A2rlEvent } from '../ledger/events/catalog.js';
import { canonicalJson } from '../ledger/events/canonical-json.js';
import { escapeXml, scoreChart, timelineChart } from './charts.js';
import { inertText } from './inert-text.js';
import { buildReport, REPORT_TEXT_LIMIT, TIMELINE_LANE_ITEMS, type FileChangeReport, type ProcessReport, type ReportInput, type RunReport, type SubmissionReport } from './report-model.js';
import { changePhrase, type WorkspaceIntegrity } from '../../projections/run-analysis/integrity.js';
import type { LlmAnalysis, LlmStats } from '../../projections/run-analysis/analysis.types.js';
import { isGenerating, type Transcript, type TranscriptEntry } from '../../projections/transcript/transcript.js';

/**
 * Run reports in three formats from one structured report (report-model.ts). Markdown and HTML are
 * serialisations of the same small document tree, so both say the same things and cite the same
 * events. Pure: no clock, fixed number formatting, stable ordering → same input, same bytes.
 */
export type ReportFormat = 'md' | 'json' | 'html';
export const REPORT_FORMATS: readonly ReportFormat[] = ['md', 'json', 'html'];

/**
 * The renderer's version: bump it whenever the same events render to other bytes (here, in
 * report-model.ts, charts.ts or the run-analysis projection). Audit bundles record it, and
 * `a2rl verify-bundle` re-renders and compares only a bundle's reports of this version; the digests
 * in modules/audit/bundle/renderer-version.spec.ts fail a change of bytes without a bump.
 */
export const REPORT_RENDERER = 'a2rl.report/4';

/** `long`: a recorded value that may run to kilobytes (an argv with a script): cut in md with the event to read it whole, collapsed in HTML. */
type Inline = string | { code: string } | { cite: number[] } | { strong: string } | { long: string; seq: number };

/** Characters of a long value shown in md (and in the summary of its collapsed HTML form). */
export const LONG_VALUE_CHARS = 200;
type Block =
  | { kind: 'heading'; level: 1 | 2 | 3; text: Inline[] }
  | { kind: 'para'; text: Inline[] }
  | { kind: 'list'; items: Inline[][] }
  | { kind: 'table'; head: string[]; rows: Inline[][][] }
  | { kind: 'diff'; lines: string[] }
  | { kind: 'svg'; svg: string }
  /** A finding to see first (a driver mismatch): a quote in Markdown, a marked paragraph in HTML. */
  | { kind: 'alert'; text: Inline[] }
  /** Text shown as it is (transcript texts). */
  | { kind: 'pre'; lines: string[] }
  /** Collapsed in HTML (<details>); in Markdown the summary, then the blocks. */
  | { kind: 'details'; summary: Inline[]; blocks: Block[] };

export async function renderReport(input: ReportInput, format: ReportFormat): Promise<string> {
  return renderBuiltReport(await buildReport(input), input.events, format);
}

/** A report already built from `events` (buildReport), in one format: verify renders one report in every format. */
export function renderBuiltReport(report: RunReport, events: readonly A2rlEvent[], format: ReportFormat): string {
  if (format === 'json') return `${canonicalJson(report)}\n`;
  const blocks = documentOf(report, events);
  // Markdown is read in terminals and editors as often as rendered: recorded data in it is shown inert.
  if (format === 'md') return inertText(`${blocks.map(markdownBlock).join('\n\n')}\n`);
  if (format === 'html') return html(report, blocks);
  throw new RangeError(`unknown report format "${String(format)}" (expected ${REPORT_FORMATS.join(', ')})`);
}

/** Numbers with at most `digits` decimals, trailing zeros trimmed; null → "n/a". */
export function fmt(n: number | null, digits = 2): string {
  if (n === null) return 'n/a';
  const text = n.toFixed(digits).replace(/\.?0+$/, '');
  return text === '-0' ? '0' : text;
}

/** Consecutive seqs collapse into ranges: [3, 4, 5, 9] → "3–5, 9". */
export function seqRanges(seqs: readonly number[]): string {
  return runsOf(seqs)
    .map(([from, to]) => (to > from ? `${from}–${to}` : `${from}`))
    .join(', ');
}

/** The seqs sorted, each once: the array itself when it already is (a report's citations mostly are). */
function sortedSeqs(seqs: readonly number[]): readonly number[] {
  for (let i = 1; i < seqs.length; i++) if (seqs[i - 1] >= seqs[i]) return [...new Set(seqs)].sort((a, b) => a - b);
  return seqs;
}

/** Whether the i-th of sorted unique seqs starts a run of consecutive ones. */
const startsRun = (sorted: readonly number[], i: number) => i === 0 || sorted[i] !== sorted[i - 1] + 1;

/** Where the n-th run (from 1) of sorted unique seqs starts; their length when there are fewer runs. */
function nthRunStart(sorted: readonly number[], n: number): number {
  for (let i = 0; i < sorted.length; i++) if (startsRun(sorted, i) && --n === 0) return i;
  return sorted.length;
}

/** Where the n-th run (from 1) counted from the end starts; 0 when there are fewer runs. */
function nthRunStartFromEnd(sorted: readonly number[], n: number): number {
  for (let i = sorted.length - 1; i >= 0; i--) if (startsRun(sorted, i) && --n === 0) return i;
  return 0;
}

/** The seqs as sorted runs of consecutive numbers, [first, last] each. */
function runsOf(seqs: readonly number[]): Array<[number, number]> {
  const sorted = sortedSeqs(seqs);
  const runs: Array<[number, number]> = [];
  for (let i = 0; i < sorted.length; ) {
    let j = i;
    while (j + 1 < sorted.length && sorted[j + 1] === sorted[j] + 1) j++;
    runs.push([sorted[i], sorted[j]]);
    i = j + 1;
  }
  return runs;
}

/** Runs of seqs a citation shows at most: the first and the last half of them. */
export const CITED_RUNS_SHOWN = 40;

/**
 * What a citation shows in md and HTML: its seqs, or, past CITED_RUNS_SHOWN runs of consecutive
 * seqs, those of the first and the last CITED_RUNS_SHOWN / 2 runs and how many seqs lie between.
 * A long run's metric can cite 10^5 events; listing them all (and each in the cited-events table)
 * made a 1M-event run's Markdown report 40 MB. The JSON report keeps every seq. Found by counting
 * where runs start, without building the runs of a long citation.
 */
export function shownCitation(seqs: readonly number[]): { head: number[]; omitted: number; tail: number[] } {
  const sorted = sortedSeqs(seqs);
  if (nthRunStart(sorted, CITED_RUNS_SHOWN + 1) === sorted.length) return { head: [...sorted], omitted: 0, tail: [] };
  const half = CITED_RUNS_SHOWN / 2;
  const [head, tail] = [sorted.slice(0, nthRunStart(sorted, half + 1)), sorted.slice(nthRunStartFromEnd(sorted, half))];
  return { head, omitted: sorted.length - head.length - tail.length, tail };
}

const plural = (n: number, one: string, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;
const secs = (s: number | null) => (s === null ? 'n/a' : `${fmt(s, 1)} s`);
const shortSha = (sha: string | null) => (sha ? sha.slice(0, 12) : 'none');

function header(r: RunReport): Block[] {
  const { run, scores } = r;
  const scheduled = run.evidence.scheduled;
  const row = (label: string, ...value: Inline[]): Inline[][] => [[label], value];
  return [
    { kind: 'heading', level: 1, text: [`Run report: ${run.runId}`] },
    {
      kind: 'table',
      head: ['', ''],
      rows: [
        row('Task', { code: run.task ?? 'unknown' }, run.level === null ? '' : ` (level L${run.level})`, ' ', { cite: scheduled }),
        row('Agent', { code: run.agent ?? 'unknown' }, ' ', { cite: scheduled }),
        ...(r.llm ? llmRows(r, r.llm) : [row('Driver', { code: run.driver ?? 'unknown' }, ' ', { cite: scheduled })]),
        row('Base model', { code: run.baseModel ?? 'unknown' }, `, mode ${run.mode ?? 'n/a'} `, { cite: scheduled }),
        row('Budget', secs(run.budgetSeconds), ' ', { cite: scheduled }),
        row('Baseline', fmt(scores.baseline), ' ', { cite: scores.baselineEvidence }),
        row('Best', fmt(scores.best), ' ', { cite: scores.bestEvidence }),
        row('Improvement', fmt(scores.improvement), ' ', { cite: [...scores.baselineEvidence, ...scores.bestEvidence] }),
        row('Failure class', { strong: r.failure.class }, ` — ${r.failure.rule} `, { cite: r.failure.evidence }),
        row('Route', { strong: r.route.best }, ` (declared ${r.route.declared}) `, { cite: r.route.evidence }),
        row(
          'Run',
          `${run.state ?? 'unknown'}, ${secs(run.durationS)}, agent ${run.exitReason ?? 'n/a'}, sandbox ${run.sandbox ?? 'n/a'}, ${run.eventCount} events `,
          { cite: run.evidence.lifecycle },
        ),
        ...(run.interruptions ? [interruptionsRow(run.interruptions)] : []),
        row('Workspace', { code: run.workspace ?? 'unknown' }, ' ', { cite: run.evidence.workspace }),
        ...(r.integrity ? [row('Integrity', ...integritySummary(r.integrity))] : []),
        ...(r.envCopy ? [row('Own environment', { strong: 'flagged' }, ` — ${[...new Set(r.envCopy.signals.map((s) => s.rule))].join(', ')}: episodes played outside /env are not recorded `, { cite: r.envCopy.evidence })] : []),
      ],
    },
    ...(r.run.driverMismatch ? [mismatchAlert(r)] : []),
  ];
}

/** A resumed run is one run: how often its harness was lost, the downtime (not agent time), and agent time the record cannot show. */
function interruptionsRow(i: NonNullable<RunReport['run']['interruptions']>): Inline[][] {
  const unknown = i.list.filter((x) => x.unrecordedS === null).length;
  const unrecorded = `${secs(i.unrecordedS)} of agent time after the last recorded fact${unknown ? ` (unknown for ${unknown})` : ''}`;
  return [
    ['Interruptions'],
    [
      { strong: `harness lost ${i.count}×, resumed ${i.resumed}×` },
      ` — down ${secs(i.downtimeS)} (not counted against the budget); ${unrecorded} `,
      { cite: i.list.flatMap((x) => (x.resumedSeq === null ? [x.interruptedSeq] : [x.interruptedSeq, x.resumedSeq])) },
    ],
  ];
}

// ---- model calls (LLM-driven runs only: reports of other runs are as they were) ----

/** Integers with thousands separators: 12345 → "12,345". */
export const thousands = (n: number) => String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ',');
const firstLast = (seqs: readonly number[]) => (seqs.length ? [seqs[0], seqs[seqs.length - 1]] : []);
/** A cost: unknown (null), a sum of known costs marked as a lower bound when some calls have no price. */
export const usd = (s: Pick<LlmStats, 'costUsd' | 'callsWithoutCost'>) =>
  s.costUsd === null ? 'unknown' : `${s.callsWithoutCost ? '≥ ' : ''}$${fmt(s.costUsd, 6)}${s.callsWithoutCost ? ` (${plural(s.callsWithoutCost, 'call')} without a price)` : ''}`;
const millis = (ms: number | null) => (ms === null ? 'n/a' : `${fmt(ms / 1000, 2)} s`);
const errorsOf = (errors: Record<string, number>) => Object.entries(errors).map(([outcome, n]) => `${outcome}×${n}`).join(', ') || 'none';

function llmRows(r: RunReport, llm: LlmAnalysis): Inline[][][] {
  const top = llm.models[0];
  const scheduled = r.run.evidence.scheduled;
  const declared = r.run.declaredDriver ?? null;
  const used = top !== undefined && top.billableCalls > 0;
  const driver: Inline[] = !used
    ? [{ code: r.run.driver ?? 'unknown' }, ` (declared; the calls show no model) `, { cite: scheduled }]
    : r.run.driverMismatch
      ? [{ code: top.model }, ' used by the model calls — ', { strong: 'driver mismatch' }, ': declared ', { code: declared ?? '' }, ' ', { cite: [...scheduled, ...firstLast(top.evidence)] }]
      : [{ code: top.model }, ` (${plural(top.billableCalls, 'model call')} of ${llm.totals.billableCalls}${declared === null ? ', none declared' : `, declared ${declared}`}) `, { cite: [...scheduled, ...firstLast(top.evidence)] }];
  const t = llm.totals;
  return [
    [['Driver'], driver],
    [['Model calls'], [`${plural(t.calls, 'call')}, ${plural(t.turns, 'turn')}, ${thousands(t.inputTokens)} input / ${thousands(t.outputTokens)} output tokens, cost ${usd(t)}${Object.keys(t.errors).length ? `, failed: ${errorsOf(t.errors)}` : ''} `, { cite: firstLast(llm.evidence) }]],
  ];
}

function mismatchAlert(r: RunReport): Block {
  const top = r.llm!.models[0];
  return {
    kind: 'alert',
    text: [
      { strong: 'Driver mismatch:' }, ' the run was scheduled with driver ', { code: r.run.declaredDriver ?? '' }, ', but the agent\'s model calls went to ', { code: top.model },
      ` (${plural(top.billableCalls, 'model call')} of ${r.llm!.totals.billableCalls}). The scoreboard counts this run under ${top.model}. `, { cite: [...r.run.evidence.scheduled, ...firstLast(top.evidence)] },
    ],
  };
}

function llmBlocks(llm: LlmAnalysis): Block[] {
  const blocks: Block[] = [{ kind: 'heading', level: 2, text: ['Model calls'] }];
  blocks.push({
    kind: 'para',
    text: llm.gateway
      ? [`Through the run's LLM gateway for ${llm.gateway.providers.join(', ')} (`, { code: llm.gateway.url }, ' in the sandbox). ', { cite: llm.gateway.evidence }]
      : ['Model calls were recorded for an agent started without a gateway.'],
  });
  if (!llm.models.length) {
    blocks.push({ kind: 'para', text: ['The gateway recorded no model call: the agent never reached its model.'] });
    return blocks;
  }
  const cells = (label: Inline[], s: LlmStats, cite: number[]): Inline[][] => [
    label, [String(s.calls)], [String(s.turns)], [thousands(s.inputTokens)], [thousands(s.outputTokens)], [`${thousands(s.cacheReadTokens)} / ${thousands(s.cacheWriteTokens)}`],
    [usd(s)], [errorsOf(s.errors)], [millis(s.latencyP50Ms)], [millis(s.ttftP50Ms)], [{ cite }],
  ];
  blocks.push({
    kind: 'table',
    head: ['model', 'calls', 'turns', 'input tokens', 'output tokens', 'cache read / write', 'cost (USD)', 'failed', 'latency p50', 'ttft p50', 'first/last call'],
    rows: [...llm.models.map((m) => cells([{ code: m.model }], m, firstLast(m.evidence))), cells(['all models'], llm.totals, firstLast(llm.evidence))],
  });
  blocks.push({
    kind: 'para',
    text: [`Costs from the price table ${llm.priceTables.join(', ')}; a model missing from it has no cost (unknown, not 0). Turns are the answered calls of the agent's tool loop; latency and time to first token are medians over answered calls.`],
  });
  return blocks;
}

function entryLabel(e: TranscriptEntry): string {
  if (e.role === 'turn') return `Turn ${e.turn}`;
  if (e.role === 'failed') return `Failed call (${e.outcome})`;
  return isGenerating(e) ? 'Side call' : `Side call (${e.api})`;
}

function entryBlocks(e: TranscriptEntry): Block[] {
  const u = e.usage;
  const tokens = `${u.inputTokens === null ? '?' : thousands(u.inputTokens)} in / ${u.outputTokens === null ? '?' : thousands(u.outputTokens)} out`;
  const blocks: Block[] = [
    {
      kind: 'para',
      text: [{ strong: entryLabel(e) }, ' ', { code: e.model ?? 'unknown' }, ` · ${tokens} · ${e.status} ${e.outcome}${e.answer.stopReason ? ` (${e.answer.stopReason})` : ''} · ${millis(e.latencyMs)} `, { cite: [e.seq] }],
    },
  ];
  const text = (label: Inline[], body: string) => blocks.push({ kind: 'para', text: label }, { kind: 'pre', lines: body.split('\n') });
  if (e.request.userText !== null) text(['Prompt:'], e.request.userText);
  for (const r of e.request.toolResults) text(['Tool result', ...(r.name ?? r.id ? [' ', { code: (r.name ?? r.id)! }] : []), r.isError ? ' (error):' : ':'], r.output);
  if (e.answer.text !== null) text(['Answer:'], e.answer.text);
  for (const c of e.answer.toolCalls) text(['Tool call ', { code: c.name }, ':'], c.input);
  if (e.error) blocks.push({ kind: 'para', text: [`Error: ${e.error}`] });
  return blocks;
}

function transcriptBlocks(t: Transcript, runId: string): Block[] {
  const n = t.totals;
  const summary: Inline[] = [
    `${plural(n.turns, 'turn')}, ${plural(n.calls, 'call')} (${n.sideCalls} on the side, ${n.failedCalls} failed), ${plural(n.toolCalls, 'tool call')}; texts cut at ${REPORT_TEXT_LIMIT} characters, the whole transcript: `,
    { code: `a2rl transcript ${runId}` },
  ];
  return [
    { kind: 'heading', level: 2, text: ['Transcript'] },
    n.calls ? { kind: 'details', summary, blocks: t.entries.flatMap(entryBlocks) } : { kind: 'para', text: ['No model call was recorded.'] },
  ];
}

const checkLabel = (c: WorkspaceIntegrity['checks'][number]) => (c.phase === 'end' ? 'end of run' : c.phase === 'resume' ? 'on resume' : `before grading${c.submissionId ? ` ${c.submissionId}` : ''}`);

function integritySummary(i: WorkspaceIntegrity): Inline[] {
  const checks = plural(i.checks.length, 'check');
  if (i.ok) return [`data/ and models/ unchanged (${checks}${i.endChecked ? '' : ', none at the end of the run'}) `, { cite: i.evidence }];
  const paths = i.modified.length + i.unlisted;
  return [{ strong: 'failed' }, ` — read-only data/models modified: ${plural(paths, 'path')} `, { cite: i.checks.filter((c) => !c.ok).map((c) => c.seq) }];
}

/** Present only for runs that recorded WorkspaceIntegrityChecked (older reports stay as they were). */
function integrityBlocks(i: WorkspaceIntegrity): Block[] {
  const blocks: Block[] = [{ kind: 'heading', level: 2, text: ['Integrity of data/ and models/'] }];
  if (i.ok) blocks.push({ kind: 'para', text: [`Every check found data/ and models/ as WorkspacePrepared recorded them. `, { cite: i.evidence }] });
  else {
    const named: Inline[] = i.modified.flatMap((m, k) => [...(k ? [', '] : []), { code: m.path }]);
    const more = i.unlisted ? [` and ${plural(i.unlisted, 'path')} counted but not listed`] : [];
    blocks.push(
      { kind: 'para', text: ['read-only data/models modified: ', ...named, ...more, ' ', { cite: i.checks.filter((c) => !c.ok).map((c) => c.seq) }] },
      {
        kind: 'table',
        head: ['path', 'change', 'expected', 'found', 'events'],
        rows: i.modified.map((m) => [[{ code: m.path }], [changePhrase(m)], [shortSha(m.expected)], [m.actual ? shortSha(m.actual) : (m.found ?? 'none')], [{ cite: m.evidence }]]),
      },
    );
  }
  if (!i.endChecked) blocks.push({ kind: 'para', text: ['No end-of-run check was recorded: only the checks before gradings, which re-hash only files whose stat changed since the last hash.'] });
  blocks.push({
    kind: 'table',
    head: ['check', 'method', 'paths compared', 'result', 'events'],
    rows: i.checks.map((c) => [[checkLabel(c)], [c.full ? 'every file hashed' : 'stat, changed files hashed'], [String(c.checked)], [c.ok ? 'unchanged' : plural(c.differences, 'difference')], [{ cite: [c.seq] }]]),
  });
  return blocks;
}

function fileBlocks(f: FileChangeReport): Block[] {
  const blocks: Block[] = [
    { kind: 'para', text: [{ code: f.path }, ` ${f.op}, +${f.linesAdded} −${f.linesRemoved} (${shortSha(f.fromSha256)} → ${shortSha(f.toSha256)}) `, { cite: f.evidence }] },
  ];
  if (f.note) blocks.push({ kind: 'para', text: [f.note] });
  const lines = f.hunks.flatMap((h) => [h.header, ...h.lines, ...(h.truncatedLines ? [`… ${h.truncatedLines} more lines in this hunk`] : [])]);
  if (f.omittedHunks) lines.push(`… ${f.omittedHunks} more hunks`);
  if (lines.length) blocks.push({ kind: 'diff', lines });
  return blocks;
}

function submissionBlocks(s: SubmissionReport): Block[] {
  const verdict = s.status === 'graded' ? `score ${fmt(s.score)}${s.valid ? '' : ' (not valid)'}` : `rejected: ${s.rejectedReason ?? 'unknown reason'}`;
  const facts: Inline[][] = [
    [`Submitted at ${secs(s.atS)}, ${secs(s.sincePreviousS)} after the ${s.index === 1 ? 'agent started' : 'previous submission'} `, { cite: [s.evidence[0]] }],
    ['Model path ', { code: s.modelPath ?? 'n/a' }, `, checkpoint ${shortSha(s.checkpointSha256)}`, s.isCopyOfBase ? ', identical to the base model' : '', s.duplicateOf ? `, duplicate of ${s.duplicateOf}` : '', ' ', { cite: [s.evidence[0]] }],
    [`Result: ${verdict} `, { cite: s.evidence }],
    [`Route: executed ${s.route.executed}, declared ${s.route.declared} `, { cite: s.route.evidence }],
    [
      `Rollouts since the previous submission: ${plural(s.rollouts.episodes, 'episode')}, ${plural(s.rollouts.steps, 'step')}, ${plural(s.rollouts.batches, 'batch', 'batches')}, success rate ${fmt(s.rollouts.successRate)} `,
      { cite: s.rollouts.evidence },
    ],
    [`Code changes: ${plural(s.code.files.length, 'file')}, +${s.code.linesAdded} −${s.code.linesRemoved}`],
    ...(s.outcome ? [outcomeLink(s.outcome, s.submissionId)] : []),
  ];
  const blocks: Block[] = [
    { kind: 'heading', level: 3, text: [`Submission ${s.index}: ${s.submissionId} — ${verdict}`] },
    { kind: 'list', items: facts },
    ...s.code.files.flatMap(fileBlocks),
  ];
  if (s.processes.length) {
    blocks.push({
      kind: 'table',
      head: ['pid', 'kind', 'command', 'started', 'ended', 'outcome', 'events'],
      rows: s.processes.map((p) => [
        [String(p.pid)],
        [p.kind],
        [{ long: p.argv.join(' '), seq: p.evidence[0] }],
        [secs(p.startS)],
        [secs(p.endS)],
        [p.endS === null ? 'no exit recorded' : p.signal ? `signal ${p.signal}` : `exit ${p.exitCode ?? 'unknown'} after ${secs(p.durationS)}`],
        [{ cite: p.evidence }],
      ]),
    });
    const started = s.processes.filter((p) => p.startedBy);
    if (started.length) blocks.push({ kind: 'list', items: started.map(startedByLink) });
  } else {
    blocks.push({ kind: 'para', text: ['No processes launched since the previous submission.'] });
  }
  return blocks;
}

/** "Graded submission s-3 (seq 41)": the grading followed to the SubmissionReceived it names. */
function outcomeLink(o: NonNullable<SubmissionReport['outcome']>, submissionId: string): Inline[] {
  return [`${o.type === 'SubmissionGraded' ? 'Graded' : 'Rejected'} submission ${o.causedBy.submissionId ?? submissionId} (seq ${o.causedBy.seq}) `, { cite: [o.seq, o.causedBy.seq] }];
}

/** A process followed to the model call whose tool call started it, with the evidence of the match. */
function startedByLink(p: ProcessReport): Inline[] {
  const by = p.startedBy!;
  const tool = by.toolCallId ? ` (tool call ${by.toolCallId}${by.command ? ': ' : ')'}` : '';
  return [
    `pid ${p.pid} was started by the model call at seq ${by.seq}${tool}`,
    ...(by.toolCallId && by.command ? [{ code: by.command }, ') '] : [' ']),
    { cite: [p.evidence[0], by.seq] },
  ];
}

/** What reached a limit (its causedBy), after the harness's action; nothing for limits recorded without one. */
function limitCause(l: NonNullable<RunReport['limits']>[number]): Inline[] {
  if (!l.causedBy) return [];
  const { pid, submissionId, toolCallId, seq } = l.causedBy;
  const by = pid !== undefined ? `pid ${pid} ` : submissionId ? `submission ${submissionId} ` : toolCallId ? `tool call ${toolCallId} ` : '';
  return [`; reached by ${by}(seq ${seq}) `, { cite: [seq] }];
}

/** Limits reached, and overruns: a value past its maximum (calls in flight when a cap was reached). */
function limitBlocks(limits: NonNullable<RunReport['limits']>): Block[] {
  const overruns = limits.filter((l) => l.over > 0);
  return [
    { kind: 'heading', level: 2, text: ['Limits and overruns'] },
    {
      kind: 'para',
      text: [
        `${plural(limits.length, 'limit')} reached`,
        overruns.length ? [`; ${plural(overruns.length, 'overrun')}: `, { strong: overruns.map((l) => `${l.limit} ${thousands(l.value)} of ${thousands(l.max)} (+${thousands(l.over)})`).join(', ') }, ' '] : ['. '],
        { cite: limits.map((l) => l.seq) },
      ].flat() as Inline[],
    },
    {
      kind: 'table',
      head: ['limit', 'value', 'maximum', 'over by', 'scope', 'what the harness did', 'event'],
      rows: limits.map((l) => [[{ code: l.limit }], [thousands(l.value)], [thousands(l.max)], [l.over ? thousands(l.over) : '—'], [l.scope === null ? '—' : { long: l.scope, seq: l.seq }], [l.action, ...limitCause(l)], [{ cite: [l.seq] }]]),
    },
  ];
}

/** The end of each output stream, fenced (md) or preformatted (HTML): bounded, with the command that prints all of it. */
function outputBlocks(o: NonNullable<RunReport['output']>, runId: string): Block[] {
  const blocks: Block[] = [
    { kind: 'heading', level: 2, text: ['Agent output'] },
    { kind: 'para', text: [`${plural(o.chunks, 'chunk')}, ${thousands(o.bytes)} bytes recorded; the end of each stream is shown, all of it: `, { code: `a2rl logs ${runId}` }] },
  ];
  for (const s of o.streams) {
    blocks.push({
      kind: 'para',
      text: [{ strong: s.stream }, `: ${plural(s.chunks, 'chunk')}, ${thousands(s.bytes)} bytes${s.cut ? ', the last lines' : ''}${s.missing ? ` (${plural(s.missing, 'chunk')} not in the artifact store)` : ''} `, { cite: s.evidence }],
    });
    blocks.push({ kind: 'pre', lines: s.tail.replace(/\n$/, '').split('\n') });
  }
  return blocks;
}

function metricValue(v: ProcessMetrics[keyof ProcessMetrics]): string {
  if (Array.isArray(v)) return v.length ? v.map((n) => fmt(n)).join(', ') : '(none)';
  return typeof v === 'number' ? fmt(v, 3) : 'n/a';
}

/** Says which timeline lanes show only part of their items (report-model.ts thinTimeline). */
function thinnedNote(thinned: RunReport['timeline']['thinned']): Block[] {
  const lanes = Object.entries(thinned ?? {}).map(([lane, t]) => `${lane} ${t.shown} of ${t.of}`);
  if (!lanes.length) return [];
  return [{ kind: 'para', text: [`Timeline lanes with more than ${TIMELINE_LANE_ITEMS} items show ${TIMELINE_LANE_ITEMS}, evenly spaced: ${lanes.join(', ')}. Every item's event is in the ledger.`] }];
}

function documentOf(r: RunReport, events: readonly A2rlEvent[]): Block[] {
  const keys = Object.keys(r.metrics).sort() as (keyof ProcessMetrics)[];
  const cited = new Set<number>();
  const blocks: Block[] = [
    ...header(r),
    ...(r.integrity ? integrityBlocks(r.integrity) : []),
    { kind: 'heading', level: 2, text: ['Score trajectory'] },
    { kind: 'svg', svg: scoreChart(r) },
    { kind: 'heading', level: 2, text: ['Timeline'] },
    { kind: 'svg', svg: timelineChart(r) },
    ...thinnedNote(r.timeline.thinned),
    { kind: 'heading', level: 2, text: [`Submissions (${r.submissions.length})`] },
    ...(r.submissions.length ? r.submissions.flatMap(submissionBlocks) : [{ kind: 'para', text: ['The agent made no submission.'] } as Block]),
    { kind: 'heading', level: 2, text: ['Process metrics'] },
    { kind: 'table', head: ['metric', 'value', 'events'], rows: keys.map((k) => [[{ code: k }], [metricValue(r.metrics[k])], [{ cite: r.metricsEvidence[k] }]]) },
    ...(r.limits ? limitBlocks(r.limits) : []),
    ...(r.llm ? llmBlocks(r.llm) : []),
    ...(r.transcript ? transcriptBlocks(r.transcript, r.run.runId) : []),
    ...(r.output ? outputBlocks(r.output, r.run.runId) : []),
  ];
  const visit = (parts: Inline[]) =>
    parts.forEach((p) => {
      if (typeof p !== 'object' || !('cite' in p)) return;
      const { head, tail } = shownCitation(p.cite);
      for (const s of head) cited.add(s);
      for (const s of tail) cited.add(s);
    });
  const visitBlock = (b: Block): void => {
    if (b.kind === 'heading' || b.kind === 'para' || b.kind === 'alert') visit(b.text);
    if (b.kind === 'list') b.items.forEach(visit);
    if (b.kind === 'table') b.rows.forEach((row) => row.forEach(visit));
    if (b.kind === 'details') {
      visit(b.summary);
      b.blocks.forEach(visitBlock);
    }
  };
  blocks.forEach(visitBlock);
  const citedEvents = events.filter((e) => cited.has(e.seq));
  blocks.push(
    { kind: 'heading', level: 2, text: ['Cited events'] },
    { kind: 'table', head: ['seq', 'occurred at', 'type'], rows: citedEvents.map((e) => [[String(e.seq)], [e.occurredAt], [e.type]]) },
  );
  return blocks;
}

// ---- Markdown ----

function mdCode(text: string): string {
  const flat = text.replace(/(\r?\n)+/g, ' '); // a lone CR is left for inertText to show
  const longest = Math.max(0, ...(flat.match(/`+/g) ?? []).map((m) => m.length));
  const fence = '`'.repeat(longest + 1);
  return longest ? `${fence} ${flat} ${fence}` : `${fence}${flat}${fence}`;
}

/** Text with its Markdown syntax escaped; an `&` that would start a character reference (`&#x202e;`) too. */
function mdText(text: string): string {
  return text.replace(/(\r?\n)+/g, ' ').replace(/([\\`*_[\]<>|])/g, '\\$1').replace(/&(?=#?\w+;)/g, '\\&');
}

function mdInline(parts: Inline[]): string {
  return parts
    .map((p) => {
      if (typeof p === 'string') return mdText(p);
      if ('code' in p) return mdCode(p.code).replace(/\|/g, '\\|');
      if ('strong' in p) return `**${mdText(p.strong)}**`;
      if ('long' in p) {
        const cut = p.long.length > LONG_VALUE_CHARS;
        const code = mdCode(cut ? p.long.slice(0, LONG_VALUE_CHARS) : p.long).replace(/\|/g, '\\|');
        return cut ? `${code} … (${p.long.length - LONG_VALUE_CHARS} more characters: \`a2rl events\` seq ${p.seq})` : code;
      }
      if (!p.cite.length) return '';
      const { head, omitted, tail } = shownCitation(p.cite);
      return omitted ? `[seq ${seqRanges(head)}, … ${thousands(omitted)} more …, ${seqRanges(tail)}]` : `[seq ${seqRanges(head)}]`;
    })
    .join('')
    .trim();
}

function markdownBlock(b: Block): string {
  switch (b.kind) {
    case 'heading':
      return `${'#'.repeat(b.level)} ${mdInline(b.text)}`;
    case 'para':
      return mdInline(b.text);
    case 'list':
      return b.items.map((item) => `- ${mdInline(item)}`).join('\n');
    case 'table': {
      const line = (cells: string[]) => `| ${cells.join(' | ')} |`;
      return [line(b.head), line(b.head.map(() => '---')), ...b.rows.map((row) => line(row.map(mdInline)))].join('\n');
    }
    case 'diff': {
      const longest = Math.max(0, ...b.lines.flatMap((l) => l.match(/`+/g) ?? []).map((m) => m.length));
      const fence = '`'.repeat(Math.max(3, longest + 1));
      return `${fence}diff\n${b.lines.join('\n')}\n${fence}`;
    }
    case 'svg':
      // The charts have no line breaks of their own: one from recorded data (an argv in a <title>)
      // would end the HTML block and let the rest be read as Markdown.
      return b.svg.replace(/\n/g, '&#10;').replace(/\r/g, '&#13;');
    case 'alert':
      return `> ${mdInline(b.text)}`;
    case 'pre': {
      const longest = Math.max(0, ...b.lines.flatMap((l) => l.match(/`+/g) ?? []).map((m) => m.length));
      const fence = '`'.repeat(Math.max(3, longest + 1));
      return `${fence}text\n${b.lines.join('\n')}\n${fence}`;
    }
    case 'details':
      return [mdInline(b.summary), ...b.blocks.map(markdownBlock)].join('\n\n');
  }
}

// ---- HTML ----

function htmlInline(parts: Inline[]): string {
  return parts
    .map((p) => {
      if (typeof p === 'string') return escapeXml(p);
      if ('code' in p) return `<code>${escapeXml(p.code)}</code>`;
      if ('strong' in p) return `<strong>${escapeXml(p.strong)}</strong>`;
      if ('long' in p) {
        if (p.long.length <= LONG_VALUE_CHARS) return `<code>${escapeXml(p.long)}</code>`;
        return `<details class="long"><summary><code>${escapeXml(p.long.slice(0, LONG_VALUE_CHARS))}</code>… (${p.long.length} characters)</summary><pre class="text">${escapeXml(p.long)}</pre></details>`;
      }
      if (!p.cite.length) return '';
      const { head, omitted, tail } = shownCitation(p.cite);
      const links = (seqs: number[]) => seqs.map((s) => `<a href="#seq-${s}">${s}</a>`).join(', ');
      return `<span class="cite">[seq ${links(head)}${omitted ? `, … ${thousands(omitted)} more …, ${links(tail)}` : ''}]</span>`;
    })
    .join('')
    .trim();
}

function htmlBlock(b: Block): string {
  switch (b.kind) {
    case 'heading':
      return `<h${b.level}>${htmlInline(b.text)}</h${b.level}>`;
    case 'para':
      return `<p>${htmlInline(b.text)}</p>`;
    case 'list':
      return `<ul>${b.items.map((item) => `<li>${htmlInline(item)}</li>`).join('')}</ul>`;
    case 'table': {
      const cited = b.head[0] === 'seq';
      const head = b.head.some((h) => h) ? `<thead><tr>${b.head.map((h) => `<th>${escapeXml(h)}</th>`).join('')}</tr></thead>` : '';
      const rows = b.rows.map((row) => `<tr${cited ? ` id="seq-${row[0][0] as string}"` : ''}>${row.map((cell) => `<td>${htmlInline(cell)}</td>`).join('')}</tr>`);
      return `<table>${head}<tbody>${rows.join('')}</tbody></table>`;
    }
    case 'diff':
      return `<pre class="diff">${b.lines.map((l) => `<span class="${l.startsWith('+') ? 'add' : l.startsWith('-') ? 'del' : l.startsWith('@@') ? 'hunk' : 'ctx'}">${escapeXml(l)}</span>`).join('\n')}</pre>`;
    case 'svg':
      return `<figure>${b.svg}</figure>`;
    case 'alert':
      return `<p class="alert">${htmlInline(b.text)}</p>`;
    case 'pre':
      return `<pre class="text">${escapeXml(b.lines.join('\n'))}</pre>`;
    case 'details':
      return `<details><summary>${htmlInline(b.summary)}</summary>\n${b.blocks.map(htmlBlock).join('\n')}\n</details>`;
  }
}

const STYLE = [
  'body{font-family:sans-serif;max-width:1000px;margin:2em auto;padding:0 1em;color:#222}',
  'table{border-collapse:collapse;margin:0.5em 0}td,th{border:1px solid #ccc;padding:2px 6px;text-align:left;vertical-align:top}',
  'code{background:#f4f4f4;padding:0 2px}pre.diff{background:#f8f8f8;padding:6px;overflow-x:auto;font-size:12px}',
  '.add{color:#161}.del{color:#a11}.hunk{color:#55a}.cite{color:#666;font-size:smaller}figure{margin:0.5em 0}',
].join('');
/** Only in reports with model calls, so the others keep their bytes. */
const LLM_STYLE = [
  '.alert{border-left:4px solid #c33;background:#fdecec;padding:4px 8px}',
  'pre.text{background:#f8f8f8;padding:6px;margin:0.2em 0 0.6em;white-space:pre-wrap;font-size:12px}summary{cursor:pointer}',
].join('');

/** Long values wrap, and collapse (only in reports that have one, or model calls, so the others keep their bytes). */
const LONG_STYLE = [
  'td{max-width:40em;overflow-wrap:anywhere}td code{white-space:pre-wrap;overflow-wrap:anywhere}',
  'details.long pre.text{background:#f8f8f8;padding:6px;white-space:pre-wrap;overflow-wrap:anywhere;font-size:12px;max-height:24em;overflow:auto}',
].join('');

function hasLong(b: Block): boolean {
  const long = (parts: Inline[]) => parts.some((p) => typeof p === 'object' && 'long' in p && p.long.length > LONG_VALUE_CHARS);
  if (b.kind === 'table') return b.rows.some((row) => row.some(long));
  if (b.kind === 'details') return b.blocks.some(hasLong);
  return false;
}

function html(r: RunReport, blocks: Block[]): string {
  return [
    '<!DOCTYPE html>',
    '<html lang="en">',
    `<head><meta charset="utf-8"><title>${escapeXml(`a2rl run report ${r.run.runId}`)}</title><style>${STYLE}${r.llm ? LLM_STYLE : ''}${r.llm || blocks.some(hasLong) ? LONG_STYLE : ''}</style></head>`,
    `<body>`,
    ...blocks.map(htmlBlock),
    '</body>',
    '</html>',
    '',
  ].join('\n');
}
