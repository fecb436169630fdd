import { createHash } from 'node:crypto';
import { existsSync, lstatSync, mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { canonicalJson } from '../../modules/ledger/events/canonical-json.js';
import { inertLine } from '../../modules/reports/inert-text.js';
import { recordCliAction } from './access-trail.js';
import { withReadSide, type ReadSide } from './read-side.js';
import { jsonOut } from './terminal.js';

// `a2rl export --format inspect|atif` (the ecosystem's formats; the audit bundle stays
// audit.commands.ts's): read the run(s), call the exporter, write, record the export in the access
// stream as bundles are.

export const EXPORT_FORMATS = ['bundle', 'inspect', 'atif'] as const;
export type ExportFormat = (typeof EXPORT_FORMATS)[number];

interface ExportOptions {
  output: string;
  format: Exclude<ExportFormat, 'bundle'>;
  campaign?: string;
  json?: boolean;
}

async function runOf(side: ReadSide, runId: string) {
  const analysis = await side.source.run(runId);
  const events = await side.source.events(runId);
  if (!analysis || !events.length) throw new Error(`no run "${runId}" in the ledger`);
  return { analysis, events };
}

const digest = (text: string) => createHash('sha256').update(text).digest('hex');

/** Writes a run's (or, for inspect, a campaign's) export; one line per file written, or --json. */
export async function exportFormatted(runId: string | undefined, opts: ExportOptions): Promise<void> {
  if ((runId === undefined) === (opts.campaign === undefined)) throw new Error('give a run id or --campaign <id> (not both)');
  if (opts.campaign !== undefined && opts.format !== 'inspect') throw new Error(`--campaign exports --format inspect only (one log per task × agent × driver); export a run with --format ${opts.format}`);
  await withReadSide(async (side) => {
    const target = runId !== undefined ? { runId } : { campaignId: opts.campaign! };
    const written: { file: string; runs: string[]; bytes: number; sha256: string }[] = [];
    try {
      if (opts.campaign !== undefined) {
        const { CampaignLedger } = await import('../../modules/campaigns/campaign-ledger.js');
        const accepted = await new CampaignLedger(side.store, () => new Date()).acceptedRunIds(opts.campaign);
        if (!accepted) throw new Error(`no campaign "${opts.campaign}" in the ledger`);
        const { inspectLog } = await import('../../modules/exports/inspect-log.js');
        if (existsSync(opts.output) && !lstatSync(opts.output).isDirectory()) throw new Error(`-o ${opts.output}: not a directory`);
        const runs = await Promise.all([...accepted].sort().map((id) => runOf(side, id)));
        const groups = new Map<string, typeof runs>();
        for (const r of runs) {
          const k = JSON.stringify([r.analysis.task, r.analysis.agent, r.analysis.driver]);
          groups.set(k, [...(groups.get(k) ?? []), r]);
        }
        const files = [...groups.entries()].sort((a, b) => (a[0] < b[0] ? -1 : 1)).map(([k, group]) => ({ file: path.join(opts.output, `${(JSON.parse(k) as (string | null)[]).map(fileWord).join('_')}.json`), group }));
        const taken = files.find((f) => existsSync(f.file));
        if (taken) throw new Error(`${taken.file} already exists: give an empty or new directory`);
        mkdirSync(opts.output, { recursive: true });
        for (const { file, group } of files) {
          const text = `${canonicalJson(inspectLog(group, { campaignId: opts.campaign }))}\n`;
          writeFileSync(file, text, { flag: 'wx' });
          written.push({ file: path.resolve(file), runs: group.map((r) => r.analysis.runId), bytes: Buffer.byteLength(text), sha256: digest(text) });
        }
      } else {
        const run = await runOf(side, runId!);
        let text: string;
        if (opts.format === 'inspect') {
          const { inspectLog } = await import('../../modules/exports/inspect-log.js');
          text = `${canonicalJson(inspectLog([run]))}\n`;
        } else {
          const { atifTrajectory } = await import('../../modules/exports/atif.js');
          const { streamName } = await import('../../modules/ledger/events/ids.js');
          const hashes = new Map<number, string>();
          for await (const r of side.store.readStream(streamName(runId!))) hashes.set(Number(r.revision), createHash('sha256').update(r.bytes).digest('hex'));
          text = `${canonicalJson(atifTrajectory({ ...run, hashes }))}\n`;
        }
        writeFileSync(opts.output, text);
        written.push({ file: path.resolve(opts.output), runs: [runId!], bytes: Buffer.byteLength(text), sha256: digest(text) });
      }
    } catch (err) {
      await recordCliAction(side.config, { action: 'export', target, done: false, detail: `${opts.format}: ${(err as Error).message.split('\n')[0]}` }, side.store);
      throw err;
    }
    const runs = written.reduce((n, w) => n + w.runs.length, 0);
    await recordCliAction(side.config, {
      action: 'export',
      target,
      done: true,
      detail: `${opts.format === 'inspect' ? 'Inspect log' : 'ATIF trajectory'}${written.length > 1 ? `s (${written.length})` : ''} of ${runs} run${runs === 1 ? '' : 's'}: ${written.map((w) => `${w.file} (${w.bytes} bytes, sha256 ${w.sha256})`).join(', ')}`,
    }, side.store);
    if (opts.json) process.stdout.write(jsonOut(`${JSON.stringify({ format: opts.format, files: written })}\n`));
    else for (const w of written) process.stdout.write(`wrote ${inertLine(w.file)}: ${opts.format}, ${w.runs.length} run${w.runs.length === 1 ? '' : 's'}, ${w.bytes} bytes\n`);
  });
}

/** A task, agent or driver name as part of a file name. */
function fileWord(s: string | null): string {
  return (s ?? 'none').replace(/[^A-Za-z0-9._-]+/g, '-').slice(0, 80) || 'none';
}

