import type { INestApplication, INestApplicationContext } from '@nestjs/common';
import type { RunService, RunProgress, RunSummary } from '../../modules/runs/run.service.js';
import { loadConfig, type A2rlConfig } from '../config/config.js';
import { checkHome } from '../config/open-errors.js';
import { formatSeconds } from '../../modules/settings/duration.js';
import { inertLine } from '../../modules/reports/inert-text.js';
import { onInterrupt, signalExitCode } from './interrupt.js';
import { StatusLine } from './status-line.js';

// What the `a2rl` commands share. Each command builds the Nest application context it needs, does
// its work and closes it, so stores are flushed and closed before the process exits. Nest and the
// app's modules are imported when a command builds the app, not when the CLI starts (`a2rl --help`
// and the read-only commands, read-side.ts, never load them).

export async function withApp<T>(work: (app: INestApplicationContext) => Promise<T>): Promise<T> {
  checkHome(loadConfig().home); // fail fast, naming the variable, before any store is opened
  const [{ NestFactory }, { AppModule }, { nestOptions }] = await Promise.all([import('@nestjs/core'), import('../app.module.js'), import('../server.js')]);
  // A store that does not open is thrown as one OpenError line (src/cli.ts), not logged by Nest.
  const app = await NestFactory.createApplicationContext(AppModule, nestOptions());
  try {
    return await work(app);
  } finally {
    await app.close();
  }
}

/** An HTTP app (grading API) on a free loopback port for the runs this process executes. */
export async function withRunApp<T>(work: (runs: RunService, baseUrl: string, config: A2rlConfig, app: INestApplication) => Promise<T>): Promise<T> {
  const config = loadConfig();
  checkHome(config.home);
  const [{ loadServingConfig }, { createHttpApp }, { RunService: Runs }] = await Promise.all([
    import('../../modules/serving/serving.config.js'),
    import('../server.js'),
    import('../../modules/runs/run.service.js'),
  ]);
  // Serving and environment-server variables are read at each grading; a bad one fails here, before any run starts.
  loadServingConfig();
  const app = await createHttpApp();
  try {
    await app.listen(0, '127.0.0.1');
    const address = app.getHttpServer().address() as { port: number };
    const runs: RunService = app.get(Runs);
    const interrupted = await runs.recoverInterruptedRuns();
    for (const runId of interrupted) process.stderr.write(`recorded RunInterrupted for ${runId} (its harness had exited)\n`);
    // First Ctrl-C / SIGTERM: stop the agents and close their runs properly (exit 130/143 afterwards).
    // A second one quits at once; the 'exit' hooks still stop started model/environment servers and
    // the next a2rl start records the open runs as interrupted.
    const dispose = onInterrupt((signal, count) => {
      const code = signalExitCode(signal);
      if (count > 1) process.exit(code);
      process.exitCode = code;
      process.stderr.write(`\na2rl: ${signal}: stopping the agent; its run is closed and sealed as usual (${signal} again to quit at once)\n`);
      void runs.interruptAll();
    });
    try {
      return await work(runs, `http://127.0.0.1:${address.port}`, config, app);
    } finally {
      dispose();
    }
  } finally {
    await app.close();
  }
}

/** A run's status line (StatusLine): redrawn on a terminal as the run reports it, a plain line every 10 s otherwise. `done()` ends it. */
export function progressPrinter(): { onProgress: (p: RunProgress) => void; done: () => void } {
  const status = new StatusLine();
  let last = 0;
  const onProgress = (p: RunProgress) => {
    const plain = p.elapsedS - last >= 10 || p.remainingS <= 0;
    if (!status.live && !plain) return;
    last = p.elapsedS;
    const best = p.best === null ? '-' : p.best.toFixed(1);
    status.show(inertLine(`[${p.runId}] ${formatSeconds(p.elapsedS)} elapsed, ${formatSeconds(p.remainingS)} left · submissions ${p.submissions} · best ${best} (baseline ${p.baseline.toFixed(1)})`));
  };
  return { onProgress, done: () => status.stop() };
}

export const num = (n: number | null) => (n === null ? '-' : n.toFixed(1));

/** A run's --json summary; `declaredDriver` when the caller knows it apart from the attributed `driver`. */
export function summaryJson(r: RunSummary & { declaredDriver?: string | null }): string {
  const declared = r.declaredDriver === undefined ? {} : { declaredDriver: r.declaredDriver };
  return JSON.stringify({ runId: r.runId, task: r.task, agent: r.agent, driver: r.driver, ...declared, baseline: r.baseline, best: r.best, improvement: r.improvement, submissions: r.submissions, state: r.state });
}

/** Columns padded to their widest cell; every cell shown inert, on one line (modules/reports/inert-text.ts: cells hold recorded data). */
export function table(rows: string[][]): string {
  const cells = rows.map((r) => r.map(inertLine));
  const widths = cells[0].map((_, c) => Math.max(...cells.map((r) => r[c].length)));
  return cells.map((r) => r.map((cell, c) => (c === r.length - 1 ? cell : cell.padEnd(widths[c]))).join('  ')).join('\n');
}
