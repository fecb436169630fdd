import { BadRequestException, Controller, Get, Inject, NotFoundException, Optional, Param, Query, Res } from '@nestjs/common';
import { ApiOkResponse, ApiNotFoundResponse, ApiBadRequestResponse, ApiProduces, ApiTags } from '@nestjs/swagger';
import { CampaignLedger } from '../campaigns/campaign-ledger.js';
import { canonicalJson } from '../ledger/events/canonical-json.js';
import { EVENT_TYPES, isEventType, type EventType } from '../ledger/events/catalog.js';
import { failureClassOf } from '../../projections/run-analysis/analyze.js';
import { filterRuns, scoreboard, scoreboardRuns } from '../../projections/scoreboard/scoreboard.js';
import { liveRun, runsWithHarnessGone } from '../runs/run-liveness.js';
import { RUN_LOCKS, type RunLocks } from '../ledger/run-locks.port.js';
import { renderReport, type ReportFormat } from '../reports/render.js';
import { resultsCsv } from '../reports/results-csv.js';
import { entryText, transcriptText } from '../reports/transcript-text.js';
import { buildTranscript } from '../../projections/transcript/transcript.js';
import { arrayOf, schemaRef } from './api-schema-refs.js';
import { EventsQuery, ListRunsQuery, ReportQuery, ScoreboardQuery, TranscriptQuery } from './query.dto.js';
import { RunSource } from './run-source.js';
import { sortRuns } from './run-listing.js';
import { runSummary } from './run-summary.js';
import { TranscriptPager } from './transcript-page.js';

/** The part of the HTTP response the handlers touch (express's, without depending on its typings). */
interface Response {
  setHeader(name: string, value: string): unknown;
}

const REPORT_TYPES: Record<ReportFormat, string> = {
  md: 'text/markdown; charset=utf-8',
  json: 'application/json; charset=utf-8',
  html: 'text/html; charset=utf-8',
};

/** Read-only query API over the ledger's runs: analyses, events, transcripts, reports and the scoreboard. */
@ApiTags('query')
@ApiBadRequestResponse({ description: 'an unknown or invalid query parameter' })
@Controller()
export class QueryController {
  constructor(
    private readonly source: RunSource,
    /** This machine's run locks: an open run whose harness is gone is listed interrupted (run-liveness.ts). */
    @Optional() @Inject(RUN_LOCKS) private readonly locks?: RunLocks,
    @Optional() private readonly campaigns?: CampaignLedger,
  ) {
    this.pager = new TranscriptPager(source);
  }

  private readonly pager: TranscriptPager;

  @Get('runs')
  @ApiOkResponse({ description: '{total, limit, offset, items[]}, newest first (scheduled time, then run id)', schema: schemaRef('RunPage') })
  async list(@Query() q: ListRunsQuery) {
    const gone = runsWithHarnessGone(this.locks);
    const runs = sortRuns(filterRuns(await this.source.runs(), q), 'started')
      .map((r) => liveRun(r, gone))
      .filter((r) => (q.state === undefined || r.state === q.state) && (q.failure_class === undefined || (!r.harnessGone && failureClassOf(r) === q.failure_class)));
    return { total: runs.length, limit: q.limit, offset: q.offset, items: runs.slice(q.offset, q.offset + q.limit).map(runSummary) };
  }

  @Get('runs/:id')
  @ApiOkResponse({ description: "the run's analysis (metrics, failure class, routes, submissions) and workspace", schema: schemaRef('RunAnalysis') })
  @ApiNotFoundResponse({ description: 'no such run' })
  async get(@Param('id') id: string) {
    return this.found(id, await this.source.run(id));
  }

  @Get('runs/:id/events')
  @ApiProduces('application/json', 'application/x-ndjson')
  @ApiOkResponse({ description: 'events with seq > after_seq, at most limit; next page: after_seq = last seq returned', schema: arrayOf('LedgerEvent') })
  @ApiNotFoundResponse({ description: 'no such run' })
  async events(@Param('id') id: string, @Query() q: EventsQuery, @Res({ passthrough: true }) res: Response) {
    // Read from the store from revision after_seq + 1, at most limit events: never the whole run.
    const page = await this.source.page(id, { afterSeq: q.after_seq, limit: q.limit, types: typeFilter(q.type) });
    if (!page) throw new NotFoundException(`run "${id}" has no events`);
    if (q.format === 'json') return page;
    res.setHeader('Content-Type', 'application/x-ndjson; charset=utf-8');
    return page.map((e) => `${canonicalJson(e)}\n`).join('');
  }

