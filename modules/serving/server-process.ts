import { spawn, type ChildProcess } from 'node:child_process';
import pTimeout from 'p-timeout';
import { EvaluatorError } from '../../tasks/task-pack.js';
import type { ConfinedLaunch } from './confinement.js';
import { resolveExecutable } from './server-view.js';

const LOG_TAIL_LINES = 20;

export interface StartTimings {
  /** SIGTERM → SIGKILL grace in stop(). */
  stopGraceMs: number;
  /** Between readiness probes. */
  pollMs: number;
}

/** Pids of started servers' process groups, killed if the harness exits with them still running. */
const live = new Set<number>();
process.on('exit', () => {
  for (const pgid of live) killGroup(pgid, 'SIGKILL');
});

/** What to start: the spawn (a confined one, see confinement.ts) and the command as configured, for messages. */
export type ServerLaunch = Pick<ConfinedLaunch, 'argv' | 'file' | 'args' | 'fds' | 'spawnEnv'> & Partial<Pick<ConfinedLaunch, 'close' | 'leftovers'>>;

/**
 * One started helper server (model server, environment server) in its own process group, with the
 * tail of its output kept for error messages. `what` names it in errors ("the model server").
 */
export class ServerProcess {
  readonly started: Promise<void>;
  readonly argv: readonly string[];
  exit: string | null = null;
  private readonly child: ChildProcess;
  private readonly exited: Promise<void>;
  private readonly lines: string[] = [];
  private readonly partial = ['', ''];
  /** Output chunks read so far (see quiet()). */
  private chunks = 0;
  private stopping: Promise<void> | null = null;
  private reaper: ChildProcess | null = null;

  constructor(
    private readonly launch: ServerLaunch,
    private readonly graceMs: number,
    readonly what: string,
    /** The variable configuring the command, named when it cannot be started. */
    variable: string,
  ) {
    const argv = (this.argv = launch.argv);
    const fds = launch.fds ?? [];
    this.child = spawn(launch.file, launch.args, { detached: true, stdio: ['ignore', 'pipe', 'pipe', ...fds.map(() => 'pipe' as const)], env: launch.spawnEnv });
    fds.forEach((bytes, i) => {
      const pipe = this.child.stdio[3 + i] as NodeJS.WritableStream & { on(event: 'error', fn: () => void): unknown };
      pipe.on('error', () => undefined);
      pipe.end(bytes);
    });
    for (const [i, stream] of [this.child.stdout!, this.child.stderr!].entries()) {
      stream.setEncoding('utf8');
      stream.on('data', (chunk: string) => this.keep(i, chunk));
    }
    this.started = new Promise((resolve, reject) => {
      this.child.once('spawn', () => {
        live.add(this.child.pid!);
        this.reaper = startReaper(this.child.pid!, launch.leftovers ?? []);
        resolve();
      });
      this.child.once('error', (err) => {
        void this.release();
        reject(new EvaluatorError(`cannot start ${what} "${argv[0]}" (${variable}): ${err.message}`));
      });
    });
    const drained = Promise.all([this.child.stdout!, this.child.stderr!].map((stream) => new Promise((done) => stream.once('close', done))));
    this.exited = new Promise((resolve) => {
      this.child.once('exit', (code, sig) => {
        void Promise.race([drained, this.quiet(1000)]).then(() => {
          // 125: the sandbox or its bridge could not start the command (its message is in the output).
          this.exit = sig ? `killed by ${sig}` : `exit code ${code}`;
          resolve();
        });
      });
    });
  }

  /** Waits `ms` or until the server exits, whichever is first. */
  async exitedOr(ms: number): Promise<void> {
    await pTimeout(this.exited, { milliseconds: ms, message: false });
  }

  tail(): string {
    const lines = [...this.lines, ...this.partial.filter((p) => p.trim())];
    return lines.length ? `\nlast output of ${this.what}:\n${lines.slice(-LOG_TAIL_LINES).map((l) => l.slice(0, 500)).join('\n')}` : '';
  }

