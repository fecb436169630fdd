import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { monitorEventLoopDelay, type IntervalHistogram } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { SqliteEventStore } from '../../infra/eventstore/sqlite-event-store.js';
import { streamName } from '../../modules/ledger/events/ids.js';
import { withRunApp } from '../../src/commands/cli-support.js';

// `npm run bench -- instrumentation [--files N] [--modify M] [--delete D] [--procs P] [--budget S] [--keep]`:
// an ad-hoc agent (test/bench/instrumentation-agent.mjs) creates N small files in code/ in a burst,
// modifies M of them, deletes D others, submits a checkpoint right after that burst (the harness
// orders the submission after every file change before it), launches P `/bin/true` and submits again
// once nothing is pending, while a thread of it polls the
// grading API's /health. It runs once inside an a2rl run (task ref-arith, embedded SQLite ledger and
// filesystem artifacts under a temp A2RL_HOME; the harness is this process, so its event loop is the
// one measured) and once directly in a temp dir (instrumentation off, the reference). The truth is
// the workspace on disk after the run and the agent's own record of what it did; the figures are
// what the ledger holds against it, phase times on/off, and the harness's responsiveness.

const AGENT_FILE = 'instrumentation-agent.mjs';
const PHASES = ['create', 'modify', 'delete', 'procs'] as const;
type Phase = (typeof PHASES)[number];
/** The agent's submissions: right after the burst, and at the end with nothing pending (the reference). */
const SUBMITS = ['submit', 'resubmit'] as const;
/** Budget for the two submissions (gradings of ref-arith take well under a second each when nothing is pending). */
const SUBMIT_ALLOWANCE_S = 20;
/** monitorEventLoopDelay samples every RESOLUTION_MS; a sample's delay is what it took beyond that. */
const RESOLUTION_MS = 10;
/** Loop-delay windows: short, so a span learned afterwards is matched to within a quarter second. */
const WINDOW_MS = 250;
const HEREDOC = 'A2RL_BENCH_AGENT_EOF';

interface Options {
  files: number;
  modify: number;
  delete: number;
  procs: number;
  budget?: number;
  keep: boolean;
}

interface PhaseMark {
  phase: Phase | 'done';
  start: number;
  end: number;
  count?: number;
}

interface HealthSample {
  t: number;
  ms: number;
  status: number;
}

interface AgentRecord {
  phases: Partial<Record<Phase | (typeof SUBMITS)[number] | 'done', PhaseMark>>;
  health: HealthSample[];
}

interface StoredEvent {
  type: string;
  seq: number;
  occurredAt: string;
  data: Record<string, unknown>;
}

function parseOptions(argv: string[]): Options {
  const opts: Options = { files: 100_000, modify: 10_000, delete: 1_000, procs: 1_000, keep: false };
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i];
    if (flag === '--keep') {
      opts.keep = true;
      continue;
    }
    const key = flag.replace(/^--/, '');
    const value = Number(argv[++i]);
    if (!['files', 'modify', 'delete', 'procs', 'budget'].includes(key) || !Number.isFinite(value) || value < 0) {
      throw new Error(`instrumentation bench: bad option "${flag} ${argv[i] ?? ''}" (--files N --modify M --delete D --procs P --budget S --keep)`);
    }
    (opts as unknown as Record<string, number>)[key] = value;
  }
  return opts;
}

/** The agent script: next to this file in the source tree (the bench itself runs from dist/). */
function agentSource(): string {
  const candidates = [fileURLToPath(new URL(`../../../test/bench/${AGENT_FILE}`, import.meta.url)), path.resolve('test/bench', AGENT_FILE)];
  const found = candidates.find((p) => existsSync(p));
  if (!found) throw new Error(`instrumentation bench: ${AGENT_FILE} not found (looked in ${candidates.join(', ')})`);
  return readFileSync(found, 'utf8');
}

function agentArgs(o: Options): string[] {
  return ['--files', String(o.files), '--modify', String(o.modify), '--delete', String(o.delete), '--procs', String(o.procs)];
}

