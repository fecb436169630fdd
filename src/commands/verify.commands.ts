import type { Command } from 'commander';
import { loadConfig, type A2rlConfig } from '../config/config.js';
import { checkHome } from '../config/open-errors.js';
import type { VerifyDeps, VerifyOptions, VerifyProgress, VerifyResult } from '../../modules/audit/verify.service.js';
import { inertLine } from '../../modules/reports/inert-text.js';
import { recordCliAction } from './access-trail.js';
import { appSide } from './app-side.js';
import { StatusLine } from './status-line.js';
import { jsonOut } from './terminal.js';

/** `a2rl verify`: a run's record checked in place (registered with the audit commands). */
export function registerVerifyCommand(program: Command): void {
  program
    .command('verify')
    .description("check a run's record: dense seqs, every signed tree head (root and signature), the stored columns against the signed bytes, the seal, every referenced blob's sha256, the workspace integrity checks; with --rebuild, also the projections and reports rebuilt from zero against the live ones; exit 1 naming each failure; recorded in the access stream (actor cli: the OS user)")
    .argument('<runId>', 'run id')
    .option('--rebuild', 'also rebuild every projection of the run from zero and compare its rows and the md/json/html reports with the live ones (time and memory grow with the run)')
    .option('--regrade', "also re-grade every archived checkpoint with the task's evaluator and compare the scores")
    .option('--json', 'print the result as one JSON object')
    .action(async (runId: string, opts: { rebuild?: boolean; regrade?: boolean; json?: boolean }) => {
      const [{ loadPublicKey }, path] = await Promise.all([
        import('../../modules/ledger/tree-head.js'),
        import('node:path'),
      ]);
      let shown = '';
      let lastAt = 0;
      const status = new StatusLine();
      const onProgress = (p: VerifyProgress) => {
        // Redrawn on a terminal; otherwise a line when a stage starts and every 5 s.
        status.show(inertLine(`verify ${runId}: ${p.stage} ${p.total ? `${p.done}/${p.total}` : p.done}`), p.stage !== shown || Date.now() - lastAt > 5000);
        shown = p.stage;
        lastAt = Date.now();
      };
      const config = loadConfig();
      checkHome(config.home); // one line naming A2RL_HOME, before its keys or stores are read
      const base = {
        publicKeyPem: loadPublicKey(config.home)?.publicKeyPem ?? null,
        taskCacheDir: path.join(config.home, 'tasks'),
        datasetsDir: path.join(config.home, 'datasets'),
      };
      const options = { rebuild: opts.rebuild, regrade: opts.regrade, onProgress };
      const result = await (opts.rebuild ? verifyWithReadModels(base, runId, options) : verifyRecord(config, base, runId, options)).finally(() => status.stop());
      const checks = `${opts.rebuild ? ', projections and reports rebuilt' : ''}${result.regraded !== null ? `, ${result.regraded} submissions re-graded` : ''}`;
      const first = result.failures[0];
      await recordCliAction(config, {
        action: 'verify',
        target: { runId },
        done: true,
        verified: result.ok,
        detail: result.ok ? `${result.events} events, ${result.treeHeads} signed heads, ${result.artifacts} artifacts${checks}` : `${result.failures.length} failures${checks}; first: ${first.check}${first.seq !== undefined ? ` (seq ${first.seq})` : ''}: ${first.message}`,
      });
      if (opts.json) process.stdout.write(jsonOut(`${JSON.stringify(result)}\n`));
      else {
        // Failure messages quote recorded data (paths, names): each is one inert line, and the verdict comes last.
        for (const f of result.failures) {
          const where = [f.seq !== undefined ? `seq ${f.seq}` : '', f.artifact ?? ''].filter(Boolean).join(' ');
          process.stdout.write(`${inertLine(`FAIL ${f.check}${where ? ` (${where})` : ''}: ${f.message}`)}\n`);
        }
        const regraded = result.regraded === null ? '' : `, ${result.regraded} submissions re-graded`;
        process.stdout.write(
          `${result.ok ? 'OK' : 'FAILED'} ${inertLine(runId)}: ${result.events} events, ${result.treeHeads} signed tree head${result.treeHeads === 1 ? '' : 's'}, ${result.artifacts} artifacts` +
            `${regraded}; ${result.ok ? (result.projections ? 'chain, artifacts, projections and reports verified' : 'chain, artifacts and integrity verified (read models not rebuilt: --rebuild)') : `${result.failures.length} failures`}\n`,
        );
      }
      if (!result.ok) throw new Error(`run ${runId} failed verification (${result.failures.length} failures)`);
    });
}

