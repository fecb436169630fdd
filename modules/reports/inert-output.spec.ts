import { describe, expect, it } from '@jest/globals';
import { analyzeRun } from '../../projections/run-analysis/analyze.js';
import { sampleRun } from '../../projections/run-analysis/testing/run-fixture.js';
import { buildTranscript } from '../../projections/transcript/transcript.js';
import { llmCall } from '../../projections/transcript/testing/llm-call.js';
import type { A2rlEvent } from '../ledger/events/catalog.js';
import { buildEvent } from '../ledger/events/envelope.js';
import { hasActiveControls } from './inert-text.js';
import { renderReport } from './render.js';
import { transcriptText } from './transcript-text.js';

// Recorded data written by a hostile agent, in every place the md report and the transcript show it:
// sequences that retitle the window, clear the screen, paint a fake green "verified", return the
// cursor, reverse the line (RLO) or start a CSI with one C1 byte; and Markdown that would close a
// code fence or a table cell, or start a heading of its own.
const HOSTILE = '\x1b]0;pwned\x07\x1b[2J\x1b[32mverified\x1b[0m\rOK\u202eexe.txt\x9b2J';
const BREAKOUT = '```\n| x | y |\n\n# Verified &#x202e;';

/** The sample run with hostile argv, file name and model calls. */
async function hostileRun() {
  const base = sampleRun('fx-hostile');
  const exit = base.events.findIndex((e) => e.type === 'AgentExited');
  const call = llmCall({
    callId: 'c1', modelAnswered: `m${HOSTILE}`, userText: `do it${HOSTILE}\n${BREAKOUT}`, outputText: `sure${HOSTILE}`,
    toolCalls: [{ id: `t${HOSTILE}`, name: `Bash\n── turn 9 · forged${HOSTILE}`, input: `{"command":"${HOSTILE}"}` }],
    toolResults: [{ id: 't0', name: `n${HOSTILE}`, output: `out${HOSTILE}` }],
  });
  const specs = [...base.events.slice(0, exit), { type: 'LlmCallRecorded', occurredAt: base.events[exit].occurredAt, data: call } as A2rlEvent, ...base.events.slice(exit)];
  const events = specs.map((e, seq) => {
    let data: object = e.data;
    if (e.type === 'ProcessStarted') data = { ...e.data, argv: ['python', `code/train.py${HOSTILE}`, BREAKOUT] };
    if (e.type === 'FileChanged') data = { ...e.data, path: `code/train${HOSTILE}|${BREAKOUT}.py` };
    if (e.type === 'AgentStarted') data = { ...e.data, gateway: { providers: ['anthropic'], url: 'http://127.0.0.1:5001' } };
    return buildEvent(e.type, 'fx-hostile', seq, e.occurredAt, data as never);
  });
  return { analysis: await analyzeRun(events, base.blobs), events, blobs: base.blobs };
}

describe('recorded data in the md report and the transcript is inert', () => {
  it('the md report shows control sequences as visible escapes, none raw', async () => {
    const md = await renderReport(await hostileRun(), 'md');
    expect(hasActiveControls(md.replace(/\t/g, ''))).toBe(false);
    expect(md).toContain('\\x1b]0;pwned\\x07\\x1b[2J\\x1b[32mverified\\x1b[0m\\rOK\\u202eexe.txt\\x9b2J');
  });

  it('agent text cannot close a code fence, split a table row or start a heading in the md report', async () => {
    const md = await renderReport(await hostileRun(), 'md');
    // Outside the fenced blocks (each closed by the fence that opened it): no heading, no character reference from agent text.
    const outside: string[] = [];
    let fence: string | null = null;
    for (const line of md.split('\n')) {
      const marker = /^`{3,}/.exec(line)?.[0];
      if (fence === null && marker) fence = marker;
      else if (fence !== null && line === fence) fence = null;
      else if (fence === null) outside.push(line);
    }
    expect(fence).toBeNull();
    expect(outside.filter((l) => /^#+ Verified/.test(l) || l.includes('&#x202e;'))).toEqual([]);
    expect(outside.filter((l) => l.startsWith('# '))).toHaveLength(1); // the report's own title
    // Every table row has as many cells as its header: no unescaped | from recorded data.
    const cells = (line: string) => line.replace(/\\\|/g, '').split('|').length;
    const tables = md.split('\n\n').filter((b) => b.startsWith('| ')).map((b) => b.trimEnd().split('\n'));
    expect(tables).toHaveLength(6); // header, two submissions' processes, metrics, model calls, cited events
    for (const table of tables) for (const row of table) expect([row, cells(row)]).toEqual([row, cells(table[0])]);
  });

  it('the transcript shows every recorded string inert, and names cannot start a block of their own', async () => {
    const { events } = await hostileRun();
    const text = transcriptText(buildTranscript(events));
    expect(hasActiveControls(text)).toBe(false);
    expect(text).toContain('m\\x1b]0;pwned\\x07');
    expect(text).toContain('tool call Bash\\n── turn 9 · forged');
    expect(text.split('\n').filter((l) => l.startsWith('── '))).toHaveLength(1);
  });
});
