import { Option, type Command } from 'commander';
import { parseRepeats } from '../../modules/grading/baseline-repeats.js';
import { canonicalJson } from '../../modules/ledger/events/canonical-json.js';
import { EVENT_STORE } from '../../modules/ledger/tokens.js';
import { parseDuration } from '../../modules/settings/duration.js';
import { loadConfig } from '../config/config.js';
import { table, withApp, withRunApp } from './cli-support.js';
import { recordCliAction } from './access-trail.js';
import { campaigns, deps, embedded, followed, followJson, loadDeps, onQueue, openSharedQueue, queueOptions } from './campaign-jobs.js';
import { wholeNumber } from './option-parsers.js';
import { jsonOut } from './terminal.js';
import { announce, finish, listEntry, plural, statusText } from './campaign-output.js';
import { reachQueue } from './worker.commands.js';

// `a2rl campaign …`: the matrix task × agent × driver × seed as one campaign (modules/campaigns). The
// campaign's stream is the record; these commands schedule it, run its jobs in this process (the
// embedded default) or put them on a Redis queue for `a2rl worker`s, and follow it to the end.

const EXIT_HELP = `
Exit status: 0 when every cell × seed completed (an agent's own failure is a result and counts as
completed); 1 when a cell failed (infrastructure failures beyond --retries) or the campaign was
cancelled; 130/143 after Ctrl-C / SIGTERM. Embedded runs stopped by Ctrl-C are recorded and handed
back: \`a2rl campaign resume <id>\` runs what is left and never reruns a completed cell.`;

interface RunOptions {
  tasks: string;
  agents: string;
  drivers?: string;
  seeds: number;
  budget: number;
  concurrency: number;
  retries: number;
  queue?: string;
  regradeBaseline?: boolean;
  baselineRepeats: string;
  serve?: boolean;
  json?: boolean;
}

