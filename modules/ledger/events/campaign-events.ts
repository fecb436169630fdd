import 'reflect-metadata';
import { Type } from 'class-transformer';
import { ArrayMaxSize, IsArray, IsBoolean, IsIn, IsInt, IsNumber, IsOptional, IsString, Matches, Max, MaxLength, Min, MinLength, ValidateNested } from 'class-validator';
import { ID } from './shared.js';

// ── Campaign streams (`campaign-<campaignId>`; the envelope's `runId` holds the campaign id) ──────
// A campaign is the matrix task × agent × driver × seed run as one job per cell; its stream records
// the scheduling decisions, the queue only distributes the work (docs/campaigns.md).

/** One cell × seed of the matrix: the unit of work (one accepted run each). */
export class CampaignCell {
  @IsInt() @Min(0) cell!: number;
  @IsString() @MinLength(1) @MaxLength(200) task!: string;
  @IsString() @MinLength(1) @MaxLength(200) agent!: string;
  @IsOptional() @IsString() @MinLength(1) @MaxLength(200) driver?: string;
  @IsInt() seed!: number;
  /** GPUs the task needs on the worker (0: a CPU job). */
  @IsInt() @Min(0) @Max(64) gpus!: number;
}

export class CampaignMatrix {
  @IsArray() @ArrayMaxSize(1000) @IsString({ each: true }) tasks!: string[];
  @IsArray() @ArrayMaxSize(1000) @IsString({ each: true }) agents!: string[];
  @IsArray() @ArrayMaxSize(1000) @IsString({ each: true }) drivers!: string[];
  @IsInt() @Min(1) @Max(10000) seeds!: number;
}

export class CampaignScheduled {
  @ValidateNested() @Type(() => CampaignMatrix) matrix!: CampaignMatrix;
  @IsArray() @ArrayMaxSize(100000) @ValidateNested({ each: true }) @Type(() => CampaignCell) cells!: CampaignCell[];
  @IsInt() @Min(1) budgetSeconds!: number;
  /** Further attempts an infrastructure failure may get, per cell. */
  @IsInt() @Min(0) @Max(100) retries!: number;
  /** 'local': the scheduling process runs the jobs; 'redis': BullMQ workers do. */
  @IsIn(['local', 'redis']) queue!: 'local' | 'redis';
  /** Runs at once in the scheduling process (local queue only). */
  @IsOptional() @IsInt() @Min(1) @Max(1024) concurrency?: number;
  /** Every run grades its baseline afresh (no baseline cache): the task's noise floor. */
  @IsOptional() @IsBoolean() regradeBaseline?: boolean;
  /** Every run grades its base model this many times in all before its agent starts (GradingRepeated). */
  @IsOptional() @IsInt() @Min(2) @Max(100) baselineRepeats?: number;
}

/** A job for `attempt` of `cell` was put on the queue. */
export class RunRequested {
  @IsInt() @Min(0) cell!: number;
  @IsInt() @Min(1) attempt!: number;
}

export class WorkerInfo {
  @Matches(ID) id!: string;
  @IsString() @MinLength(1) @MaxLength(255) host!: string;
  @IsInt() @Min(1) pid!: number;
  /** The GPU ids the worker advertises (`a2rl worker --gpus`). */
  @IsArray() @ArrayMaxSize(64) @IsString({ each: true }) gpus!: string[];
}

/** A worker took the job and its run was scheduled (the run's own stream starts with RunScheduled). */
export class RunAssigned {
  @IsInt() @Min(0) cell!: number;
  @IsInt() @Min(1) attempt!: number;
  @Matches(ID) runId!: string;
  @ValidateNested() @Type(() => WorkerInfo) worker!: WorkerInfo;
  /** The worker's GPUs this run holds. */
  @IsArray() @ArrayMaxSize(64) @IsString({ each: true }) gpus!: string[];
  /** The attempt's run was resumed on this worker (docs/resume.md): its previous holder was lost with the run open. */
  @IsOptional() @IsIn([true]) resumed?: true;
}

/**
 * How an attempt ended. `completed`: the run ran and is the cell's result (an agent's failure is a
 * result too); `infra_failed`: set-up failed or the infrastructure failed the run; `lost`: its worker
 * died (lease expired); `cancelled`: the campaign was cancelled.
 */
export class RunFinished {
  @IsInt() @Min(0) cell!: number;
  @IsInt() @Min(1) attempt!: number;
  @IsOptional() @Matches(ID) runId?: string;
  @IsIn(['completed', 'infra_failed', 'lost', 'cancelled']) outcome!: 'completed' | 'infra_failed' | 'lost' | 'cancelled';
  @IsOptional() @IsNumber() best?: number;
  @IsOptional() @IsNumber() baseline?: number;
  @IsOptional() @IsString() @MaxLength(4096) reason?: string;
}

/** An infrastructure failure gets another attempt (on any worker). */
export class RunRetried {
  @IsInt() @Min(0) cell!: number;
  /** The new attempt's number. */
  @IsInt() @Min(2) attempt!: number;
  @IsString() @MaxLength(4096) reason!: string;
  /** The worker handed the job back (it was shutting down): no retry of `retries` is used up. */
  @IsOptional() @IsBoolean() handedBack?: boolean;
}

/** Every cell has its result (completed) or has used up its retries (failed). */
export class CampaignCompleted {
  @IsInt() @Min(0) completed!: number;
  @IsInt() @Min(0) failed!: number;
}

export class CampaignCancelled {
  @IsOptional() @IsString() @MaxLength(4096) reason?: string;
}

/** The campaign stream event types, their payload classes and current schema versions. */
export const CAMPAIGN_EVENTS = {
  CampaignScheduled: { payload: CampaignScheduled, version: 1 },
  RunRequested: { payload: RunRequested, version: 1 },
  RunAssigned: { payload: RunAssigned, version: 1 },
  RunFinished: { payload: RunFinished, version: 1 },
  RunRetried: { payload: RunRetried, version: 1 },
  CampaignCompleted: { payload: CampaignCompleted, version: 1 },
  CampaignCancelled: { payload: CampaignCancelled, version: 1 },
} as const;
