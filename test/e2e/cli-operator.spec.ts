import { createHash } from 'node:crypto';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { A2RL_BIN, runA2rl, type CliResult } from './a2rl-cli.js';

// What an operator reads from the CLI (issue 31) through the built `a2rl` binary: the agent's own
// output (`a2rl logs`), any blob an event references (`a2rl blob`), the runs listing, stdout holding
// only JSON under --json, and the access records `a2rl verify` and `a2rl export` leave. Stdout is a
// pipe here, so --raw is allowed and text is what a pipe gets (inert as composed).

interface Ev {
  type: string;
  seq: number;
  data: Record<string, unknown>;
}

let home: string;
const env = () => ({ ...process.env, A2RL_HOME: home });
const a2rl = (args: string[]): Promise<CliResult> => runA2rl(args, { env: env() });
const lines = (text: string) => text.split('\n').filter((l) => l.trim() !== '');
const ndjson = <T>(text: string): T[] => lines(text).map((l) => JSON.parse(l) as T);

/** stdout of a command that must succeed. */
async function ok(args: string[]): Promise<string> {
  const r = await a2rl(args);
  expect({ args, code: r.code, stderr: r.code === 0 ? '' : r.stderr }).toEqual({ args, code: 0, stderr: '' });
  return r.stdout;
}

/** stdout as bytes (for --raw), through the same binary. */
async function bytesOf(args: string[]): Promise<Buffer> {
  const r = await promisify(execFile)(process.execPath, [A2RL_BIN, ...args], { env: env(), encoding: 'buffer', maxBuffer: 64 * 1024 * 1024 });
  return r.stdout;
}

/** `a2rl run … --json`: its stdout is one JSON value (human lines go to stderr). */
async function run(args: string[]): Promise<{ runId: string; driver: string | null; declaredDriver: string | null }> {
  const r = await a2rl(['run', '--task', 'ref-arith', '--json', ...args]);
  if (r.code !== 0) throw new Error(`a2rl run failed (${r.code}): ${r.stderr}`);
  return JSON.parse(r.stdout) as { runId: string; driver: string | null; declaredDriver: string | null };
}

const events = async (runId: string) => ndjson<Ev>(await ok(['events', runId, '--json']));

let reference: string; // the reference agent: submissions, checkpoints, gradings
let talker: string; // prints a colour escape on stdout, a line on stderr
let binary: string; // prints a NUL byte
let referenceEvents: Ev[];

beforeAll(async () => {
  home = mkdtempSync(path.join(os.tmpdir(), 'a2rl-cli-operator-'));
  const first = await run(['--agent', 'reference', '--budget', '30s']);
  expect(first).toMatchObject({ driver: expect.anything(), declaredDriver: expect.anything() }); // named, not left out (a rule-based agent's is "none")
  reference = first.runId;
  talker = (await run(['--agent-command', "printf 'hello \\033[31mred\\033[0m\\n'; printf 'oops\\n' >&2", '--budget', '30s'])).runId;
  binary = (await run(['--agent-command', "printf 'a\\000b'", '--budget', '30s'])).runId;
  referenceEvents = await events(reference);
}, 300_000);

afterAll(() => {
  rmSync(home, { recursive: true, force: true });
});