export function registerCampaignCommands(program: Command): void {
  const campaign = program
    .command('campaign')
    .description('campaigns: every task × agent × driver × seed of a matrix as one event-sourced campaign, run here or by `a2rl worker`s on a Redis queue');

  campaign
    .command('run')
    .description('schedule the matrix and run it: live progress, one line per finished run, then the campaign\'s scoreboard')
    .requiredOption('--tasks <a,b>', 'task packs (see `a2rl tasks`)')
    .requiredOption('--agents <x,y>', 'agents (see `a2rl agents`)')
    .option('--drivers <m1,m2>', 'models for the LLM-driven agents (default: each agent\'s own); other agents run once per seed')
    .option('--seeds <n>', 'runs per task × agent × driver, seeds 0…n-1', wholeNumber('--seeds'), 1)
    .addOption(new Option('--budget <duration>', 'wall-clock budget per run, e.g. 90s, 5m, 12h').argParser(parseDuration).default(parseDuration('12h'), '12h'))
    .option('--concurrency <n>', 'runs at once in this process (embedded; ignored with --queue)', wholeNumber('--concurrency'), 1)
    .option('--retries <n>', 'further attempts per cell after an infrastructure failure', wholeNumber('--retries'), 2)
    .option('--queue <redis://…>', 'put the jobs on this Redis queue for `a2rl worker`s instead of running them here (needs a shared ledger)')
    .option('--regrade-baseline', 'grade every run\'s baseline afresh (no cache): the scoreboard\'s noise floor (the default)')
    .option('--no-regrade-baseline', 'take each run\'s baseline from the cache: no noise floor on the scoreboard (cheaper with a slow evaluator)')
    .option('--baseline-repeats <k>', 'grade every run\'s base model k times in all before its agent starts: more noise-floor samples per run', '1')
    .option('--serve', 'also serve the HTTP API and dashboard on A2RL_HTTP_HOST:A2RL_HTTP_PORT while the campaign runs here (not with --queue: run `a2rl serve` beside it); its URL is printed at start, as it is when a server is already up there')
    .option('--json', 'print {"campaignId","runs":[…],"completed","failed"} as the last line')
    .addHelpText('after', EXIT_HELP)
    .action(async (opts: RunOptions) => {
      await loadDeps();
      if (opts.serve && opts.queue !== undefined) throw new Error('--serve serves the dashboard from the process that runs the jobs; with --queue, run `a2rl serve` beside it');
      const options = {
        tasks: list(opts.tasks),
        agents: list(opts.agents),
        drivers: opts.drivers === undefined ? [] : list(opts.drivers),
        seeds: opts.seeds,
        budgetSeconds: opts.budget,
        retries: opts.retries,
        concurrency: opts.concurrency,
        regradeBaseline: opts.regradeBaseline !== false, // the noise floor is measured unless --no-regrade-baseline
        baselineRepeats: parseRepeats(opts.baselineRepeats, '--baseline-repeats'),
      };
      if (opts.queue !== undefined) {
        const url = opts.queue;
        await withApp(async (app) => {
          const { service } = campaigns(app);
          const plan = service.plan({ ...options, concurrency: undefined, queue: 'redis' });
          const queue = await openSharedQueue(app, url);
          try {
            const { campaignId, progress } = await service.schedule(plan);
            announce(campaignId, progress, `on the queue ${deps.displayQueueUrl(url)}`);
            if (await deps.serverUp(loadConfig())) process.stderr.write(`dashboard: ${deps.dashboardBase(loadConfig())}/#/campaigns/${campaignId}\n`);
            await finish(app, await onQueue(app, queue, progress), opts.json);
          } finally {
            await queue.close();
          }
        });
        return;
      }
      await withRunApp(async (runs, gradingBaseUrl, config, app) => {
        const { service } = campaigns(app);
        const plan = service.plan({ ...options, queue: 'local' });
        const dashboard = await deps.openDashboard(app, config, opts.serve === true);
        try {
          const { campaignId, progress } = await service.schedule(plan);
          announce(campaignId, progress, `here, ${options.concurrency} at a time`);
          if (dashboard) process.stderr.write(`dashboard: ${dashboard.campaignUrl(campaignId)}\n`);
          await finish(app, await embedded({ app, runs, gradingBaseUrl }, progress, options.concurrency), opts.json);
        } finally {
          await dashboard?.close();
        }
      });
    });

  campaign
    .command('status')
    .description('a campaign\'s cells: task, agent, driver, seed, status, attempt, worker host, run, best')
    .argument('<id>', 'campaign id (see `a2rl campaign list`)')
    .option('--json', 'the campaign\'s progress as canonical JSON (with --follow: one line per change)')
    .option('--follow', 'follow the campaign until it completes or is cancelled')
    .option('--queue <redis://…>', "with --follow: the campaign's queue, watched for cells whose job it lost (dropped, attempts run out): such a cell is retried within --retries or settled")
    .action(async (id: string, opts: { json?: boolean; follow?: boolean; queue?: string }) => {
      await loadDeps();
      if (opts.queue !== undefined && (!opts.follow || opts.json)) throw new Error('--queue watches the queue while following: give it with --follow (without --json)');
      await withApp(async (app) => {
        const { ledger, service } = campaigns(app);
        let progress = await service.get(id);
        if (opts.follow) {
          const queue = opts.queue === undefined ? undefined : await openSharedQueue(app, opts.queue);
          try {
            progress = opts.json
              ? await followJson(ledger, id)
              : await followed(ledger, id, new deps.CampaignProgressPrinter({ printExisting: true }), queue);
          } finally {
            await queue?.close();
          }
          if (opts.json) return;
        }
        process.stdout.write(opts.json ? jsonOut(`${canonicalJson(progress)}\n`) : statusText(progress));
      });
    });

  campaign
    .command('resume')
    .description('run what a campaign still owes (after its process was stopped or killed, or its queue was lost); a completed cell is never run again')
    .argument('<id>', 'campaign id')
    .option('--concurrency <n>', 'runs at once in this process (default: as scheduled)', wholeNumber('--concurrency', { min: 1 }))
    .option('--queue <redis://…>', 'put the owed jobs on this Redis queue for `a2rl worker`s (required for a campaign scheduled on a queue)')
    .option('--json', 'print {"campaignId","runs":[…],"completed","failed"} as the last line')
    .addHelpText('after', EXIT_HELP)
    .action(async (id: string, opts: { concurrency?: number; queue?: string; json?: boolean }) => {
      await loadDeps();
      const { concurrency } = opts;
      if (opts.queue !== undefined) {
        const url = opts.queue;
        await withApp(async (app) => {
          const progress = await campaigns(app).service.resumable(id, 'redis');
          const queue = await openSharedQueue(app, url);
          try {
            announce(id, progress, `on the queue ${deps.displayQueueUrl(url)} (resumed)`);
            await finish(app, await onQueue(app, queue, progress), opts.json);
          } finally {
            await queue.close();
          }
        });
        return;
      }
      await withRunApp(async (runs, gradingBaseUrl, _config, app) => {
        const progress = await campaigns(app).service.resumable(id, 'local');
        const n = concurrency ?? progress.scheduled!.concurrency ?? 1;
        announce(id, progress, `here, ${n} at a time (resumed)`);
        await finish(app, await embedded({ app, runs, gradingBaseUrl }, progress, n), opts.json);
      });
    });

  campaign
    .command('list')
    .description('every campaign: status and cell counts')
    .option('--json', 'canonical JSON array')
    .action(async (opts: { json?: boolean }) => {
      await loadDeps();
      await withApp(async (app) => {
        const all = (await campaigns(app).service.list()).filter((p) => p.scheduled);
        if (opts.json) {
          process.stdout.write(jsonOut(`${canonicalJson(all.map(listEntry))}\n`));
          return;
        }
        if (!all.length) {
          process.stdout.write('no campaigns\n');
          return;
        }
        const rows = [['CAMPAIGN', 'STATUS', 'QUEUE', 'CELLS', 'COMPLETED', 'FAILED', 'RUNNING', 'PENDING', 'CANCELLED', 'SCHEDULED']];
        for (const p of all) {
          const c = p.counts;
          rows.push([p.campaignId, p.status, p.scheduled!.queue, String(p.cells.length), String(c.completed), String(c.failed), String(c.running), String(c.pending), String(c.cancelled), p.scheduledAt ?? '-']);
        }
        process.stdout.write(`${table(rows)}\n`);
      });
    });

  campaign
    .command('cancel')
    .description('cancel a campaign: its pending cells are cancelled, running runs are stopped by whoever runs them (within seconds), completed ones stay')
    .argument('<id>', 'campaign id')
    .option('--reason <text>', 'recorded with the cancellation')
    .option('--queue <redis://…>', 'also remove its waiting jobs from this Redis queue now (otherwise workers skip them when they take them)')
    .action(async (id: string, opts: { reason?: string; queue?: string }) => {
      await loadDeps();
      await withApp(async (app) => {
        const { service } = campaigns(app);
        const before = await service.get(id);
        const queue = opts.queue === undefined ? null : await reachQueue(async () => deps.openRedisCampaignQueue(deps.redisUrl(opts.queue!), await queueOptions(app)));
        try {
          let progress;
          try {
            progress = await service.cancel(id, opts.reason);
          } catch (err) {
            await recordCliAction(loadConfig(), { action: 'cancel', target: { campaignId: id }, done: false, detail: (err as Error).message.split('\n')[0] }, app.get(EVENT_STORE));
            throw err;
          }
          await recordCliAction(loadConfig(), { action: 'cancel', target: { campaignId: id }, done: true, ...(opts.reason ? { detail: opts.reason } : {}) }, app.get(EVENT_STORE));
          await queue?.drop(id);
          const stopping = before.counts.running ? `; ${plural(before.counts.running, 'running run')} being stopped by ${before.scheduled!.queue === 'local' ? 'its scheduling process' : 'the workers'}` : '';
          process.stdout.write(`cancelled campaign ${id}: ${plural(progress.counts.cancelled, 'cell')} cancelled, ${progress.counts.completed} completed${stopping}\n`);
        } finally {
          await queue?.close();
        }
      });
    });
}

// ── option parsing ────────────────────────────────────────────────────────────────────────────

/** `a,b` → ['a', 'b'] (empty items and repeats are the service's to refuse, with the flag named). */
const list = (text: string): string[] => text.split(',').map((s) => s.trim());
