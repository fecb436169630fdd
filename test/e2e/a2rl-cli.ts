import { execFile, execFileSync } from 'node:child_process';
import Database from 'better-sqlite3';
import path from 'node:path';
import { promisify } from 'node:util';

// Runs the built `a2rl` binary (src/bin/a2rl.js → dist/, built by `npm test`'s pretest) as a child
// process, for the end-to-end specs. A non-zero exit is a result to assert on, not an exception.

export const A2RL_BIN = path.resolve('src/bin/a2rl.js');

/** Whether agents run here as CI runs them: a root harness with bubblewrap on PATH (the sandbox). */
export const sandboxedAsRoot =
  process.getuid?.() === 0 &&
  (() => {
    try {
      execFileSync('sh', ['-c', 'command -v bwrap'], { stdio: 'ignore' });
      return true;
    } catch {
      return false;
    }
  })();

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

const exec = promisify(execFile);

export async function runA2rl(args: string[], opts: { env: NodeJS.ProcessEnv; cwd?: string }): Promise<CliResult> {
  try {
    const r = await exec(process.execPath, [A2RL_BIN, ...args], { env: opts.env, cwd: opts.cwd, maxBuffer: 64 * 1024 * 1024 });
    return { code: 0, stdout: r.stdout, stderr: r.stderr };
  } catch (e) {
    const err = e as CliResult;
    return { code: err.code, stdout: err.stdout, stderr: err.stderr };
  }
}

/** Waits (until `deadline`, epoch ms) for the run's AgentStarted to be in the home's SQLite ledger: a read-only peek at the file. */
export async function agentStartedIn(home: string, runId: string, deadline: number): Promise<void> {
  const ledger = new Database(path.join(home, 'ledger.db'), { readonly: true });
  try {
    const started = ledger.prepare("SELECT 1 FROM events WHERE stream = ? AND type = 'AgentStarted'");
    while (!started.get(`run-${runId}`) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
  } finally {
    ledger.close();
  }
}