function readAgentRecord(outputDir: string): AgentRecord {
  const lines = (file: string) => {
    try {
      return readFileSync(path.join(outputDir, file), 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l) as unknown);
    } catch {
      return [];
    }
  };
  const phases: AgentRecord['phases'] = {};
  for (const mark of lines('bench-phases.jsonl') as PhaseMark[]) phases[mark.phase] = mark;
  return { phases, health: lines('bench-health.jsonl') as HealthSample[] };
}

/** Instrumentation off: the same script in a temp dir, polling a plain HTTP server in this process. */
async function runUninstrumented(o: Options, source: string): Promise<AgentRecord & { dir: string }> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'a2rl-bench-instr-off-'));
  mkdirSync(path.join(dir, 'output'));
  const script = path.join(dir, 'output', 'agent.mjs');
  writeFileSync(script, source);
  const server = http.createServer((_req, res) => {
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ status: 'ok', service: 'reference' }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  try {
    const code = await new Promise<number | null>((resolve, reject) => {
      const child = spawn(process.execPath, [script, ...agentArgs(o), '--exit'], {
        cwd: dir,
        env: { PATH: process.env.PATH ?? '/usr/bin:/bin', GRADING_SERVER_URL: `http://127.0.0.1:${port}` },
        stdio: ['ignore', 'inherit', 'inherit'],
      });
      child.once('error', reject);
      child.once('exit', resolve);
    });
    if (code !== 0) throw new Error(`instrumentation bench: the uninstrumented agent exited with ${code}`);
  } finally {
    server.closeAllConnections();
    server.close();
  }
  return { ...readAgentRecord(path.join(dir, 'output')), dir };
}

interface LoopWindow {
  start: number;
  end: number;
  count: number;
  max: number;
  /** [percentile, value in ms] pairs, HdrHistogram's iteration points. */
  percentiles: Array<[number, number]>;
}

/**
 * The harness's event-loop delay (perf_hooks.monitorEventLoopDelay), kept in WINDOW_MS windows so
 * the figures can be taken over the span the agent was busy, learned only afterwards from the
 * agent's own phase marks. Histograms cannot be merged, so a span's distribution is rebuilt from the
 * windows' percentile points, each bucket taken at its upper value (never lower than the truth).
 *
 * The monitor takes one sample per timer tick, so a stall of D ms is a single sample among hundreds
 * of idle ones and a harness stalling for seconds at a time could still show a small p99. The p99
 * is therefore corrected for that (HdrHistogram's expected-interval correction): a stall of D also
 * counts the samples the monitor would have taken during it, D − 10, D − 20, … ms. The raw
 * per-sample p99 is reported beside it.
 */
class LoopDelayWindows {
  private readonly windows: LoopWindow[] = [];
  private current: IntervalHistogram | undefined;
  private currentStart = 0;
  private timer: NodeJS.Timeout | undefined;

  start(): void {
    this.current = this.fresh();
    this.timer = setInterval(() => this.rotate(), WINDOW_MS);
  }

  stop(): void {
    clearInterval(this.timer);
    this.rotate(false);
  }

  private fresh(): IntervalHistogram {
    const h = monitorEventLoopDelay({ resolution: RESOLUTION_MS });
    h.enable();
    this.currentStart = Date.now();
    return h;
  }

  private rotate(again = true): void {
    const done = this.current!;
    const start = this.currentStart;
    this.current = again ? this.fresh() : undefined;
    done.disable();
    if (done.count === 0) return;
    const ms = (ns: number) => Math.max(0, ns / 1e6 - RESOLUTION_MS);
    this.windows.push({ start, end: Date.now(), count: done.count, max: ms(done.max), percentiles: [...done.percentiles].map(([p, v]) => [p, ms(v)]) });
  }

