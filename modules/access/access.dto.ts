import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { Type } from 'class-transformer';
import { ArrayMaxSize, IsArray, IsInt, IsOptional, IsString, Matches, Max, MaxLength, Min, MinLength } from 'class-validator';

// Request DTOs of the access routes; the global ValidationPipe turns anything else into a 400.

const ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

export class LoginBody {
  @ApiProperty({ description: 'an API token (a2rl tokens create)' })
  @IsString() @MinLength(1) @MaxLength(200) token!: string;
}

export class AccessQuery {
  @ApiPropertyOptional({ description: 'events with seq strictly greater than this', minimum: -1, default: -1 })
  @IsOptional() @Type(() => Number) @IsInt() @Min(-1) after_seq: number = -1;

  @ApiPropertyOptional({ minimum: 1, maximum: 1000, default: 200 })
  @IsOptional() @Type(() => Number) @IsInt() @Min(1) @Max(1000) limit: number = 200;

  @ApiPropertyOptional({ description: 'only AccessRecorded events whose target is this run' })
  @IsOptional() @Matches(ID) run?: string;
}

export class RegradeBody {
  @ApiPropertyOptional({ minimum: 1, maximum: 100, default: 1, description: 'gradings per submission' })
  @IsOptional() @IsInt() @Min(1) @Max(100) repeat?: number;

  @ApiPropertyOptional({ description: 'only these submissions (n of sub-<n>); default every graded one' })
  @IsOptional() @IsArray() @ArrayMaxSize(1000) @IsInt({ each: true }) @Min(0, { each: true }) submissions?: number[];
}

export const RUN_OR_CAMPAIGN_ID = ID;
