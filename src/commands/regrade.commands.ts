import type { Command } from 'commander';
import { parseRepeats } from '../../modules/grading/baseline-repeats.js';
import type { RegradeResult } from '../../modules/grading/regrade.service.js';
import { inertLine } from '../../modules/reports/inert-text.js';
import { num, withApp } from './cli-support.js';
import { recordCliAction } from './access-trail.js';
import { jsonOut } from './terminal.js';

/** `a2rl regrade`: the evaluation noise of a closed run's submissions (GradingRepeated events). */
export function registerRegradeCommands(program: Command): void {
  program
    .command('regrade')
    .description("grade a closed run's archived checkpoints again, --repeat times each, recording every grading (GradingRepeated) and re-sealing the run; prints each one's mean, std, min and max")
    .argument('<runId>', 'run id')
    .option('--repeat <k>', 'gradings per submission (1–100)', '1')
    .option('--submission <n...>', 'only these submissions (n of sub-<n>); default every graded one')
    .option('--json', 'print the result as one JSON object: {runId, task, series, repeat, evaluatorVersion, recordedEvaluatorVersion, submissions: [{submissionId, recorded, scores, failures, n, mean, std, min, max}]}')
    .action(async (runId: string, opts: { repeat: string; submission?: string[]; json?: boolean }) => {
      const repeat = parseRepeats(opts.repeat, '--repeat');
      const submissions = opts.submission?.map((s) => {
        const n = /^(?:sub-)?(\d+)$/.exec(s.trim())?.[1];
        if (!n || Number(n) < 1) throw new Error(`--submission takes submission numbers (3 or sub-3), got "${s}"`);
        return Number(n);
      });
      const [{ loadConfig }, { RegradeService }] = await Promise.all([import('../config/config.js'), import('../../modules/grading/regrade.service.js')]);
      const config = loadConfig();
      const detail = `repeat ${repeat}${submissions ? `, submissions ${submissions.join(',')}` : ''}`;
      const result = await withApp(async (app) => {
        try {
          return await app.get(RegradeService).regrade(runId, { repeat, ...(submissions ? { submissions } : {}) });
        } catch (err) {
          await recordCliAction(config, { action: 'regrade', target: { runId }, done: false, detail: `${detail}: ${(err as Error).message.split('\n')[0]}` });
          throw err;
        }
      });
      await recordCliAction(config, { action: 'regrade', target: { runId }, done: true, detail });
      process.stdout.write(opts.json ? jsonOut(`${JSON.stringify(result)}\n`) : describe(result));
    });
}

function describe(r: RegradeResult): string {
  const version = r.recordedEvaluatorVersion && r.recordedEvaluatorVersion !== r.evaluatorVersion ? ` (the run was graded with evaluator ${r.recordedEvaluatorVersion})` : '';
  const lines = [`regrade ${r.runId} (${r.task}, evaluator ${r.evaluatorVersion}${version}): ${r.repeat} grading${r.repeat === 1 ? '' : 's'} per submission, series ${r.series}`];
  for (const s of r.submissions) {
    const failed = s.failures.length ? `, ${s.failures.length} failed (first: ${s.failures[0]})` : '';
    lines.push(`  ${s.submissionId}: recorded ${num(s.recorded)}; regraded n=${s.n} mean ${num(s.mean)} std ${s.std === null ? '-' : s.std.toFixed(2)} min ${num(s.min)} max ${num(s.max)}${failed}`);
  }
  return `${lines.map(inertLine).join('\n')}\n`; // a grading failure quotes the evaluator's output of agent code
}