  span(from: number, to: number): { maxMs: number; p99Ms: number; rawP99Ms: number; samples: number } {
    const inside = this.windows.filter((w) => w.end >= from && w.start <= to);
    const samples = inside.reduce((n, w) => n + w.count, 0);
    if (!samples) return { maxMs: 0, p99Ms: 0, rawP99Ms: 0, samples: 0 };
    // (delay, how many samples) buckets: between two percentile points, at the upper one's value.
    const raw: Array<[number, number]> = [];
    for (const w of inside) {
      let below = 0;
      for (const [p, value] of w.percentiles) {
        raw.push([value, ((p - below) / 100) * w.count]);
        below = p;
      }
    }
    const corrected = [...raw];
    for (const [value, weight] of raw) for (let missed = value - RESOLUTION_MS; missed > 0; missed -= RESOLUTION_MS) corrected.push([missed, weight]);
    const p99 = (buckets: Array<[number, number]>) => {
      buckets.sort((a, b) => a[0] - b[0]);
      const total = buckets.reduce((n, [, weight]) => n + weight, 0);
      let seen = 0;
      for (const [value, weight] of buckets) if ((seen += weight) >= 0.99 * total) return value;
      return buckets.at(-1)![0];
    };
    return { maxMs: Math.max(...inside.map((w) => w.max)), p99Ms: p99(corrected), rawP99Ms: p99(raw), samples };
  }
}

