import 'reflect-metadata';
import { writeFile } from 'node:fs/promises';
import type { INestApplicationContext } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Command, CommanderError } from 'commander';
import { canonicalJson } from '../modules/ledger/events/canonical-json.js';
import { LedgerService } from '../modules/ledger/ledger.service.js';
import { ProjectionRunnerService } from '../modules/readmodels/readmodels.module.js';
import { checkAgent, listAgents } from '../modules/agents/agent-registry.js';
import { RunService, type RunProgress, type RunSummary } from '../modules/runs/run.service.js';
import { RunSource } from '../modules/query/run-source.js';
import { REPORT_FORMATS, renderReport, type ReportFormat } from '../projections/report/render.js';
import { filterRuns, formatNumber, resultsCsv, scoreboard } from '../projections/scoreboard/scoreboard.js';
import { TASKS } from '../tasks/index.js';
import { AppModule } from './app.module.js';
import { A2RL_CONFIG } from './config/config.module.js';
import { ConfigError, loadConfig, type A2rlConfig } from './config/config.js';
import { formatSeconds, parseDuration } from './duration.js';
import { createHttpApp, redact, serve } from './server.js';

// The `a2rl` command line (commander). Each command builds the Nest application context it needs,
// does its work and closes it, so stores are flushed and closed before the process exits.

async function withApp<T>(work: (app: INestApplicationContext) => Promise<T>): Promise<T> {
  loadConfig(); // fail fast, naming the variable, before any store is opened
  const app = await NestFactory.createApplicationContext(AppModule, { logger: ['error', 'warn'] });
  try {
    return await work(app);
  } finally {
    await app.close();
  }
}

/** An HTTP app (grading API) on a free loopback port for the runs this process executes. */
async function withRunApp<T>(work: (runs: RunService, baseUrl: string, config: A2rlConfig) => Promise<T>): Promise<T> {
  const config = loadConfig();
  const app = await createHttpApp();
  try {
    await app.listen(0, '127.0.0.1');
    const address = app.getHttpServer().address() as { port: number };
    const runs = app.get(RunService);
    const interrupted = await runs.recoverInterruptedRuns();
    for (const runId of interrupted) process.stderr.write(`recorded RunInterrupted for ${runId} (its harness had exited)\n`);
    return await work(runs, `http://127.0.0.1:${address.port}`, config);
  } finally {
    await app.close();
  }
}

/** One status line per second on a terminal, one every 10 s otherwise. */
function progressPrinter(): (p: RunProgress) => void {
  let last = 0;
  return (p) => {
    const tty = process.stderr.isTTY;
    if (!tty && p.elapsedS - last < 10 && p.remainingS > 0) return;
    last = p.elapsedS;
    const best = p.best === null ? '-' : p.best.toFixed(1);
    const line = `[${p.runId}] ${formatSeconds(p.elapsedS)} elapsed, ${formatSeconds(p.remainingS)} left · submissions ${p.submissions} · best ${best} (baseline ${p.baseline.toFixed(1)})`;
    process.stderr.write(tty ? `\r${line.padEnd(110)}` : `${line}\n`);
  };
}

const num = (n: number | null) => (n === null ? '-' : n.toFixed(1));

function summaryJson(r: RunSummary): string {
  return JSON.stringify({ runId: r.runId, task: r.task, agent: r.agent, driver: r.driver, baseline: r.baseline, best: r.best, improvement: r.improvement, submissions: r.submissions, state: r.state });
}

function summary(data: unknown, width = 100): string {
  const text = canonicalJson(data);
  return text.length > width ? `${text.slice(0, width - 1)}…` : text;
}

function table(rows: string[][]): string {
  const widths = rows[0].map((_, c) => Math.max(...rows.map((r) => r[c].length)));
  return rows.map((r) => r.map((cell, c) => (c === r.length - 1 ? cell : cell.padEnd(widths[c]))).join('  ')).join('\n');
}

