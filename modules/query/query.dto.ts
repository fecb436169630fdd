import { ApiPropertyOptional } from '@nestjs/swagger';
import { Type } from 'class-transformer';
import { IsIn, IsInt, IsOptional, IsString, Matches, Max, MaxLength, Min } from 'class-validator';
import { REPORT_FORMATS, type ReportFormat } from '../reports/render.js';
import type { FailureClass } from '../../projections/run-analysis/analysis.types.js';
import { FAILURE_CLASSES, RUN_STATES } from './run-filters.js';

// Query-string DTOs of the query API. The global ValidationPipe (whitelist, forbidNonWhitelisted,
// transform) turns any unknown or invalid parameter into a 400 naming it.

export { FAILURE_CLASSES, RUN_STATES };
export const MAX_PAGE = 200;

export class RunFilterQuery {
  @ApiPropertyOptional({ description: 'task id, e.g. ref-arith' })
  @IsOptional() @IsString() @MaxLength(200) task?: string;

  @ApiPropertyOptional({ description: 'agent id' })
  @IsOptional() @IsString() @MaxLength(200) agent?: string;

  @ApiPropertyOptional({ description: 'driver LLM: the model the agent used most (its LlmCallRecorded events), else RunScheduled.driver' })
  @IsOptional() @IsString() @MaxLength(200) driver?: string;
}

export class ListRunsQuery extends RunFilterQuery {
  @ApiPropertyOptional({ enum: RUN_STATES, description: 'interrupted includes open runs whose harness is gone (harnessGone: true), running excludes them' })
  @IsOptional() @IsIn(RUN_STATES) state?: (typeof RUN_STATES)[number];

  @ApiPropertyOptional({ enum: FAILURE_CLASSES, description: 'only ended runs: a run still open has no failure class' })
  @IsOptional() @IsIn(FAILURE_CLASSES) failure_class?: FailureClass;

  @ApiPropertyOptional({ minimum: 1, maximum: MAX_PAGE, default: 50 })
  @IsOptional() @Type(() => Number) @IsInt() @Min(1) @Max(MAX_PAGE) limit: number = 50;

  @ApiPropertyOptional({ minimum: 0, default: 0 })
  @IsOptional() @Type(() => Number) @IsInt() @Min(0) offset: number = 0;
}

export class EventsQuery {
  @ApiPropertyOptional({ description: 'return events with seq strictly greater than this', minimum: -1, default: -1 })
  @IsOptional() @Type(() => Number) @IsInt() @Min(-1) after_seq: number = -1;

  @ApiPropertyOptional({ minimum: 1, maximum: 1000, default: 200 })
  @IsOptional() @Type(() => Number) @IsInt() @Min(1) @Max(1000) limit: number = 200;

  @ApiPropertyOptional({ enum: ['json', 'ndjson'], default: 'json', description: 'JSON array or one canonical JSON event per line' })
  @IsOptional() @IsIn(['json', 'ndjson']) format: 'json' | 'ndjson' = 'json';

  @ApiPropertyOptional({ description: 'only events of these types, comma-separated (e.g. SubmissionGraded,RunCompleted)' })
  @IsOptional() @IsString() @MaxLength(2000) @Matches(/^[A-Za-z]+(,[A-Za-z]+)*$/, { message: 'type must be event type names separated by commas' }) type?: string;
}

export class ReportQuery {
  @ApiPropertyOptional({ enum: REPORT_FORMATS, default: 'html' })
  @IsOptional() @IsIn(REPORT_FORMATS) format: ReportFormat = 'html';
}

export class TranscriptQuery {
  @ApiPropertyOptional({ enum: ['json', 'text'], default: 'json', description: 'the transcript structure, or the text `a2rl transcript` prints' })
  @IsOptional() @IsIn(['json', 'text']) format: 'json' | 'text' = 'json';

  // Either one asks for a page ({runId, afterSeq, entries, lastSeq, more}; text: its entries) read
  // from the store; neither: the whole transcript with its totals, as before.
  @ApiPropertyOptional({ description: 'page: model calls with seq strictly greater than this (next page: after_seq = lastSeq)', minimum: -1 })
  @IsOptional() @Type(() => Number) @IsInt() @Min(-1) after_seq?: number;

  @ApiPropertyOptional({ description: 'page: at most this many calls (default 50 when after_seq is given)', minimum: 1, maximum: 500 })
  @IsOptional() @Type(() => Number) @IsInt() @Min(1) @Max(500) limit?: number;
}

export class ScoreboardQuery extends RunFilterQuery {
  @ApiPropertyOptional({ enum: ['true', 'false'], default: 'false', description: 'also count runs whose set-up failed or that were cancelled (states setup_failed, cancelled), left out by default' })
  @IsOptional() @IsIn(['true', 'false']) include_unfinished?: 'true' | 'false';

  @ApiPropertyOptional({ enum: ['true', 'false'], default: 'false', description: 'also count LLM-driven runs that tested the infrastructure, not the agent (their model never answered, the harness failed), left out by default' })
  @IsOptional() @IsIn(['true', 'false']) include_infra?: 'true' | 'false';

  @ApiPropertyOptional({ enum: ['json', 'csv'], default: 'json', description: 'csv: the paper\'s results.csv, one row per run' })
  @IsOptional() @IsIn(['json', 'csv']) format: 'json' | 'csv' = 'json';

  @ApiPropertyOptional({ description: "only this campaign's accepted runs (the completed run of each cell × seed)" })
  @IsOptional() @IsString() @Matches(/^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/, { message: 'campaign must be a campaign id' }) campaign?: string;
}
