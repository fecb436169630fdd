import { BadRequestException, Controller, Get, HttpException, HttpStatus, Inject, NotFoundException, Query, Res } from '@nestjs/common';
import { ApiOkResponse, ApiProperty, ApiPropertyOptional, ApiProduces, ApiTags } from '@nestjs/swagger';
import { IsIn, IsOptional, IsString, Matches, MaxLength, MinLength } from 'class-validator';
import type { Identity } from '../access/access-control.js';
import { AccessControl } from '../access/access-control.js';
import { Caller, Role } from '../access/access.decorators.js';
import { EVENT_STORE } from '../ledger/tokens.js';
import type { EventStore } from '../ledger/event-store.port.js';
import { RunSource } from '../query/run-source.js';
import { collectTables } from './collect.js';
import { resultCsv } from './query-output.js';
import { DEFAULT_LIMITS, QueryError, runQuery, type QueryLimits } from './sql-engine.js';
import { UserProjectionTables } from './user-projection-tables.js';

export class SqlQuery {
  @ApiProperty({ description: 'one read-only statement (SELECT, WITH, DESCRIBE, SUMMARIZE, SHOW, EXPLAIN) over runs, submissions, llm_usage, events and the user projections', maxLength: 20000 })
  @IsString() @MinLength(1) @MaxLength(20000) sql!: string;

  @ApiPropertyOptional({ description: "only this campaign's accepted runs" })
  @IsOptional() @Matches(/^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/) campaign?: string;

  @ApiPropertyOptional({ enum: ['json', 'csv'], default: 'json' })
  @IsOptional() @IsIn(['json', 'csv']) format: 'json' | 'csv' = 'json';
}

/** The HTTP side's limits: tighter than the CLI's, since a server answers many callers. */
export const HTTP_LIMITS: QueryLimits = { ...DEFAULT_LIMITS, timeoutMs: 10_000, maxRows: 10_000, maxBytes: 16 * 1024 * 1024, maxMemory: '512MB' };
/** Queries answered at once; more are refused with 429 rather than queued behind a slow one. */
const MAX_CONCURRENT = 2;

interface Response {
  setHeader(name: string, value: string): unknown;
}

/** GET /query: SQL over the analytics tables for operators, each query recorded in the access stream. */
@ApiTags('query')
@Controller()
export class SqlController {
  private running = 0;

  constructor(
    private readonly source: RunSource,
    @Inject(EVENT_STORE) private readonly store: EventStore,
    private readonly access: AccessControl,
    private readonly userTables: UserProjectionTables,
  ) {}

  @Get('query')
  @Role('operator', 'query')
  @ApiProduces('application/json', 'text/csv')
  @ApiOkResponse({ description: '{columns: [{name, type}], rows: [[…]]}, or CSV with format=csv; 400 for a refused or failed statement, 429 when busy' })
  async query(@Query() q: SqlQuery, @Caller() caller: Identity, @Res({ passthrough: true }) res: Response) {
    if (this.running >= MAX_CONCURRENT) throw new HttpException(`${MAX_CONCURRENT} queries are running; try again when one has finished`, HttpStatus.TOO_MANY_REQUESTS);
    this.running++;
    const target = q.campaign === undefined ? null : { campaignId: q.campaign };
    try {
      let tables;
      try {
        tables = [...(await collectTables({ runs: () => this.source.runs(), store: this.store }, { campaign: q.campaign })), ...(await this.userTables.tables())];
      } catch (err) {
        if (/^no campaign /.test((err as Error).message)) throw new NotFoundException((err as Error).message);
        throw err;
      }
      let result;
      try {
        result = await runQuery(tables, q.sql, HTTP_LIMITS);
      } catch (err) {
        if (!(err instanceof QueryError)) throw err;
        await this.access.notDone(caller, 'query', target, `${err.message}; sql: ${q.sql}`);
        throw new BadRequestException(err.message);
      }
      await this.access.recorded(caller, 'query', target, { detail: `${result.rows.length} rows; sql: ${q.sql}` });
      if (q.format === 'json') return result;
      res.setHeader('Content-Type', 'text/csv; charset=utf-8');
      return resultCsv(result);
    } finally {
      this.running--;
    }
  }
}