type VerifyBase = Pick<VerifyDeps, 'publicKeyPem' | 'taskCacheDir' | 'datasetsDir'>;

/** verify without --rebuild: the ledger and the artifact store only, opened without the app (and its read models). */
async function verifyRecord(config: A2rlConfig, base: VerifyBase, runId: string, options: VerifyOptions): Promise<VerifyResult> {
  const [{ RunVerifier }, { openArtifacts, openLedger }, os] = await Promise.all([
    import('../../modules/audit/verify.service.js'),
    import('../open-stores.js'),
    import('node:os'),
  ]);
  const store = await openLedger(config);
  let reader: { close(): void } | undefined;
  try {
    const artifacts = await openArtifacts(config);
    try {
      // A long run is read in segments at once, one per core, each thread opening the ledger itself;
      // an SQLite ledger in pages, SQLite joining each page's rows (modules/ledger/stores/raw-scan.ts).
      let parallelRead: VerifyDeps['parallelRead'];
      if (store.backend === 'sqlite') {
        const [{ SqliteRawScan }, { sqlitePageScanner }, { sqlitePath }, { streamName }] = await Promise.all([
          import('../../modules/ledger/stores/raw-scan.js'),
          import('../../modules/audit/page-scan-threads.js'),
          import('../../modules/settings/store-url.js'),
          import('../../modules/ledger/events/ids.js'),
        ]);
        const file = sqlitePath(config.ledgerUrl);
        const raw = SqliteRawScan.open(file);
        reader = raw;
        parallelRead = { scanner: sqlitePageScanner(file), threads: os.availableParallelism(), pages: (run, from, count) => raw.pages(streamName(run), from, count) };
      } else if (store.backend !== 'memory') {
        const { threadedSegmentScanner } = await import('../record-scan-threads.js');
        parallelRead = { scanner: threadedSegmentScanner(config.ledgerUrl), threads: os.availableParallelism() };
      }
      return await new RunVerifier({ ...base, store, artifacts, parallelRead }).verify(runId, options);
    } finally {
      reader?.close();
      await artifacts.close();
    }
  } finally {
    await store.close();
  }
}

/** verify --rebuild: with the app's live read models, brought up to date, to compare a rebuild with. */
async function verifyWithReadModels(base: VerifyBase, runId: string, options: VerifyOptions): Promise<VerifyResult> {
  const [{ RunVerifier }, { READ_MODELS, READ_MODEL_STORES }, { ARTIFACT_STORE }, { EVENT_STORE }] = await Promise.all([
    import('../../modules/audit/verify.service.js'),
    import('../../modules/readmodels/read-models.port.js'),
    import('../../modules/artifacts/artifacts.module.js'),
    import('../../modules/ledger/tokens.js'),
  ]);
  const { withApp, ProjectionRunnerService, RunSource } = await appSide();
  return withApp((app) =>
    new RunVerifier({
      ...base,
      store: app.get(EVENT_STORE),
      artifacts: app.get(ARTIFACT_STORE),
      readModels: app.get(READ_MODELS),
      readModelStores: app.get(READ_MODEL_STORES),
      runs: app.get(RunSource),
      catchUp: () => app.get(ProjectionRunnerService).catchUp(),
    }).verify(runId, options),
  );
}