export function buildCli(): Command {
  const program = new Command('a2rl')
    .description('Agent² RL-Bench as an event-sourced audit ledger with replayable runs')
    .showHelpAfterError()
    .exitOverride();

  program
    .command('serve')
    .description('serve the HTTP API (GET /health) and keep projections up to date')
    .action(async () => {
      await serve();
      await new Promise(() => undefined); // runs until a signal closes the app
    });

  program
    .command('events')
    .description("print a run's events in seq order (the raw forensic view)")
    .argument('<runId>', 'run id')
    .option('--json', 'NDJSON: one canonical JSON event per line')
    .action(async (runId: string, opts: { json?: boolean }) => {
      await withApp(async (app) => {
        const ledger = app.get(LedgerService);
        let count = 0;
        const rows = [['SEQ', 'OCCURRED AT', 'TYPE', 'DATA']];
        for await (const event of ledger.events(runId)) {
          count += 1;
          if (opts.json) process.stdout.write(`${canonicalJson(event)}\n`);
          else rows.push([String(event.seq), event.occurredAt, event.type, summary(event.data)]);
        }
        if (count === 0) throw new Error(`run "${runId}" has no events in the ${ledger.backend} ledger`);
        if (!opts.json) process.stdout.write(`${table(rows)}\n`);
      });
    });

  program
    .command('runs')
    .description('list runs from the run-list read model')
    .option('--json', 'one JSON object per line')
    .action(async (opts: { json?: boolean }) => {
      await withApp(async (app) => {
        const projections = app.get(ProjectionRunnerService);
        await projections.catchUp();
        const runs = await projections.runList();
        if (opts.json) {
          for (const run of runs) process.stdout.write(`${canonicalJson(run)}\n`);
          return;
        }
        if (!runs.length) {
          process.stdout.write('no runs recorded yet\n');
          return;
        }
        const rows = [['RUN', 'TASK', 'AGENT', 'STATE', 'EVENTS', 'LAST SEQ']];
        for (const r of runs) rows.push([r.runId, r.task ?? '-', r.agent ?? '-', r.state ?? '-', String(r.eventCount), String(r.lastSeq)]);
        process.stdout.write(`${table(rows)}\n`);
      });
    });

  program
    .command('scoreboard')
    .description('task × agent × driver: runs, baseline, best-of-budget mean with a 95% interval, improvement, valid-submission rate, route, failure classes')
    .option('--task <id>', 'only this task')
    .option('--agent <id>', 'only this agent')
    .option('--driver <llm>', 'only this driver')
    .option('--json', 'canonical JSON array of rows')
    .option('--csv', "the paper's results.csv: one row per run")
    .action(async (opts: { task?: string; agent?: string; driver?: string; json?: boolean; csv?: boolean }) => {
      if (opts.json && opts.csv) throw new Error('give --json or --csv, not both');
      await withApp(async (app) => {
        const filter = { task: opts.task, agent: opts.agent, driver: opts.driver };
        const runs = await app.get(RunSource).runs();
        if (opts.csv) {
          process.stdout.write(resultsCsv(filterRuns(runs, filter)));
          return;
        }
        const rows = scoreboard(runs, filter);
        if (opts.json) {
          process.stdout.write(`${canonicalJson(rows)}\n`);
          return;
        }
        if (!rows.length) {
          process.stdout.write('no runs match\n');
          return;
        }
        const n = (x: number | null) => (x === null ? '-' : x.toFixed(1));
        const lines = [['TASK', 'AGENT', 'DRIVER', 'RUNS', 'BASELINE', 'BEST (95% CI)', 'IMPROVEMENT', 'VALID', 'ROUTE', 'FAILURE CLASSES']];
        for (const r of rows) {
          const ci = r.best.ci95 ? ` [${n(r.best.ci95[0])}, ${n(r.best.ci95[1])}]` : '';
          lines.push([
            r.task ?? '-', r.agent ?? '-', r.driver ?? '-', String(r.runs), n(r.baseline), `${n(r.best.mean)}${ci}`, n(r.improvement),
            r.validSubmissionRate === null ? '-' : formatNumber(r.validSubmissionRate), r.route ?? '-',
            r.failureClasses.map((f) => `${f.class}×${f.count}`).join(' '),
          ]);
        }
        process.stdout.write(`${table(lines)}\n`);
      });
    });

  program
    .command('report')
    .description("a run's audit report: header, one section per submission (code diff, processes, rollouts, score), metrics, charts; every claim cites event seqs")
    .argument('<runId>', 'run id')
    .option('--format <format>', 'md | json | html', 'md')
    .option('-o, --output <file>', 'write to this file instead of stdout')
    .action(async (runId: string, opts: { format: string; output?: string }) => {
      if (!REPORT_FORMATS.includes(opts.format as ReportFormat)) throw new Error(`--format must be ${REPORT_FORMATS.join(', ')}, got "${opts.format}"`);
      await withApp(async (app) => {
        const input = await app.get(RunSource).reportInput(runId);
        if (!input) throw new Error(`no run "${runId}" in the ledger`);
        const text = await renderReport(input, opts.format as ReportFormat);
        if (!opts.output) {
          process.stdout.write(text);
          return;
        }
        await writeFile(opts.output, text);
        process.stderr.write(`wrote ${opts.output} (${Buffer.byteLength(text)} bytes)\n`);
      });
    });

  // Tamper evidence (issue 5): the ledger's signing key and `a2rl verify` (modules/audit); imported on use.
  const keys = program.command('keys').description("the ledger's Ed25519 signing key, under A2RL_HOME/keys (never in a workspace or a bundle)");
  keys
    .command('init')
    .description('create the signing key (refuses to replace an existing one; the first run creates it too)')
    .action(async () => {
      const { initSigningKey, keysDir } = await import('../modules/audit/tree-head.js');
      const { home } = loadConfig();
      const key = initSigningKey(home);
      process.stdout.write(`created signing key ${key.keyId} in ${keysDir(home)}\n${key.publicKeyPem}`);
    });
  keys
    .command('show')
    .description('print the public key (PEM) and its key id')
    .action(async () => {
      const { loadPublicKey, keysDir } = await import('../modules/audit/tree-head.js');
      const { home } = loadConfig();
      const key = loadPublicKey(home);
      if (!key) throw new Error(`no signing key in ${keysDir(home)}; create one with \`a2rl keys init\``);
      process.stdout.write(`${key.publicKeyPem}key id: ${key.keyId}\n`);
    });

  program
    .command('verify')
    .description("check a run end to end: dense seqs, every signed tree head (root and signature), every referenced blob's sha256, projections and reports rebuilt from zero equal to the live ones; exit 1 naming each failure")
    .argument('<runId>', 'run id')
    .option('--regrade', "also re-grade every archived checkpoint with the task's evaluator and compare the scores")
    .option('--json', 'print the result as one JSON object')
    .action(async (runId: string, opts: { regrade?: boolean; json?: boolean }) => {
      const [{ RunVerifier }, { loadPublicKey }, { READ_MODELS }, { ARTIFACT_STORE }, { EVENT_STORE }, path] = await Promise.all([
        import('../modules/audit/verify.service.js'),
        import('../modules/audit/tree-head.js'),
        import('../modules/readmodels/readmodels.module.js'),
        import('../modules/artifacts/artifacts.module.js'),
        import('../modules/ledger/tokens.js'),
        import('node:path'),
      ]);
      const result = await withApp(async (app) => {
        const config = app.get<A2rlConfig>(A2RL_CONFIG);
        const verifier = new RunVerifier({
          store: app.get(EVENT_STORE),
          artifacts: app.get(ARTIFACT_STORE),
          readModels: app.get(READ_MODELS),
          runs: app.get(RunSource),
          catchUp: () => app.get(ProjectionRunnerService).catchUp(),
          publicKeyPem: loadPublicKey(config.home)?.publicKeyPem ?? null,
          taskCacheDir: path.join(config.home, 'tasks'),
        });
        let shown = '';
        let lastAt = 0;
        return verifier.verify(runId, {
          regrade: opts.regrade,
          onProgress: (p) => {
            // Per stage on a terminal; otherwise a line when a stage starts and every 5 s.
            const line = `verify ${runId}: ${p.stage} ${p.total ? `${p.done}/${p.total}` : p.done}`;
            if (process.stderr.isTTY) process.stderr.write(`\r${line.padEnd(80)}`);
            else if (p.stage !== shown || Date.now() - lastAt > 5000) process.stderr.write(`${line}\n`);
            shown = p.stage;
            lastAt = Date.now();
          },
        });
      });
      if (process.stderr.isTTY) process.stderr.write('\n');
      if (opts.json) process.stdout.write(`${JSON.stringify(result)}\n`);
      else {
        for (const f of result.failures) {
          const where = [f.seq !== undefined ? `seq ${f.seq}` : '', f.artifact ?? ''].filter(Boolean).join(' ');
          process.stdout.write(`FAIL ${f.check}${where ? ` (${where})` : ''}: ${f.message}\n`);
        }
        const regraded = result.regraded === null ? '' : `, ${result.regraded} submissions re-graded`;
        process.stdout.write(
          `${result.ok ? 'OK' : 'FAILED'} ${runId}: ${result.events} events, ${result.treeHeads} signed tree head${result.treeHeads === 1 ? '' : 's'}, ${result.artifacts} artifacts` +
            `${regraded}; ${result.ok ? 'chain, artifacts, projections and reports verified' : `${result.failures.length} failures`}\n`,
        );
      }
      if (!result.ok) throw new Error(`run ${runId} failed verification (${result.failures.length} failures)`);
    });

  program
    .command('run')
    .description('run one benchmark run: prepare the workspace, launch the agent with its budget, grade its submissions')
    .requiredOption('--task <id>', 'task pack (see `a2rl tasks`)')
    .option('--agent <id>', 'agent (see `a2rl agents`)')
    .option('--agent-command <command>', 'run this shell command as the agent instead of --agent')
    .option('--driver <llm>', 'driver LLM to record (default: LLM_MODEL, CHAT_MODEL or OPENAI_MODEL, else the agent\'s own)')
    .option('--budget <duration>', 'wall-clock budget from agent start, e.g. 90s, 5m, 12h', '12h')
    .option('--seed <n>', 'seed recorded with the run and given to the agent', '0')
    .option('--mode <mode>', 'free | sft-only | rl-oriented', 'free')
    .option('--grace <duration>', 'time between SIGTERM and SIGKILL at budget expiry', '5s')
    .option('--json', 'print a JSON summary as the last line')
    .action(async (opts: { task: string; agent?: string; agentCommand?: string; driver?: string; budget: string; seed: string; mode: string; grace: string; json?: boolean }) => {
      if (!/^-?\d+$/.test(opts.seed)) throw new Error(`--seed must be an integer, got "${opts.seed}"`);
      if (!['free', 'sft-only', 'rl-oriented'].includes(opts.mode)) throw new Error(`--mode must be free, sft-only or rl-oriented, got "${opts.mode}"`);
      if (!opts.agent && opts.agentCommand === undefined) throw new Error('give --agent <id> or --agent-command \'<shell command>\'');
      const budgetSeconds = parseDuration(opts.budget);
      const graceMs = parseDuration(opts.grace) * 1000;
      await withRunApp(async (runs, gradingBaseUrl) => {
        runs.resolveAgent(opts); // unknown agent or missing prerequisites: fail before recording anything
        const result = await runs.run({
          task: opts.task, agent: opts.agent, agentCommand: opts.agentCommand, driver: opts.driver, budgetSeconds,
          seed: Number(opts.seed), mode: opts.mode as 'free', graceMs, gradingBaseUrl, onProgress: progressPrinter(),
        });
        if (process.stderr.isTTY) process.stderr.write('\n');
        process.stdout.write(
          `run ${result.runId} (${result.task}, agent ${result.agent}): baseline ${num(result.baseline)}, best ${num(result.best)}, ` +
            `improvement ${num(result.improvement)}, ${result.submissions} submissions, agent ${result.exitReason}, sandbox ${result.sandbox}\n` +
            `  events: a2rl events ${result.runId}   workspace: ${result.workspace}\n`,
        );
        if (opts.json) process.stdout.write(`${summaryJson(result)}\n`);
      });
    });

  program
    .command('demo')
    .description('run the reference agent once on each reference task and print a table')
    .option('--budget <duration>', 'budget per run', '90s')
    .option('--json', 'print one JSON summary per run')
    .action(async (opts: { budget: string; json?: boolean }) => {
      const budgetSeconds = parseDuration(opts.budget);
      await withRunApp(async (runs, gradingBaseUrl, config) => {
        const results: RunSummary[] = [];
        for (const task of TASKS) {
          process.stderr.write(`running the reference agent on ${task.id} (L${task.level}: ${task.title}), budget ${formatSeconds(budgetSeconds)}\n`);
          results.push(await runs.run({ task: task.id, agent: 'reference', budgetSeconds, seed: 0, gradingBaseUrl, onProgress: progressPrinter() }));
          if (process.stderr.isTTY) process.stderr.write('\n');
        }
        const rows = [['TASK', 'BASELINE', 'BEST', 'IMPROVEMENT', 'SUBMISSIONS', 'RUN']];
        for (const r of results) rows.push([r.task, num(r.baseline), num(r.best), num(r.improvement), String(r.submissions), r.runId]);
        process.stdout.write(`\n${table(rows)}\n\n`);
        process.stdout.write(`events:     ${redact(config.ledgerUrl)}   (a2rl events <run>, a2rl runs)\n`);
        process.stdout.write(`artifacts:  ${redact(config.artifactsUrl)}\n`);
        process.stdout.write(`workspaces: ${config.workspacesDir}\n`);
        if (opts.json) for (const r of results) process.stdout.write(`${summaryJson(r)}\n`);
      });
    });

  program
    .command('tasks')
    .description('list the task packs')
    .action(() => {
      const rows = [['TASK', 'LEVEL', 'BASE MODEL', 'EVALUATOR', 'TITLE']];
      for (const t of TASKS) rows.push([t.id, `L${t.level}${t.environment ? ' (interactive)' : ''}`, t.baseModel, t.evaluatorVersion, t.title]);
      process.stdout.write(`${table(rows)}\n`);
    });

  program
    .command('agents')
    .description('list the agents and what is missing on this machine to use each')
    .action(() => {
      const rows = [['AGENT', 'KIND', 'READY', 'MISSING', 'TITLE']];
      for (const spec of listAgents()) {
        const { missing } = checkAgent(spec);
        rows.push([spec.id, spec.kind, missing.length ? 'no' : 'yes', missing.join('; ') || '-', spec.title]);
      }
      process.stdout.write(`${table(rows)}\n`);
    });

  // `a2rl replay` (issue 5): modules/replay; imported on use so other commands do not load it.
  program
    .command('replay')
    .description("exact replay of a run's workspace: its files at a seq or time (--at … --out), the step-through timeline (--timeline), or what changed between two points (--diff)")
    .argument('<runId>', 'run id')
    .option('--at <seq|time>', 'materialise the workspace right after this event: a seq, or an ISO 8601 time (the last event at or before it)')
    .option('--out <dir>', 'with --at: directory to write the files to (must be empty or new)')
    .option('--force', 'with --out: empty a non-empty directory first')
    .option('--timeline', 'list every event: seq, time, type, one-line summary')
    .option('--diff <points...>', 'two points (seq or ISO time): files added, removed and modified between them, with unified diffs of text files')
    .option('--json', 'with --timeline: one JSON object per event; with --diff or --at: one JSON object')
    .action(async (runId: string, opts: { at?: string; out?: string; force?: boolean; timeline?: boolean; diff?: string[]; json?: boolean }) => {
      const modes = [opts.at !== undefined, opts.timeline === true, opts.diff !== undefined].filter(Boolean).length;
      if (modes !== 1) throw new Error('give exactly one of --at <seq|time> --out <dir>, --timeline, --diff <seqA> <seqB>');
      if (opts.at !== undefined && !opts.out) throw new Error('--at needs --out <dir>');
      if (opts.diff && opts.diff.length !== 2) throw new Error(`--diff takes two points (seq or ISO time), got ${opts.diff.length}`);
      const [{ ReplayService, parseReplayPoint }, format, { READ_MODELS }, { ARTIFACT_STORE }, { EVENT_STORE }] = await Promise.all([
        import('../modules/replay/replay.service.js'),
        import('../modules/replay/format.js'),
        import('../modules/readmodels/readmodels.module.js'),
        import('../modules/artifacts/artifacts.module.js'),
        import('../modules/ledger/tokens.js'),
      ]);
      const at = opts.at === undefined ? undefined : parseReplayPoint(opts.at);
      const points = opts.diff?.map(parseReplayPoint);
      await withApp(async (app) => {
        const projections = app.get(ProjectionRunnerService);
        const replay = new ReplayService({
          events: app.get(EVENT_STORE),
          readModels: app.get(READ_MODELS),
          artifacts: app.get(ARTIFACT_STORE),
          catchUp: () => projections.catchUp('workspace-revisions'),
        });
        if (at !== undefined) {
          const result = await replay.materialize(runId, at, opts.out!, { force: opts.force });
          process.stdout.write(opts.json ? `${canonicalJson(result)}\n` : format.renderMaterialized(result));
        } else if (points) {
          const diff = await replay.diff(runId, points[0], points[1]);
          process.stdout.write(opts.json ? `${canonicalJson(diff)}\n` : format.renderDiff(diff));
        } else {
          const entries = await replay.timeline(runId);
          process.stdout.write(opts.json ? format.timelineJson(entries) : format.renderTimeline(entries));
        }
      });
    });

  // Audit bundles (issue 5): modules/audit/bundle, imported on use. verify-bundle is fully offline:
  // it reads no configuration, no A2RL_HOME and no store, only the bundle and the --pubkey file.
  program
    .command('export')
    .description("write a run's self-contained audit bundle (.tar.gz): events.ndjson, signed tree heads with proofs, the public key, artifacts, reports")
    .argument('<runId>', 'run id')
    .requiredOption('-o, --output <bundle.tar.gz>', 'bundle file to write')
    .option('--with-checkpoints', "include the submitted checkpoints' files (left out by default; the manifest marks them omitted)")
    .action(async (runId: string, opts: { output: string; withCheckpoints?: boolean }) => {
      const [{ exportBundle }, { loadPublicKey, keysDir }, { openEventStore }, { openArtifactStore }] = await Promise.all([
        import('../modules/audit/bundle/index.js'),
        import('../modules/audit/tree-head.js'),
        import('../infra/eventstore/open-event-store.js'),
        import('../infra/artifacts/open-artifact-store.js'),
      ]);
      const config = loadConfig();
      const key = loadPublicKey(config.home);
      if (!key) throw new Error(`no signing key in ${keysDir(config.home)}: runs of this ledger were not signed, so there is nothing to verify a bundle against`);
      const eventStore = await openEventStore(config.ledgerUrl);
      try {
        const artifacts = await openArtifactStore(config.artifactsUrl);
        try {
          const taskLevel = (task: string) => TASKS.find((t) => t.id === task)?.level ?? null;
          const s = await exportBundle({ runId, eventStore, artifacts, publicKeyPem: key.publicKeyPem, withCheckpoints: opts.withCheckpoints, taskLevel }, opts.output);
          const omitted = s.omittedBlobs ? ` (${s.omittedBlobs} checkpoint files left out; --with-checkpoints includes them)` : '';
          process.stdout.write(`wrote ${opts.output}: run ${runId}, ${s.events} events, ${s.heads} signed tree heads, ${s.blobs} blobs${omitted}, key id ${key.keyId}\n`);
        } finally {
          await artifacts.close();
        }
      } finally {
        await eventStore.close();
      }
    });

  program
    .command('verify-bundle')
    .description('verify an audit bundle offline (no ledger, network or A2RL_HOME): every event line, signed head, proof, blob and report; exit 1 naming the first failure')
    .argument('<bundle.tar.gz>', 'bundle written by `a2rl export`')
    .option('--pubkey <file>', "the signer's public key (PEM) obtained independently: the bundled key must be this one")
    .option('--json', 'print the result, with every failure, as one JSON object')
    .action(async (file: string, opts: { pubkey?: string; json?: boolean }) => {
      const [{ verifyBundle, describeFailure }, { existsSync, readFileSync, statSync }] = await Promise.all([import('../modules/audit/bundle/index.js'), import('node:fs')]);
      if (!existsSync(file) || !statSync(file).isFile()) throw new Error(`no bundle file ${file}`);
      let publicKeyPem: string | undefined;
      if (opts.pubkey !== undefined) {
        try {
          publicKeyPem = readFileSync(opts.pubkey, 'utf8');
        } catch (err) {
          throw new Error(`cannot read --pubkey ${opts.pubkey}: ${(err as Error).message}`);
        }
      }
      const result = await verifyBundle(file, { publicKeyPem });
      if (opts.json) process.stdout.write(`${JSON.stringify({ ...result, failures: result.failures.map((f) => ({ ...f, text: describeFailure(f) })) })}\n`);
      if (!result.ok) {
        const more = result.failures.length > 1 ? ` (and ${result.failures.length - 1} more${opts.json ? '' : '; --json lists all'})` : '';
        throw new Error(`bundle ${file} failed verification: ${describeFailure(result.failures[0])}${more}`);
      }
      if (!opts.json) {
        const omitted = result.omittedBlobs ? ` (${result.omittedBlobs} checkpoint files not included)` : '';
        process.stdout.write(`OK ${file}: run ${result.runId}, ${result.events} events, ${result.heads} signed tree heads, ${result.blobs} blobs${omitted}; chain, proofs, artifacts and reports verified\n`);
        if (!result.pinnedKey) process.stderr.write('note: checked against the key inside the bundle only; pass --pubkey <file> with the signer\'s key obtained independently to rule out a re-signed bundle\n');
      }
    });

  const projections = program.command('projections').description('read-model projections: status and rebuild');
  projections
    .command('status')
    .description('name, checkpoint and lag of every projection')
    .option('--json', 'JSON array')
    .action(async (opts: { json?: boolean }) => {
      await withApp(async (app) => {
        const status = await app.get(ProjectionRunnerService).status();
        if (opts.json) {
          process.stdout.write(`${JSON.stringify(status)}\n`);
          return;
        }
        const rows = [['NAME', 'VERSION', 'CHECKPOINT', 'PROCESSED', 'LAG']];
        for (const s of status) rows.push([s.name, String(s.version), s.checkpoint ?? '(start)', String(s.eventsProcessed), String(s.lag)]);
        process.stdout.write(`${table(rows)}\n`);
      });
    });
  projections
    .command('rebuild')
    .description('drop a projection (or all) and rebuild it from the first event')
    .argument('[name]', 'projection name (default: all)')
    .action(async (name: string | undefined) => {
      await withApp(async (app) => {
        const started = process.hrtime.bigint();
        const results = await app.get(ProjectionRunnerService).rebuild(name, (p) => {
          process.stderr.write(`\r  ${p.name}: ${p.processed} events`);
        });
        process.stderr.write('\n');
        const seconds = Number(process.hrtime.bigint() - started) / 1e9;
        for (const r of results) process.stdout.write(`rebuilt ${r.name}: ${r.processed} events\n`);
        process.stdout.write(`rebuild took ${seconds.toFixed(2)} s\n`);
      });
    });

  return program;
}

export async function runCli(argv: string[]): Promise<number> {
  const program = buildCli();
  try {
    await program.parseAsync(argv, { from: 'user' });
    return 0;
  } catch (err) {
    if (err instanceof CommanderError) return err.exitCode;
    if (err instanceof ConfigError) {
      console.error(`a2rl: configuration error: ${err.message}`);
      return 2;
    }
    console.error(`a2rl: ${err instanceof Error ? err.message : String(err)}`);
    return 1;
  }
}

// `a2rl events … | head` closes stdout early: that is the reader's choice, not an error.
process.stdout.on('error', (err: NodeJS.ErrnoException) => {
  if (err.code === 'EPIPE') process.exit(process.exitCode ?? 0);
  throw err;
});

const exitCode = await runCli(process.argv.slice(2));
process.exitCode = exitCode;
