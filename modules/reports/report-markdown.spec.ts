import { describe, expect, it } from '@jest/globals';
import MarkdownIt from 'markdown-it';
import { analyzeRun } from '../../projections/run-analysis/analyze.js';
import { sampleRun, sha } from '../../projections/run-analysis/testing/run-fixture.js';
import { llmCall } from '../../projections/transcript/testing/llm-call.js';
import type { A2rlEvent, EventData } from '../ledger/events/catalog.js';
import { buildEvent } from '../ledger/events/envelope.js';
import { renderReport } from './render.js';

// Reports of LLM-agent runs carry long, multi-line, quote-filled values: a Claude Code prompt (with
// markdown headings of its own), shell scripts run through `bash -lc`. The md report is parsed with a
// CommonMark parser (markdown-it) to prove that none of it becomes document structure: the only
// headings are the report's own, no raw HTML entity leaks, and every recorded line stays in code.

const PROMPT = [
  '# Task: post-train the model',
  '',
  '## Rules',
  '- Use "train.py" & keep <data/> read-only',
  '```python',
  'print("hi")',
  '```',
  '=====',
  ...Array.from({ length: 25 }, (_, i) => `line ${i} of a long prompt with "quotes" and <tags>`),
].join('\n');

const SCRIPT = `cat > code/train.sh <<'EOF'\n# heading-looking comment\n#!/bin/bash\necho "step 1" && python3 -c 'print(1)'\n${'x'.repeat(3000)}\nEOF`;

/** The sample run as a Claude Code run: a gateway, a long prompt, a bash script as a tool call and as a process argv. */
async function claudeCodeRun() {
  const base = sampleRun('fx-cc');
  const exit = base.events.findIndex((e) => e.type === 'AgentExited');
  const started = base.events.findIndex((e) => e.type === 'ProcessStarted');
  const specs: A2rlEvent[] = [
    ...base.events.slice(0, exit),
    { type: 'LlmCallRecorded', occurredAt: base.events[exit].occurredAt, data: llmCall({ callId: 'c1', userText: PROMPT.slice(0, 2000), toolCalls: [{ id: 't1', name: 'Bash', input: JSON.stringify({ command: SCRIPT }).slice(0, 2000) }] }) } as A2rlEvent,
    { type: 'LimitReached', occurredAt: base.events[exit].occurredAt, data: { limit: 'llm_tokens', value: 3820, max: 2000, scope: 'c1', action: 'billable LLM calls answered 429', observedAt: base.events[exit].occurredAt } } as A2rlEvent,
    ...OUTPUT.map((text, i) => ({ type: 'AgentOutput', occurredAt: base.events[exit].occurredAt, data: { stream: i === 2 ? 'stderr' : 'stdout', chunk: { sha256: sha(text), size: Buffer.byteLength(text), key: `sha256/${sha(text).slice(0, 2)}/${sha(text)}` }, observedAt: base.events[exit].occurredAt } }) as A2rlEvent),
    ...base.events.slice(exit),
  ];
  const blobs = { async read(sha256: string) { const out = OUTPUT.find((t) => sha(t) === sha256); return out !== undefined ? Buffer.from(out) : base.blobs.read(sha256); } };
  const events = specs.map((e, seq) => {
    let data = e.data as Record<string, unknown>;
    if (e.type === 'RunScheduled') data = { ...data, driver: 'claude-sonnet-4-5-20250929', agent: 'claude-code' };
    if (e.type === 'AgentStarted') data = { ...data, gateway: { providers: ['anthropic'], url: 'http://127.0.0.1:5001' } };
    if (seq === started) data = { ...data, argv: ['bash', '-lc', SCRIPT] };
    return buildEvent(e.type, 'fx-cc', seq, e.occurredAt, data as EventData<typeof e.type>);
  });
  const analysis = await analyzeRun(events, blobs);
  return { analysis, events, blobs };
}