  @Get('runs/:id/transcript')
  @ApiProduces('application/json', 'text/plain')
  @ApiOkResponse({ description: "the run's model calls (LlmCallRecorded) as a transcript: per call its turn, model, new input, answer, tool calls, tokens, status and latency; totals. With after_seq or limit: one page read from the store, {runId, afterSeq, entries, lastSeq, more}", schema: schemaRef('TranscriptPage') })
  @ApiNotFoundResponse({ description: 'no such run' })
  async transcript(@Param('id') id: string, @Query() q: TranscriptQuery, @Res({ passthrough: true }) res: Response) {
    if (q.after_seq !== undefined || q.limit !== undefined) {
      const page = this.found(id, await this.pager.page(id, q.after_seq ?? -1, q.limit ?? 50));
      if (q.format === 'json') return page;
      res.setHeader('Content-Type', 'text/plain; charset=utf-8');
      return page.entries.map(entryText).join('\n');
    }
    const events = await this.source.events(id);
    if (!events.length) throw new NotFoundException(`no run "${id}" in the ledger`);
    const transcript = buildTranscript(events);
    if (q.format === 'json') return transcript;
    res.setHeader('Content-Type', 'text/plain; charset=utf-8');
    return transcriptText(transcript);
  }

  @Get('runs/:id/report')
  @ApiProduces(...Object.values(REPORT_TYPES))
  @ApiOkResponse({ description: 'the run report; every claim cites event seqs (format=json: RunReport)', schema: schemaRef('RunReport') })
  @ApiNotFoundResponse({ description: 'no such run' })
  async report(@Param('id') id: string, @Query() q: ReportQuery, @Res({ passthrough: true }) res: Response) {
    const text = await renderReport(this.found(id, await this.source.reportInput(id)), q.format);
    res.setHeader('Content-Type', REPORT_TYPES[q.format]);
    return text;
  }

  @Get('scoreboard')
  @ApiProduces('application/json', 'text/csv')
  @ApiOkResponse({ description: 'rows per task × agent × driver, or results.csv (one row per run) with format=csv; runs whose set-up failed or that were cancelled count only with include_unfinished=true', schema: arrayOf('ScoreboardRow') })
  async scoreboard(@Query() q: ScoreboardQuery, @Res({ passthrough: true }) res: Response) {
    const filter = { task: q.task, agent: q.agent, driver: q.driver, includeUnfinished: q.include_unfinished === 'true', includeInfra: q.include_infra === 'true' };
    const runs = await this.campaignOnly(await this.source.runs(), q.campaign);
    if (q.format === 'json') return scoreboard(runs, filter);
    res.setHeader('Content-Type', 'text/csv; charset=utf-8');
    return resultsCsv(scoreboardRuns(runs, filter));
  }

  /** The runs a campaign accepted (one per completed cell × seed), or every run without a campaign. */
  private async campaignOnly<T extends { runId: string }>(runs: T[], campaignId: string | undefined): Promise<T[]> {
    if (campaignId === undefined) return runs;
    const accepted = (await this.campaigns?.acceptedRunIds(campaignId)) ?? null;
    if (!accepted) throw new NotFoundException(`no campaign "${campaignId}" in the ledger`);
    return runs.filter((r) => accepted.has(r.runId));
  }

  private found<T>(id: string, value: T | null): T {
    if (value === null) throw new NotFoundException(`no run "${id}" in the ledger`);
    return value;
  }
}

/** `type=A,B` as a set of event types (400 naming an unknown one), or null for every type. */
function typeFilter(list: string | undefined): ReadonlySet<EventType> | null {
  if (list === undefined) return null;
  const names = list.split(',');
  const unknown = names.filter((n) => !isEventType(n));
  if (unknown.length) throw new BadRequestException(`type: unknown event type ${unknown.map((n) => `"${n}"`).join(', ')} (known: ${EVENT_TYPES.join(', ')})`);
  return new Set(names as EventType[]);
}