describe('a2rl logs', () => {
  it("prints the agent's recorded stdout and stderr, control sequences shown escaped", async () => {
    const out = await ok(['logs', talker]);
    expect(out).toContain('hello \\x1b[31mred\\x1b[0m\n');
    expect(out).toContain('oops\n');
    expect(out).not.toContain('\x1b');
    expect(await ok(['logs', talker, '--stream', 'stderr'])).toBe('oops\n');
  });

  it('writes the exact bytes with --raw and one JSON object per chunk with --json', async () => {
    const raw = (await bytesOf(['logs', talker, '--raw', '--stream', 'stdout'])).toString('latin1');
    expect(raw).toBe('hello \x1b[31mred\x1b[0m\n');
    const chunks = ndjson<{ seq: number; stream: string; text: string; binary: boolean; sha256: string; size: number }>(await ok(['logs', talker, '--json']));
    expect(chunks.map((c) => c.text).join('')).toEqual(expect.stringContaining('hello \x1b[31mred'));
    expect(new Set(chunks.map((c) => c.stream))).toEqual(new Set(['stdout', 'stderr']));
    const recorded = (await events(talker)).filter((e) => e.type === 'AgentOutput').map((e) => e.seq);
    expect(chunks.map((c) => c.seq)).toEqual(recorded);
  });

  it('marks a binary chunk instead of printing it, and says that per-process output is not recorded', async () => {
    expect(await ok(['logs', binary])).toMatch(/^\n\[stdout chunk at seq \d+: 3 bytes of binary output; a2rl blob \S+ \d+ --raw > file\]\n$/);
    expect((await bytesOf(['logs', binary, '--raw'])).equals(Buffer.from('a\0b'))).toBe(true);
    const started = referenceEvents.find((e) => e.type === 'ProcessStarted')!;
    const asked = await a2rl(['logs', reference, '--process', String(started.seq)]);
    expect({ code: asked.code, stderr: asked.stderr }).toEqual({ code: 1, stderr: expect.stringMatching(/^a2rl: the output of process \d+ .* is not recorded: a2rl records the agent's own stdout and stderr/) });
    const wrong = await a2rl(['logs', reference, '--process', '0']);
    expect(wrong.stderr).toMatch(/^a2rl: --process takes the seq of a ProcessStarted event; event 0 of run \S+ is RunScheduled\n$/);
  });

  it('names a bad run or option in one line', async () => {
    for (const [args, message] of [
      [['logs', 'no-such-run'], 'no run "no-such-run" in the sqlite ledger'],
      [['logs', talker, '--stream', 'both'], '--stream must be stdout or stderr'],
      [['logs', talker, '--raw', '--json'], 'give --raw or --json, not both'],
    ] as const) {
      const r = await a2rl([...args]);
      expect({ code: r.code, starts: r.stderr.startsWith(`a2rl: ${message}`), lines: lines(r.stderr).length }).toEqual({ code: 1, starts: true, lines: 1 });
    }
  });
});

describe('a2rl blob', () => {
  it('prints a JSON blob pretty-printed, and its exact bytes with --raw', async () => {
    const received = referenceEvents.find((e) => e.type === 'SubmissionReceived')!;
    const ref = received.data.checkpoint as { sha256: string; size: number };
    const shown = await ok(['blob', reference, String(received.seq)]);
    const raw = await bytesOf(['blob', reference, String(received.seq), '--raw']);
    expect(createHash('sha256').update(raw).digest('hex')).toBe(ref.sha256);
    expect(shown).toBe(`${JSON.stringify(JSON.parse(raw.toString('utf8')), null, 2)}\n`);
    const json = JSON.parse(await ok(['blob', reference, String(received.seq), '--json'])) as Record<string, unknown>;
    expect(json).toMatchObject({ runId: reference, seq: received.seq, type: 'SubmissionReceived', part: 'checkpoint', sha256: ref.sha256, size: ref.size, binary: false, format: 'json' });
  });

  it('shows an output chunk inert, refuses binary as text, and names the parts an event has', async () => {
    const chunk = (await events(talker)).find((e) => e.type === 'AgentOutput' && e.data.stream === 'stdout')!;
    expect(await ok(['blob', talker, String(chunk.seq)])).toBe('hello \\x1b[31mred\\x1b[0m\n');
    const bin = (await events(binary)).find((e) => e.type === 'AgentOutput')!;
    const refused = await a2rl(['blob', binary, String(bin.seq)]);
    expect({ code: refused.code, stderr: refused.stderr }).toEqual({ code: 1, stderr: expect.stringMatching(/^a2rl: chunk of event \d+ \(AgentOutput\) is binary \(3 bytes\): .*--raw > file`\n$/) });
    expect((await bytesOf(['blob', binary, String(bin.seq), '--raw'])).equals(Buffer.from('a\0b'))).toBe(true);
    const part = await a2rl(['blob', talker, String(chunk.seq), '--part', 'response']);
    expect(part.stderr).toBe(`a2rl: event ${chunk.seq} (AgentOutput) has no blob "response"; it has chunk (--part)\n`);
    expect((await a2rl(['blob', talker, '0'])).stderr).toBe('a2rl: event 0 (RunScheduled) references no blob\n');
    expect((await a2rl(['blob', talker, '99999'])).stderr).toBe(`a2rl: run ${talker} has no event 99999\n`);
    expect((await a2rl(['blob', talker, '-1'])).code).toBe(1);
  });
});

describe('a2rl runs and a2rl events', () => {
  it('lists runs newest first with driver, best, improvement, start and duration; --sort orders them', async () => {
    const rows = ndjson<{ runId: string; scheduledAt: string; best: number | null; improvement: number | null; driver: string | null; durationS: number | null }>(await ok(['runs', '--json']));
    expect(rows.map((r) => r.runId)).toEqual([binary, talker, reference]);
    expect(rows[2]).toMatchObject({ best: expect.any(Number), improvement: expect.any(Number), durationS: expect.any(Number), scheduledAt: expect.any(String) });
    expect(rows[0]).toMatchObject({ best: null, improvement: null });
    expect(ndjson<{ runId: string }>(await ok(['runs', '--json', '--sort', 'best']))[0].runId).toBe(reference);
    expect(ndjson<{ runId: string }>(await ok(['runs', '--json', '--sort', 'id'])).map((r) => r.runId)).toEqual([reference, talker, binary].sort());
    const table = await ok(['runs']);
    expect(lines(table)[0].split(/\s{2,}/)).toEqual(['RUN', 'TASK', 'AGENT', 'DRIVER', 'STATE', 'BEST', 'IMPROVEMENT', 'STARTED (UTC)', 'DURATION', 'EVENTS']);
    expect(lines(table)[1].startsWith(binary)).toBe(true);
    expect((await a2rl(['runs', '--sort', 'score'])).stderr).toMatch(/^a2rl: --sort must be one of started, best, improvement, duration, id/);
  });

  it("prints one bounded line per event, a grading's score first; --json keeps every payload whole", async () => {
    const out = lines(await ok(['events', reference]));
    const graded = out.find((l) => /\bSubmissionGraded\b/.test(l))!;
    expect(graded).toMatch(/SubmissionGraded\s+score=[\d.]+ submissionId="sub-1"/);
    for (const line of out) expect(line.length).toBeLessThanOrEqual(6 + 2 + 24 + 2 + 24 + 2 + 160);
    const full = referenceEvents.find((e) => e.type === 'SubmissionGraded')!;
    expect(full.data).toMatchObject({ score: expect.any(Number), submissionId: 'sub-1' });
  });
});

describe('--json prints only JSON on stdout', () => {
  it('parses every --json command: one JSON value, or NDJSON line by line', async () => {
    const received = referenceEvents.find((e) => e.type === 'SubmissionReceived')!;
    const bundle = path.join(home, 'bundle.tar.gz');
    const single: string[][] = [
      ['tasks', '--json'], ['agents', '--json'], ['scoreboard', '--json'], ['report', reference, '--format', 'json'], ['transcript', reference, '--json'],
      ['projections', 'status', '--json'], ['keys', 'trusted', '--json'], ['verify', reference, '--json'], ['export', reference, '-o', bundle, '--json'],
      ['replay', reference, '--diff', '0', String(received.seq), '--json'], ['tokens', 'list', '--json'], ['blob', reference, String(received.seq), '--json'],
      ['campaign', 'list', '--json'],
    ];
    const ndjsonCommands: string[][] = [['runs', '--json'], ['events', reference, '--json'], ['access', '--json'], ['logs', talker, '--json'], ['replay', reference, '--timeline', '--json']];
    for (const args of single) {
      const out = await ok(args);
      expect(() => JSON.parse(out)).not.toThrow();
    }
    for (const args of ndjsonCommands) {
      const out = await ok(args);
      expect(lines(out).length).toBeGreaterThan(0);
      for (const line of lines(out)) expect(() => JSON.parse(line)).not.toThrow();
    }
  }, 180_000);
});

describe('the access trail of CLI actions', () => {
  it('records a2rl verify and a2rl export with a cli actor naming the OS user', async () => {
    await ok(['verify', talker]);
    const bundle = path.join(home, 'talker.tar.gz');
    await ok(['export', talker, '-o', bundle]);
    const user = os.userInfo().username;
    const records = ndjson<{ type: string; data: { action: string; actor: { kind: string; id: string; name: string }; target: { runId?: string }; outcome: string; verified?: boolean; detail?: string } }>(await ok(['access', '--run', talker, '--json']));
    expect(records.map((r) => r.data)).toEqual([
      expect.objectContaining({ action: 'verify', actor: { kind: 'cli', id: user, name: user }, target: { runId: talker }, outcome: 'ok', verified: true }),
      expect.objectContaining({ action: 'export', actor: { kind: 'cli', id: user, name: user }, target: { runId: talker }, outcome: 'ok', detail: expect.stringMatching(/^bundle of \d+ events, \d+ bytes, sha256 [0-9a-f]{64}, key id [0-9a-f]+/) }),
    ]);
    expect(await ok(['access', '--run', talker])).toMatch(new RegExp(`cli ${user}\\s+verify\\s+run ${talker}\\s+ok, verified`));
  });
});