/** The agent's own output: two stdout chunks (the first long enough to be cut), one stderr chunk. */
const OUTPUT = [`${Array.from({ length: 400 }, (_, i) => `# step ${i} <b>done</b>`).join('\n')}\n`, 'final answer: submitted\n', 'warning: "slow"\n'];

const md = new MarkdownIt({ html: true });

/** The inline text of each heading the parser finds. */
function headings(text: string): string[] {
  const tokens = md.parse(text, {});
  return tokens.flatMap((t, i) => (t.type === 'heading_open' ? [tokens[i + 1]!.content] : []));
}

describe('the md report of an LLM-agent run renders as a document', () => {
  it('has only its own headings: prompt and script lines never land outside code', async () => {
    const run = await claudeCodeRun();
    const text = await renderReport(run, 'md');
    const found = headings(text);
    const own = /^(Run report: fx-cc|Score trajectory|Timeline|Submissions \(\d+\)|Submission \d+: .*|Process metrics|Model calls|Transcript|Cited events|Limits and overruns|Agent output)$/;
    expect(found.filter((h) => !own.test(h))).toEqual([]);
    expect(found).toContain('Transcript');
    // Every line of the prompt is still there, inside code (a fence or an inline code span).
    const code = md.parse(text, {}).flatMap((t) => (t.type === 'fence' || t.type === 'code_block' ? [t.content] : t.children?.filter((c) => c.type === 'code_inline').map((c) => c.content) ?? []));
    expect(code.some((c) => c.includes('## Rules'))).toBe(true);
  });

  it('leaks no HTML entity into the text a reader sees', async () => {
    const run = await claudeCodeRun();
    const text = await renderReport(run, 'md');
    // Outside HTML (the charts are inline SVG), text and code show what was recorded, not &quot;.
    const tokens = md.parse(text, {});
    const shown = tokens.flatMap((t) => (t.type === 'fence' ? [t.content] : (t.children ?? []).filter((c) => c.type === 'text' || c.type === 'code_inline').map((c) => c.content)));
    expect(shown.filter((s) => /&(quot|amp|lt|gt|#\d+|#x[0-9a-f]+);/i.test(s))).toEqual([]);
    // And nothing a renderer would show as a raw entity sits at the start of a line outside the SVG.
    expect(text.split('\n').filter((l) => /^&(quot|amp|lt|gt);/.test(l))).toEqual([]);
  });

  it('keeps long values bounded in md: a long argv is cut with a pointer to its event', async () => {
    const run = await claudeCodeRun();
    const text = await renderReport(run, 'md');
    const row = text.split('\n').find((l) => l.startsWith('| ') && l.includes('bash -lc'));
    expect(row).toBeDefined();
    expect(row!.length).toBeLessThan(800);
    expect(row).toMatch(/more characters/);
  });

  it('shows the limit reached and its overrun, and a bounded tail of the output, in md and HTML', async () => {
    const run = await claudeCodeRun();
    const text = await renderReport(run, 'md');
    const limitSeq = run.events.find((e) => e.type === 'LimitReached')!.seq;
    expect(text).toContain(`1 limit reached; 1 overrun: **llm\\_tokens 3,820 of 2,000 (+1,820)** [seq ${limitSeq}]`);
    const section = text.slice(text.indexOf('## Agent output'), text.indexOf('## Cited events'));
    expect(section).toContain('final answer: submitted');
    expect(section).toContain('warning: "slow"');
    expect(section).not.toContain('# step 0 ');
    expect(section.length).toBeLessThan(4096 * 2 + 2000);
    // The output's own "# step" lines stay in code: no heading from them.
    expect(headings(text).filter((h) => h.startsWith('step'))).toEqual([]);
    const html = await renderReport(run, 'html');
    expect(html).toContain('<h2>Limits and overruns</h2>');
    expect(html).toContain('&lt;b&gt;done&lt;/b&gt;');
    expect(html).not.toContain('<b>done</b>');
    // The long argv is collapsed, whole, in a <details>.
    expect(html).toMatch(/<details class="long"><summary><code>bash -lc cat &gt; code\/train.sh/);
  });
});