  /**
   * Polls `ready` until it answers true; fails with EvaluatorError (after stopping the server) when
   * the server exits first, the deadline passes (`timeoutVariable` is named) or `signal` aborts.
   */
  async waitUntilReady(ready: () => Promise<boolean>, timeoutMs: number, pollMs: number, timeoutVariable: string, signal?: AbortSignal): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    try {
      for (;;) {
        if (signal?.aborted) throw new EvaluatorError(`the evaluation was cancelled while ${this.what} was starting`);
        if (this.exit) await this.stop(); // its memory report first
        if (this.exit) throw new EvaluatorError(`${this.what} exited before becoming ready (${this.exit}): ${this.argv.join(' ')}${this.tail()}`);
        if (await ready()) return;
        if (Date.now() >= deadline) {
          throw new EvaluatorError(`${this.what} did not become ready within ${Math.round(timeoutMs / 1000)} s (${timeoutVariable}): ${this.argv.join(' ')}${this.tail()}`);
        }
        await this.exitedOr(pollMs);
      }
    } catch (err) {
      await this.stop();
      throw err;
    }
  }

  /**
   * SIGTERM to the whole group, up to the grace for the leader to exit, then SIGKILL to the group
   * anyway: workers the leader left behind (or a leader ignoring SIGTERM) must not outlive grading.
   */
  stop(): Promise<void> {
    this.stopping ??= (async () => {
      const pgid = this.child.pid;
      if (pgid === undefined) return;
      killGroup(pgid, 'SIGTERM');
      await this.exitedOr(this.graceMs);
      killGroup(pgid, 'SIGKILL');
      await this.exitedOr(this.graceMs);
      live.delete(pgid);
      disarmReaper(this.reaper);
      this.child.stdout?.destroy();
      this.child.stderr?.destroy();
      await this.release();
    })();
    return this.stopping;
  }

  /** Frees what the launch holds (its port, socket directory, cgroup); notes an out-of-memory kill. */
  async release(): Promise<void> {
    const close = this.launch.close;
    this.launch.close = undefined;
    const report = await close?.().catch(() => null);
    if (report?.oomKills) this.exit = `${this.exit ?? 'stopped'}; ${report.oomKills} process(es) killed for exceeding the memory limit (A2RL_SERVER_MEMORY)`;
  }

  /**
   * Resolves once the pipes have been silent for `ms`: output still in them when the process exits
   * (its last traceback line) is read first, while a leftover process holding them open cannot hold
   * the exit back. Each check first yields to the poll phase (setImmediate), so a harness whose event
   * loop was busy past `ms` still reads what is waiting before it decides the pipes are quiet. A
   * leftover that never stops writing is waited for at most five periods.
   */
  private quiet(ms: number): Promise<void> {
    return new Promise((done) => {
      const check = (seen: number, left: number): void => {
        setImmediate(() => (this.chunks === seen || left === 0 ? done() : setTimeout(() => check(this.chunks, left - 1), ms)));
      };
      setTimeout(() => check(this.chunks, 4), ms);
    });
  }

  /** Keeps the last lines of stdout (0) and stderr (1); a line split across chunks is joined first. */
  private keep(stream: number, chunk: string): void {
    this.chunks++;
    const parts = (this.partial[stream] + chunk).split('\n');
    this.partial[stream] = parts.pop()!.slice(-4096);
    this.lines.push(...parts.filter((l) => l.trim()).map((l) => l.slice(0, 500)));
    this.lines.splice(0, Math.max(0, this.lines.length - LOG_TAIL_LINES));
  }
}

const DISARM = 'disarm\n';

/** Tells a watchdog from startReaper that its group ended as it should: it exits without killing. */
export function disarmReaper(reaper: ChildProcess | null): void {
  reaper?.stdin?.end(DISARM);
}

/**
 * A watchdog for a harness that dies without running its exit hooks (SIGKILL, OOM killer): a tiny
 * detached Node process holding a pipe from the harness; when the pipe closes without being
 * disarmed, it SIGKILLs the process group (a server's, an agent's), then removes what the launch left
 * on the host (the socket directory, the emptied memory cgroup: `leftovers`). The owner disarms it
 * (disarmReaper) once the group is gone.
 */
const REAPER_SOURCE = `
const fs = require('node:fs');
let disarmed = false;
process.on('SIGINT', () => {});
process.on('SIGTERM', () => {});
process.stdin.on('data', (d) => { if (String(d).includes(${JSON.stringify(DISARM.trim())})) disarmed = true; });
process.stdin.on('end', () => {
  if (disarmed) process.exit(0);
  try { process.kill(-Number(process.argv[1]), 'SIGKILL'); } catch {}
  let tries = 0;
  const tidy = () => {
    let left = 0;
    for (const p of process.argv.slice(2)) {
      try {
        if (p.startsWith('/sys/')) fs.rmdirSync(p); // a cgroup: removable once its processes are gone
        else fs.rmSync(p, { recursive: true, force: true });
      } catch (err) { if (err.code !== 'ENOENT') left++; }
    }
    if (left && ++tries < 100) setTimeout(tidy, 50); else process.exit(0);
  };
  tidy();
});`;

export function startReaper(pgid: number, leftovers: readonly string[]): ChildProcess | null {
  try {
    const reaper = spawn(process.execPath, ['-e', REAPER_SOURCE, String(pgid), ...leftovers], { detached: true, stdio: ['pipe', 'ignore', 'ignore'] });
    reaper.on('error', () => undefined);
    reaper.stdin!.on('error', () => undefined);
    // Neither the watchdog nor its pipe may keep the harness alive.
    reaper.unref();
    (reaper.stdin as unknown as { unref?: () => void }).unref?.();
    return reaper;
  } catch {
    return null;
  }
}

function killGroup(pgid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(-pgid, sig);
  } catch {
    // ESRCH: the group is already gone
  }
}

/** A command that is nowhere on PATH fails before any sandbox is built, naming the variable that configures it. */
export function refuseMissingCommand(file: string, what: string, variable: string): void {
  if (!resolveExecutable(file, process.env.PATH ?? '')) throw new EvaluatorError(`cannot start ${what} "${file}" (${variable}): not found (spawn ${file} ENOENT)`);
}
