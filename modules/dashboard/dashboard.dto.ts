import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { Type } from 'class-transformer';
import { IsIn, IsInt, IsOptional, IsString, Matches, MaxLength, Min, MinLength } from 'class-validator';

// Query-string DTOs of the dashboard's endpoints (the global ValidationPipe answers 400 naming the parameter).

export class LiveQuery {
  @ApiPropertyOptional({ description: 'send events with seq strictly greater than this (the status covers all of them)', minimum: -1, default: -1 })
  @IsOptional() @Type(() => Number) @IsInt() @Min(-1) after_seq: number = -1;
}

/** A seq (digits) or an ISO 8601 time with a zone; checked again by parseReplayPoint. */
const POINT = /^(\d{1,15}|\d{4}-\d{2}-\d{2}T[0-9:.]+(Z|[+-]\d{2}:\d{2}))$/;

export class ReplayTreeQuery {
  @ApiPropertyOptional({ description: 'a seq, or an ISO 8601 time with a zone (the last event at or before it); default: the run\'s last event' })
  @IsOptional() @IsString() @Matches(POINT, { message: 'at must be a seq (0, 1, …) or an ISO 8601 time with a zone' }) at?: string;
}

export class ReplayFileQuery extends ReplayTreeQuery {
  @ApiProperty({ description: 'workspace-relative path of the file, as the tree lists it' })
  @IsString() @MinLength(1) @MaxLength(4096) path!: string;
}

export class BlobQuery {
  @ApiPropertyOptional({ description: "which of the event's blobs (request, response, chunk, content, items, …); default: its first" })
  @IsOptional() @IsString() @Matches(/^[A-Za-z][A-Za-z0-9_]{0,63}$/, { message: 'part must be a payload field name such as request or response' }) part?: string;
}

export class OutputQuery {
  @ApiPropertyOptional({ description: 'output events with seq strictly greater than this', minimum: -1, default: -1 })
  @IsOptional() @Type(() => Number) @IsInt() @Min(-1) after_seq: number = -1;

  @ApiPropertyOptional({ description: 'one stream only', enum: ['stdout', 'stderr'] })
  @IsOptional() @IsIn(['stdout', 'stderr']) stream?: 'stdout' | 'stderr';
}
