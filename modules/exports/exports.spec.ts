import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from '@jest/globals';
import { buildEvent } from '../ledger/events/envelope.js';
import type { A2rlEvent } from '../ledger/events/catalog.js';
import { canonicalJson } from '../ledger/events/canonical-json.js';
import { failedCall, llmCall } from '../../projections/transcript/testing/llm-call.js';
import { sampleRun } from '../../projections/run-analysis/testing/run-fixture.js';
import { installedAnalysisPython, installedHarborPython } from '../analytics/analysis-python.js';
import { atifTrajectory, ATIF_VERSION } from './atif.js';
import { inspectLog } from './inspect-log.js';

// The ecosystem's formats of an LLM-driven run (a Claude-like tool loop: a call asking for Bash, the
// next sending its result and asking for a Write, a call that never got an answer), checked by the
// formats' own tools where their pinned venvs are installed: inspect_ai's log reader and Harbor's
// trajectory validator.

function llmRun(runId: string): { analysis: ReturnType<typeof sampleRun>['analysis']; events: A2rlEvent[] } {
  const { analysis, events } = sampleRun(runId);
  const exit = events.findIndex((e) => e.type === 'AgentExited');
  const calls = [
    llmCall({ callId: 'c1', messages: 1, outputText: 'Let me look around.' }),
    llmCall({ callId: 'c2', messages: 3, toolResults: [{ id: 'tu-c1', name: 'Bash', output: 'code\ndata\nmodels' }], toolCalls: [{ id: 'tu-c2', name: 'Write', input: '{"file_path":"code/train.py","content":"print(1)"}' }], startedAt: '2026-01-01T00:00:03.000Z' }),
    failedCall({ callId: 'c3', startedAt: '2026-01-01T00:00:05.000Z' }),
  ];
  const spliced = [...events.slice(0, exit), ...calls.map((data) => ({ type: 'LlmCallRecorded', occurredAt: events[exit].occurredAt, data })), ...events.slice(exit)];
  return { analysis: { ...analysis, runId, driver: 'claude-sonnet-4-5-20250929' }, events: spliced.map((e, seq) => buildEvent(e.type as A2rlEvent['type'], runId, seq, e.occurredAt, e.data as never)) };
}

const scratch = mkdtempSync(path.join(os.tmpdir(), 'a2rl-exports-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe('ATIF v1.7 trajectory', () => {
  const run = llmRun('atif-run');
  const hashes = new Map(run.events.map((e) => [e.seq, `h${e.seq}`]));
  const t = atifTrajectory({ ...run, hashes }) as { schema_version: string; steps: Record<string, unknown>[]; extra: { a2rl: { submissions: { event: string; score?: number; seq: number }[] } }; final_metrics: Record<string, unknown> };

  it('one agent step per model call, tool calls from the answer, results paired as observations, usage as metrics, ledger references under extra', () => {
    expect(t.schema_version).toBe(ATIF_VERSION);
    const agent = t.steps.filter((s) => s.source === 'agent');
    expect(agent).toHaveLength(3);
    const calls = run.events.filter((e) => e.type === 'LlmCallRecorded');
    expect(agent.map((s) => (s.extra as { a2rl: { seq: number; sha256: string; eventId: string } }).a2rl)).toEqual(calls.map((e) => expect.objectContaining({ seq: e.seq, eventId: e.id, sha256: `h${e.seq}` })));
    expect(agent[0].tool_calls).toEqual([{ tool_call_id: 'tu-c1', function_name: 'Bash', arguments: { command: 'ls' } }]);
    // The Bash result came back in c2's request: it is step 1's observation, citing c2's event.
    expect(agent[0].observation).toEqual({ results: [{ source_call_id: 'tu-c1', content: 'code\ndata\nmodels', extra: { a2rl: { seq: calls[1].seq, eventId: calls[1].id, sha256: `h${calls[1].seq}`, isError: false } } }] });
    expect(agent[1].tool_calls).toEqual([{ tool_call_id: 'tu-c2', function_name: 'Write', arguments: { file_path: 'code/train.py', content: 'print(1)' } }]);
    expect(agent[1].observation).toBeUndefined(); // nothing sent it back
    expect(agent[0].metrics).toEqual({ prompt_tokens: 1000, completion_tokens: 50, cached_tokens: 0, cost_usd: 0.00375, extra: { cache_write_tokens: 0 } });
    expect(agent[2].message).toBe('(no answer: upstream_timeout: upstream did not answer)');
    expect(t.steps.map((s) => s.step_id)).toEqual(t.steps.map((_, i) => i + 1));
    expect(t.final_metrics).toMatchObject({ total_prompt_tokens: 2000, total_completion_tokens: 100, total_steps: t.steps.length });
    expect(t.extra.a2rl.submissions.filter((s) => s.event === 'graded').map((s) => s.score)).toEqual([40, 55]);
  });

  it("passes Harbor's own trajectory validator (harbor, pinned, on the portable Python 3.13)", () => {
    const python = installedHarborPython();
    if (!python) {
      console.warn('skipped: Harbor (infra/harbor-python, on the portable Python 3.13) is not installed; npm test installs it');
      return;
    }
    const file = path.join(scratch, 'trajectory.json');
    writeFileSync(file, canonicalJson(t));
    const out = execFileSync(python, ['-c', 'import sys, json\nfrom harbor.utils.trajectory_validator import TrajectoryValidator\nv = TrajectoryValidator()\nprint(json.dumps({"ok": v.validate(sys.argv[1]), "errors": v.errors}))', file], { encoding: 'utf8' });
    expect(JSON.parse(out)).toEqual({ ok: true, errors: [] });
    // And the validator is not a rubber stamp: a step id out of order fails it.
    writeFileSync(file, canonicalJson({ ...t, steps: t.steps.map((s, i) => (i === 1 ? { ...s, step_id: 7 } : s)) }));
    const bad = JSON.parse(execFileSync(python, ['-c', 'import sys, json\nfrom harbor.utils.trajectory_validator import TrajectoryValidator\nv = TrajectoryValidator()\nprint(json.dumps({"ok": v.validate(sys.argv[1]), "errors": v.errors}))', file], { encoding: 'utf8' })) as { ok: boolean };
    expect(bad.ok).toBe(false);
  });
});