function percentile(values: number[], p: number): number {
  if (!values.length) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

/** Every regular file under code/ with its sha256 (links and other kinds are not the agent's final state). */
function diskState(workspace: string): Map<string, string> {
  const out = new Map<string, string>();
  const walk = (rel: string) => {
    for (const entry of readdirSync(path.join(workspace, rel), { withFileTypes: true })) {
      const child = `${rel}/${entry.name}`;
      if (entry.isDirectory()) walk(child);
      else if (entry.isFile()) out.set(child, createHash('sha256').update(readFileSync(path.join(workspace, child))).digest('hex'));
    }
  };
  if (existsSync(path.join(workspace, 'code'))) walk('code');
  return out;
}

async function readRun(home: string, runId: string): Promise<StoredEvent[]> {
  const store = await SqliteEventStore.open(path.join(home, 'ledger.db'));
  try {
    const events: StoredEvent[] = [];
    for await (const r of store.readStream(streamName(runId))) {
      const e = r.event as unknown as StoredEvent;
      events.push({ type: e.type, seq: e.seq, occurredAt: e.occurredAt, data: e.data });
    }
    return events;
  } finally {
    await store.close();
  }
}

/** When the fact happened as far as the ledger knows: the observer's time where the event has one. */
const eventTime = (e: StoredEvent) => Date.parse(typeof e.data.observedAt === 'string' ? e.data.observedAt : e.occurredAt);

const round = (n: number, digits = 2) => Number(n.toFixed(digits));
const seconds = (m: PhaseMark | undefined) => (m ? (m.end - m.start) / 1000 : null);
/** The agent's own work: its phases' times added up (the submissions between them are not its work). */
const workSeconds = (r: AgentRecord) => (PHASES.every((p) => r.phases[p]) ? PHASES.reduce((n, p) => n + seconds(r.phases[p])!, 0) : null);

export async function instrumentationBench(): Promise<void> {
  const o = parseOptions(process.argv.slice(3));
  const source = agentSource();
  if (source.split('\n').includes(HEREDOC)) throw new Error(`the agent script must not contain the line ${HEREDOC}`);
  console.log(`scale: ${o.files} files created, ${o.modify} modified, ${o.delete} deleted, ${o.procs} processes`);
  const loadBefore = os.loadavg()[0];

  const off = await runUninstrumented(o, source);
  const offTotal = workSeconds(off) ?? NaN;
  console.log(`instrumentation off: ${PHASES.map((p) => `${p} ${seconds(off.phases[p])?.toFixed(2)} s`).join(', ')}; total ${offTotal.toFixed(2)} s`);
  // Long enough for a harness within the slowdown goal to let the agent finish every phase, so the
  // budget then ends an idle agent and the overrun is the harness's alone.
  const budgetS = o.budget ?? Math.max(15, Math.ceil(1.5 * offTotal + 10)) + SUBMIT_ALLOWANCE_S;

  const home = mkdtempSync(path.join(os.tmpdir(), 'a2rl-bench-instr-home-'));
  for (const name of ['A2RL_LEDGER_URL', 'A2RL_ARTIFACTS_URL', 'A2RL_READMODEL_URL', 'A2RL_WORKSPACES_DIR']) delete process.env[name];
  process.env.A2RL_HOME = home;
  const agentCommand = `cat > output/agent.mjs <<'${HEREDOC}'\n${source}${source.endsWith('\n') ? '' : '\n'}${HEREDOC}\nexec node output/agent.mjs ${agentArgs(o).join(' ')}\n`;

  try {
    const loop = new LoopDelayWindows();
    const runStarted = Date.now();
    loop.start();
    let summary;
    try {
      summary = await withRunApp((runs, gradingBaseUrl) =>
        runs.run({ task: 'ref-arith', agentCommand, budgetSeconds: budgetS, seed: 0, gradingBaseUrl, warn: (m) => console.error(m) }),
      );
    } finally {
      loop.stop();
    }
    const runWallS = (Date.now() - runStarted) / 1000;
    console.log(`instrumented run ${summary.runId}: ${runWallS.toFixed(1)} s wall, budget ${budgetS} s, sandbox ${summary.sandbox}, exit ${summary.exitReason}`);

    const on = readAgentRecord(path.join(summary.workspace, 'output'));
    const events = await readRun(home, summary.runId);
    const first = (type: string) => events.find((e) => e.type === type);

    // Final state of every file in code/: the workspace on disk against the last FileChanged per path.
    const disk = diskState(summary.workspace);
    const recorded = new Map<string, StoredEvent>();
    for (const e of events) if (e.type === 'FileChanged' && String(e.data.path).startsWith('code/')) recorded.set(String(e.data.path), e);
    let missing = 0;
    let wrong = 0;
    let blobsMissing = 0;
    for (const [file, sha256] of disk) {
      const last = recorded.get(file);
      if (!last || last.data.op === 'delete') missing += 1;
      else if (last.data.sha256 !== sha256) wrong += 1;
      else if (typeof last.data.key === 'string' && !existsSync(path.join(home, 'artifacts', last.data.key))) blobsMissing += 1;
    }
    let deletedNotRecorded = 0;
    for (const [file, last] of recorded) if (last.data.op !== 'delete' && !disk.has(file)) deletedNotRecorded += 1;
    const lost = missing + wrong + deletedNotRecorded + blobsMissing;

    const started = events.filter((e) => e.type === 'ProcessStarted');
    const isTrue = (e: StoredEvent) => [(e.data.argv as string[] | undefined)?.[0], e.data.executable].some((p) => typeof p === 'string' && path.posix.basename(p) === 'true');
    const trueRecorded = started.filter(isTrue).length;
    const trueLaunched = on.phases.procs?.count ?? 0;
    const gaps = events.filter((e) => e.type === 'ObservationGap');

    // Agent wall time per phase, on vs off.
    const phaseOn = Object.fromEntries(PHASES.map((p) => [p, seconds(on.phases[p])])) as Record<Phase, number | null>;
    const phaseOff = Object.fromEntries(PHASES.map((p) => [p, seconds(off.phases[p])])) as Record<Phase, number | null>;
    const completed = PHASES.every((p) => on.phases[p]);
    const onTotal = workSeconds(on);
    const ratio = (a: number | null, b: number | null) => (a === null || b === null || b <= 0 ? null : round(a / b));
    const slowdown = { ...(Object.fromEntries(PHASES.map((p) => [p, ratio(phaseOn[p], phaseOff[p])])) as Record<Phase, number | null>), total: ratio(onTotal, offTotal) };

    // Budget overrun, from the recorded times.
    const agentStarted = first('AgentStarted');
    const agentExited = first('AgentExited');
    const overrunS = agentStarted && agentExited ? (eventTime(agentExited) - (eventTime(agentStarted) + budgetS * 1000)) / 1000 : null;

    // How far the ledger ran behind the observers (append time minus observation time), and when the
    // last fact about code/ was observed relative to the end of the agent's file burst.
    const observed = events.filter((e) => typeof e.data.observedAt === 'string');
    const lagS = observed.length ? Math.max(...observed.map((e) => Date.parse(e.occurredAt) - eventTime(e))) / 1000 : null;
    const lastFileSeen = Math.max(...[...recorded.values()].map(eventTime));
    const filesSettledS = recorded.size && on.phases.delete ? (lastFileSeen - on.phases.delete.end) / 1000 : null;

    // The harness's event loop while the agent was busy (its start to its last phase's end) and over its whole life.
    const busyFrom = Math.min(agentStarted ? eventTime(agentStarted) : Infinity, on.phases.create?.start ?? Infinity);
    const busyTo = on.phases.procs?.end ?? (agentExited ? eventTime(agentExited) : Date.now());
    const busyLoop = loop.span(busyFrom, busyTo);
    const lifeLoop = loop.span(busyFrom, agentExited ? eventTime(agentExited) : Date.now());

    // /health as the agent saw it during the file burst (create, modify, delete), and off for reference.
    const burst = (r: AgentRecord) => {
      const from = r.phases.create?.start ?? Infinity;
      const to = r.phases.delete?.end ?? r.phases.modify?.end ?? Infinity;
      return r.health.filter((s) => s.t >= from && s.t <= to);
    };
    const burstOn = burst(on);
    const burstOff = burst(off);
    const healthErrors = burstOn.filter((s) => s.status !== 200).length;
    const healthP99 = percentile(burstOn.map((s) => s.ms), 99);

    // The submission right after the burst against one with nothing pending; the HTTP status is the phase's count.
    const submitS = seconds(on.phases.submit);
    const resubmitS = seconds(on.phases.resubmit);
    const submitStatus = [on.phases.submit?.count, on.phases.resubmit?.count];
    const load = { before: round(loadBefore), after: round(os.loadavg()[0]), cores: os.availableParallelism() };

    console.log(`agent phases with instrumentation: ${PHASES.map((p) => `${p} ${phaseOn[p]?.toFixed(2) ?? 'not reached'} s (${slowdown[p] ?? '-'}×)`).join(', ')}; total ${onTotal?.toFixed(2) ?? '-'} s (${slowdown.total ?? '-'}×)`);
    console.log(`files: ${disk.size} in code/ at the end, ${recorded.size} paths recorded; missing ${missing}, wrong content ${wrong}, deleted but not recorded ${deletedNotRecorded}, content not archived ${blobsMissing}`);
    console.log(`processes: ${trueLaunched} /bin/true launched, ${trueRecorded} recorded (${started.length} ProcessStarted in all); ${gaps.length} ObservationGap events`);
    console.log(
      `harness event loop while the agent was busy: p99 ${busyLoop.p99Ms.toFixed(1)} ms (corrected for stalls; ${busyLoop.rawP99Ms.toFixed(1)} ms per raw sample), ` +
        `max ${busyLoop.maxMs.toFixed(1)} ms; max over the agent's life ${lifeLoop.maxMs.toFixed(1)} ms (${busyLoop.samples} samples)`,
    );
    console.log(`/health during the burst: p99 ${healthP99.toFixed(1)} ms, max ${Math.max(0, ...burstOn.map((s) => s.ms)).toFixed(1)} ms over ${burstOn.length} requests (${healthErrors} not 200); reference server, off: p99 ${percentile(burstOff.map((s) => s.ms), 99).toFixed(1)} ms over ${burstOff.length}`);
    console.log(`budget overrun: ${overrunS?.toFixed(2) ?? '-'} s (AgentExited vs AgentStarted + ${budgetS} s)`);
    console.log(`ledger behind the observers by at most ${lagS?.toFixed(2) ?? '-'} s; last code/ change observed ${filesSettledS?.toFixed(2) ?? '-'} s after the burst ended`);
    console.log(
      `submission right after the burst answered in ${submitS?.toFixed(2) ?? '-'} s (HTTP ${submitStatus[0] ?? '-'}); with nothing pending ${resubmitS?.toFixed(2) ?? '-'} s (HTTP ${submitStatus[1] ?? '-'}); ` +
        `load average ${load.before} before, ${load.after} after, ${load.cores} cores`,
    );

    const goal = (value: number | null, limit: number, exact = false) => ({ value, goal: exact ? `== ${limit}` : `<= ${limit}`, pass: value !== null && (exact ? value === limit : value <= limit) });
    const goals = {
      final_states_lost: goal(lost, 0, true),
      processes_unrecorded: goal(trueLaunched === o.procs ? trueLaunched - trueRecorded : null, 0, true),
      agent_slowdown: goal(slowdown.total, 1.5),
      loop_delay_p99_ms: goal(round(busyLoop.p99Ms, 1), 100),
      // A request that failed (harness unreachable, or answering after its run closed) fails the goal too.
      health_p99_ms: { ...goal(burstOn.length ? round(healthP99, 1) : null, 50), ...(healthErrors ? { pass: false, failed_requests: healthErrors } : {}) },
      budget_overrun_s: goal(overrunS === null ? null : round(overrunS), 2),
      // Graded or not: what is measured is how long the harness kept the agent waiting.
      submit_after_burst_s: { ...goal(submitS === null ? null : round(submitS), 10), ...(submitStatus[0] !== 200 ? { pass: false, status: submitStatus[0] ?? null } : {}) },
    };
    console.log(
      JSON.stringify({
        bench: 'instrumentation',
        scale: { files: o.files, modify: o.modify, delete: o.delete, procs: o.procs, budget_s: budgetS },
        sandbox: summary.sandbox,
        files_on_disk: disk.size,
        file_paths_recorded: recorded.size,
        final_states_missing: missing,
        final_states_wrong: wrong,
        deleted_not_recorded: deletedNotRecorded,
        contents_not_archived: blobsMissing,
        processes_launched: trueLaunched,
        processes_recorded: trueRecorded,
        observation_gaps: gaps.length,
        phases_completed: completed,
        phase_s_on: phaseOn,
        phase_s_off: phaseOff,
        slowdown,
        loop_delay_p99_ms: round(busyLoop.p99Ms, 1),
        loop_delay_p99_raw_ms: round(busyLoop.rawP99Ms, 1),
        loop_delay_max_ms: round(lifeLoop.maxMs, 1),
        health_p99_ms_burst: round(healthP99, 1),
        health_max_ms_burst: round(Math.max(0, ...burstOn.map((s) => s.ms)), 1),
        health_samples_burst: burstOn.length,
        health_failed_burst: healthErrors,
        health_p99_ms_off: round(percentile(burstOff.map((s) => s.ms), 99), 1),
        budget_overrun_s: overrunS === null ? null : round(overrunS),
        ledger_lag_max_s: lagS === null ? null : round(lagS),
        submit_after_burst_s: submitS === null ? null : round(submitS),
        submit_idle_s: resubmitS === null ? null : round(resubmitS),
        submit_status: submitStatus.map((s) => s ?? null),
        load,
        files_settled_s: filesSettledS === null ? null : round(filesSettledS),
        run_wall_s: round(runWallS, 1),
        goals,
        pass: Object.values(goals).every((g) => g.pass),
      }),
    );
  } finally {
    if (o.keep) console.error(`kept: A2RL_HOME ${home}, uninstrumented dir ${off.dir}`);
    else for (const dir of [home, off.dir]) rmSync(dir, { recursive: true, force: true });
  }
}
