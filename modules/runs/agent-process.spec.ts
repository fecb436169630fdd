import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { killLeftoverProcessGroup, launchAgent, type LaunchOptions } from './agent-process.js';
import { readAllStats, readArgv } from '../instrumentation/process-monitor.js';
import { until } from '../../test/testing/helpers.js';

/** Waits until `condition` holds (never a fixed sleep: a loaded machine is slow); fails after a generous deadline. */
/** Live (non-zombie) processes whose command line contains `marker`. */
function survivors(marker: string): number[] {
  return [...readAllStats().values()]
    .filter((st) => st.state !== 'Z' && (readArgv(st.pid) ?? []).join(' ').includes(marker))
    .map((st) => st.pid);
}

function bash(script: string, extra: Partial<LaunchOptions> = {}): LaunchOptions {
  return { file: 'bash', args: ['-c', script], cwd: tmpdir(), env: process.env, budgetMs: 10_000, onOutput: () => {}, ...extra };
}

describe('launchAgent', () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'a2rl-agent-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('kills a tree that ignores SIGTERM, including a setsid grandchild, at budget expiry + grace', async () => {
    const marker = `${100 + Math.random()}`.slice(0, 12);
    const script = `trap "" TERM; sleep ${marker} & sleep ${marker} & setsid bash -c 'trap "" TERM; sleep ${marker}; true' & wait`;
    const seen: number[] = [];
    const started = Date.now();
    // The budget leaves the tree ample time to start on a loaded machine; the time it took is `npm run bench -- timings`.
    const agent = await launchAgent(
      bash(script, { budgetMs: 3_000, graceMs: 400, monitor: { intervalMs: 50, onStart: (p) => seen.push(p.pid) } }),
    );
    await until('three sleeps running', () => survivors(marker).length >= 3);
    const exit = await agent.exited;
    expect(exit.reason).toBe('timeout');
    expect(exit.signal).toBe('SIGKILL'); // it ignored SIGTERM
    expect(Date.now() - started).toBeGreaterThanOrEqual(3_400);
    expect(survivors(marker)).toEqual([]);
    const alive = new Set(readAllStats().keys());
    expect(seen.filter((pid) => alive.has(pid) && readAllStats().get(pid)?.state !== 'Z')).toEqual([]);
  });

  it('kills the same kind of tree inside a bwrap pid namespace', async () => {
    const marker = `${400 + Math.random()}`.slice(0, 12);
    const inner = `trap "" TERM; sleep ${marker} & setsid bash -c 'trap "" TERM; sleep ${marker}; true' & wait`;
    const bwrap = ['--die-with-parent', '--unshare-pid', '--ro-bind', '/', '/', '--proc', '/proc', '--dev', '/dev', 'bash', '-c', inner];
    const agent = await launchAgent({ ...bash(''), file: 'bwrap', args: bwrap, budgetMs: 3_000, graceMs: 300 });
    await until('two sleeps running', () => survivors(marker).length >= 2);
    expect((await agent.exited).reason).toBe('timeout');
    expect(survivors(marker)).toEqual([]);
  });

  it('reports completed for exit 0 and sweeps background leftovers, delivering all output', async () => {
    const marker = `${200 + Math.random()}`.slice(0, 12);
    const out: string[] = [];
    const agent = await launchAgent(
      bash(`sleep ${marker} & echo hello; echo oops >&2; exit 0`, {
        graceMs: 300,
        onOutput: (stream, chunk) => out.push(`${stream}:${chunk.toString()}`),
      }),
    );
    expect(await agent.exited).toMatchObject({ exitCode: 0, reason: 'completed' });
    expect(out).toEqual(expect.arrayContaining(['stdout:hello\n', 'stderr:oops\n']));
    expect(survivors(marker)).toEqual([]);
  });

  it('reports crashed for a non-zero exit and for a signal it did not send', async () => {
    expect(await (await launchAgent(bash('exit 3'))).exited).toMatchObject({ exitCode: 3, reason: 'crashed' });
    expect(await (await launchAgent(bash('kill -SEGV $$'))).exited).toMatchObject({ signal: 'SIGSEGV', reason: 'crashed' });
  });

  it('reports killed when kill() is called, SIGTERM being enough for a cooperative agent', async () => {
    const agent = await launchAgent(bash('sleep 30'));
    const exit = await agent.kill();
    expect(exit).toMatchObject({ signal: 'SIGTERM', reason: 'killed' });
    expect(exit.endedAt).toBeGreaterThanOrEqual(agent.startedAt.getTime());
    await expect(agent.exited).resolves.toEqual(exit);
  });

  it('refuses to launch a command that does not exist', async () => {
    await expect(launchAgent({ ...bash(''), file: '/nonexistent/agent' })).rejects.toThrow(/cannot start agent/);
  });

  /**
   * A harness that launches an agent whose bash runs two sleeps, waits until both run, then dies
   * without cleaning up; with `killWatchdog` it first SIGKILLs its watchdog (the node -e child), as if
   * that had died with it.
   */
  function crashingHarness(marker: string, pidFile: string, killWatchdog: boolean): void {
    const harness = `
      import { readFileSync, readdirSync } from 'node:fs';
      import { launchAgent } from ${JSON.stringify(new URL('./agent-process.ts', import.meta.url).pathname)};
      await launchAgent({ file: 'bash', args: ['-c', 'sleep ${marker} & sleep ${marker}; true'], cwd: '/tmp', env: process.env,
        budgetMs: 60000, onOutput: () => {}, pidFile: ${JSON.stringify(pidFile)} });
      const argv = (pid) => { try { return readFileSync('/proc/' + pid + '/cmdline', 'utf8').split('\\0'); } catch { return []; } };
      for (const end = Date.now() + 20000; Date.now() < end; await new Promise((r) => setTimeout(r, 20))) {
        if (readdirSync('/proc').filter((p) => argv(p).join(' ') === 'sleep ${marker} ').length >= 2) break;
      }
      if (${killWatchdog}) {
        for (const child of readFileSync('/proc/self/task/' + process.pid + '/children', 'utf8').trim().split(/\\s+/)) {
          if (argv(child)[1] === '-e') process.kill(Number(child), 'SIGKILL');
        }
      }
      process.exit(0);`;
    execFileSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', harness], { stdio: 'ignore' });
    expect(JSON.parse(readFileSync(pidFile, 'utf8'))).toMatchObject({ pgid: expect.any(Number) });
  }

  it('kills the agent\'s process group when its harness dies without cleaning up (the watchdog)', async () => {
    const marker = `${300 + Math.random()}`.slice(0, 12);
    const pidFile = join(dir, 'agent-watched.pid');
    crashingHarness(marker, pidFile, false);
    await until('the agent\'s processes gone', () => survivors(marker).length === 0);
    expect(await killLeftoverProcessGroup(pidFile)).toBe(0);
  });

  it('lets the next harness kill the process group left behind by a crashed harness whose watchdog died too', async () => {
    const marker = `${300 + Math.random()}`.slice(0, 12);
    const pidFile = join(dir, 'agent.pid');
    crashingHarness(marker, pidFile, true);
    // Both sleeps, not just any command line holding the marker (strace's and bash's hold it before bash has forked).
    const sleeps = () => survivors(marker).filter((pid) => readArgv(pid)?.join(' ') === `sleep ${marker}`);
    await until('both sleeps running', () => sleeps().length >= 2);
    expect(await killLeftoverProcessGroup(pidFile)).toBeGreaterThanOrEqual(2);
    await until('the leftovers gone', () => survivors(marker).length === 0);
    expect(await killLeftoverProcessGroup(pidFile)).toBe(0); // file removed
  });
});