describe('Inspect eval log', () => {
  const runs = [llmRun('insp-a'), llmRun('insp-b')];
  const log = inspectLog(runs, { campaignId: 'cmp-x' }) as { samples: { id: string; scores: Record<string, { value: number }>; events: { event: string }[]; model_usage: Record<string, { input_tokens: number }> }[]; results: { scores: { name: string; metrics: { mean: { value: number } } }[] } };

  it('one sample per run: scores, model usage, model events from the gateway, tool events from processes, score events from gradings', () => {
    expect(log.samples.map((s) => s.id)).toEqual(['insp-a', 'insp-b']);
    const s = log.samples[0];
    expect(s.scores.best_of_budget.value).toBe(55);
    expect(s.scores.improvement.value).toBe(45);
    const count = (k: string) => s.events.filter((e) => e.event === k).length;
    expect({ model: count('model'), tool: count('tool'), score: count('score') }).toEqual({ model: 3, tool: runs[0].events.filter((e) => e.type === 'ProcessStarted').length, score: 2 });
    expect(s.model_usage['claude-sonnet-4-5-20250929'].input_tokens).toBe(2000);
    expect(log.results.scores.map((r) => [r.name, r.metrics.mean.value])).toEqual([['best_of_budget', 55], ['improvement', 45]]);
    // Derived ids, no clock: the same runs give the same bytes.
    expect(canonicalJson(inspectLog(runs, { campaignId: 'cmp-x' }))).toBe(canonicalJson(log));
  });

  it("is read by inspect_ai's own log reader (inspect-ai, pinned)", () => {
    const python = installedAnalysisPython();
    if (!python) {
      console.warn('skipped: inspect-ai (infra/analysis-python) is not installed; npm test installs it');
      return;
    }
    const file = path.join(scratch, 'log.json');
    writeFileSync(file, canonicalJson(log));
    const read = JSON.parse(execFileSync(python, ['-c', [
      'import sys, json',
      'from inspect_ai.log import read_eval_log',
      'log = read_eval_log(sys.argv[1])',
      'print(json.dumps({"status": log.status, "task": log.eval.task, "samples": [[s.id, {k: v.value for k, v in s.scores.items()}, [e.event for e in s.events].count("model"), s.model_usage["claude-sonnet-4-5-20250929"].output_tokens] for s in log.samples], "mean": log.results.scores[0].metrics["mean"].value}))',
    ].join('\n'), file], { encoding: 'utf8' })) as unknown;
    expect(read).toEqual({ status: 'success', task: 'a2rl/ref-arith', samples: [['insp-a', { best_of_budget: 55, improvement: 45 }, 3, 100], ['insp-b', { best_of_budget: 55, improvement: 45 }, 3, 100]], mean: 55 });
  });
});
