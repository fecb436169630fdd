import { BadRequestException, type ArgumentMetadata, ValidationPipe } from '@nestjs/common';
import { IsInt, IsNumber, IsOptional, IsString, Max, MaxLength, Min, MinLength, ValidateBy } from 'class-validator';

const DEVICE_NAME = /^[A-Za-z0-9:_.-]{1,32}$/;

/** A device for `gpu`: an index (0–1023) or a short name such as "cuda:1"; absent means "cpu". */
function IsDevice() {
  return ValidateBy({
    name: 'isDevice',
    validator: {
      validate: (value: unknown) =>
        (typeof value === 'number' && Number.isInteger(value) && value >= 0 && value < 1024) ||
        (typeof value === 'string' && DEVICE_NAME.test(value)),
      defaultMessage: () => 'gpu must be a device index (0–1023) or a short device name such as "cuda:1"',
    },
  });
}

export class SubmitDto {
  /** Checked further (and refusals recorded) by the submission service, not here. */
  @IsString() @MinLength(1) @MaxLength(4096) model_path!: string;
  @IsOptional() @IsDevice() gpu?: number | string;
}

export class SetBaselineDto {
  @IsNumber({ allowNaN: false, allowInfinity: false }) @Min(0) @Max(100) score!: number;
  @IsString() @MinLength(1) @MaxLength(128) run_id!: string;
}

export class EnvResetDto {
  @IsOptional() @IsInt() @Min(0) @Max(2 ** 31 - 1) seed?: number;
}

export class EnvStepDto {
  @IsString() @MinLength(1) @MaxLength(64) session_id!: string;
  @IsString() @MaxLength(4096) action!: string;
}

/**
 * The grading API's own validation (independent of any global pipe): unknown fields are refused,
 * and a body that is not a JSON object (an array, a string) is a 400 rather than something the
 * validator might wave through.
 */
export class GradingBodyPipe extends ValidationPipe {
  constructor() {
    super({ whitelist: true, forbidNonWhitelisted: true, transform: true, forbidUnknownValues: true });
  }

  override async transform(value: unknown, metadata: ArgumentMetadata): Promise<unknown> {
    if (metadata.type === 'body' && value !== undefined && (typeof value !== 'object' || value === null || Array.isArray(value))) {
      throw new BadRequestException('the request body must be a JSON object');
    }
    return super.transform(value, metadata);
  }
}
