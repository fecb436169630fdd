import { BadRequestException, type ArgumentMetadata, ValidationPipe } from '@nestjs/common';
import { IsInt, IsNumber, IsOptional, IsString, Max, MaxLength, Min, MinLength, ValidateBy } from 'class-validator';

/** One or more device names ("0", "cuda:1", a GPU UUID), comma-separated, or "cpu". */
const DEVICE_LIST = /^[A-Za-z0-9:_.,\s-]{0,256}$/;

/**
 * `gpu`: a GPU index (0–1023), or a string naming one or more devices such as "0", "2,3" or "cpu"
 * (the paper's form). Only the shape is checked here; which GPUs exist is the submission
 * service's question, answered 400 `{error, available_gpus}` (gpus.ts).
 */
function IsDevice() {
  return ValidateBy({
    name: 'isDevice',
    validator: {
      validate: (value: unknown) =>
        (typeof value === 'number' && Number.isInteger(value) && value >= 0 && value < 1024) ||
        (typeof value === 'string' && DEVICE_LIST.test(value)),
      defaultMessage: () => 'gpu must be a GPU index (0–1023) or a string of GPU ids such as "0" or "2,3" (or "cpu")',
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
