import 'reflect-metadata';
import { Type } from 'class-transformer';
import {
  ArrayMaxSize,
  IsArray,
  IsBoolean,
  IsIn,
  IsInt,
  IsNumber,
  IsObject,
  IsOptional,
  IsString,
  Matches,
  Max,
  MaxLength,
  Min,
  MinLength,
  ValidateNested,
} from 'class-validator';

// The event catalog: one payload class per event type (validated with class-validator before any
// write) and one discriminated union over the shared envelope. Names are part of the product.

const SHA256 = /^[0-9a-f]{64}$/;
/** ISO-8601 UTC with milliseconds or finer, as `Date.prototype.toISOString` writes it. */
const ISO_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3,9}Z$/;

/** Reference to a blob in the artifact store; large payloads never travel inside events. */
export class BlobRef {
  @Matches(SHA256) sha256!: string;
  @IsInt() @Min(0) size!: number;
  @IsString() @MinLength(1) @MaxLength(300) key!: string;
}

export class ManifestEntry {
  @IsString() @MinLength(1) @MaxLength(4096) path!: string;
  @Matches(SHA256) sha256!: string;
  @IsInt() @Min(0) size!: number;
}

export class RunScheduled {
  @IsString() @MinLength(1) @MaxLength(200) task!: string;
  @IsString() @MinLength(1) @MaxLength(200) agent!: string;
  @IsOptional() @IsString() @MaxLength(200) driver?: string;
  @IsString() @MinLength(1) @MaxLength(200) baseModel!: string;
  @IsInt() @Min(1) budgetSeconds!: number;
  @IsInt() seed!: number;
  @IsIn(['free', 'sft-only', 'rl-oriented']) mode!: 'free' | 'sft-only' | 'rl-oriented';
}

export class Mount {
  @IsString() @MinLength(1) path!: string;
  @IsIn(['rw', 'ro']) access!: 'rw' | 'ro';
}

export class WorkspacePrepared {
  @IsString() @MinLength(1) workspace!: string;
  @IsIn(['bwrap', 'none']) sandbox!: 'bwrap' | 'none';
  @IsArray() @ArrayMaxSize(64) @ValidateNested({ each: true }) @Type(() => Mount) mounts!: Mount[];
  @IsArray() @ArrayMaxSize(2000) @ValidateNested({ each: true }) @Type(() => ManifestEntry) dataManifest!: ManifestEntry[];
}

export class BaselineEvaluated {
  @IsNumber() @Min(0) @Max(100) score!: number;
  @IsBoolean() cached!: boolean;
  @IsOptional() @IsString() evaluatorVersion?: string;
}

export class AgentStarted {
  @IsString() @MinLength(1) @MaxLength(8192) command!: string;
  @IsOptional() @IsInt() pid?: number;
}

// Instrumentation events (FileChanged, ProcessStarted, ProcessExited, AgentOutput,
// RolloutBatchRecorded, ObservationGap) carry `observedAt`: when the observer saw the fact (strace's
// timestamp of the exec or exit, the moment a file's content was read, a chunk was cut). The
// envelope's `occurredAt` stays the ledger's append time; metrics, timelines and budget accounting
// use `observedAt`. Schema version 1 of these events had no `observedAt`: the upcaster gives them
// their `occurredAt`.

export class FileChanged {
  @IsString() @MinLength(1) @MaxLength(4096) path!: string;
  @IsIn(['create', 'modify', 'delete']) op!: 'create' | 'modify' | 'delete';
  @IsOptional() @Matches(SHA256) sha256?: string;
  @IsOptional() @IsInt() @Min(0) size?: number;
  @IsOptional() @Matches(SHA256) previousSha256?: string;
  @IsOptional() @IsString() key?: string;
  @Matches(ISO_UTC) observedAt!: string;
}

export class ProcessStarted {
  @IsInt() @Min(0) pid!: number;
  @IsInt() @Min(0) ppid!: number;
  @IsArray() @ArrayMaxSize(4096) @IsString({ each: true }) argv!: string[];
  @IsString() cwd!: string;
  /** The file the kernel executed (strace's execve path, or /proc/<pid>/exe); absent when unknown. */
  @IsOptional() @IsString() @MaxLength(4096) executable?: string;
  @Matches(ISO_UTC) observedAt!: string;
}

export class ProcessExited {
  @IsInt() @Min(0) pid!: number;
  @IsOptional() @IsInt() exitCode?: number;
  @IsOptional() @IsString() signal?: string;
  @IsNumber() @Min(0) durationMs!: number;
  @IsOptional() @IsNumber() @Min(0) cpuMs?: number;
  @IsOptional() @IsInt() @Min(0) peakRssKb?: number;
  @Matches(ISO_UTC) observedAt!: string;
}

export class RolloutBatchRecorded {
  @IsString() @MinLength(1) env!: string;
  @IsInt() @Min(0) episodes!: number;
  @IsInt() @Min(0) steps!: number;
  @IsNumber() @Min(0) @Max(1) successRate!: number;
  @IsNumber() meanReturn!: number;
  @IsOptional() @ValidateNested() @Type(() => BlobRef) trajectories?: BlobRef;
  @Matches(ISO_UTC) observedAt!: string;
}

/**
 * An observer could not record everything it saw (its bounded buffer overflowed, its source failed):
 * nothing is dropped silently. `count` is how many observations were lost when known.
 */
export class ObservationGap {
  @IsIn(['files', 'processes', 'output', 'rollouts']) observer!: 'files' | 'processes' | 'output' | 'rollouts';
  @IsString() @MinLength(1) @MaxLength(4096) reason!: string;
  @IsOptional() @IsInt() @Min(0) count?: number;
  @Matches(ISO_UTC) observedAt!: string;
}

export class SubmissionReceived {
  @IsString() @MinLength(1) submissionId!: string;
  @IsString() @MinLength(1) @MaxLength(4096) modelPath!: string;
  @IsArray() @ArrayMaxSize(2000) @ValidateNested({ each: true }) @Type(() => ManifestEntry) manifest!: ManifestEntry[];
  @IsOptional() @ValidateNested() @Type(() => BlobRef) checkpoint?: BlobRef;
}

export class SubmissionGraded {
  @IsString() @MinLength(1) submissionId!: string;
  @IsNumber() @Min(0) @Max(100) score!: number;
  @IsNumber() improvement!: number;
  @IsOptional() @IsObject() details?: Record<string, unknown>;
}

export class SubmissionRejected {
  @IsString() @MinLength(1) submissionId!: string;
  @IsIn(['invalid_path', 'invalid_checkpoint', 'evaluator_error', 'infra_error', 'budget_exhausted'])
  reasonClass!: 'invalid_path' | 'invalid_checkpoint' | 'evaluator_error' | 'infra_error' | 'budget_exhausted';
  @IsString() @MaxLength(4096) message!: string;
}

export class AgentOutput {
  @IsIn(['stdout', 'stderr']) stream!: 'stdout' | 'stderr';
  @ValidateNested() @Type(() => BlobRef) chunk!: BlobRef;
  @Matches(ISO_UTC) observedAt!: string;
}

export class AgentExited {
  @IsOptional() @IsInt() exitCode?: number;
  @IsOptional() @IsString() signal?: string;
  @IsIn(['completed', 'timeout', 'killed', 'crashed']) reason!: 'completed' | 'timeout' | 'killed' | 'crashed';
  /** When the launcher saw the agent's whole tree gone (absent in runs recorded before it was kept). */
  @IsOptional() @Matches(ISO_UTC) observedAt?: string;
}

export class RunCompleted {
  @IsOptional() @IsNumber() best?: number;
  @IsInt() @Min(0) submissions!: number;
}

export class RunInterrupted {
  @IsString() @MaxLength(4096) reason!: string;
}

export class RunResumed {
  @IsOptional() @IsString() @MaxLength(4096) note?: string;
}

export class TreeHeadSigned {
  @IsInt() @Min(0) treeSize!: number;
  @Matches(SHA256) rootHash!: string;
  @IsString() @MinLength(1) signature!: string;
  @IsString() @MinLength(1) keyId!: string;
}

/** Every event type, its payload class and its current schema version. */
export const EVENT_CATALOG = {
  RunScheduled: { payload: RunScheduled, version: 1 },
  WorkspacePrepared: { payload: WorkspacePrepared, version: 1 },
  BaselineEvaluated: { payload: BaselineEvaluated, version: 1 },
  AgentStarted: { payload: AgentStarted, version: 1 },
  FileChanged: { payload: FileChanged, version: 2 },
  ProcessStarted: { payload: ProcessStarted, version: 2 },
  ProcessExited: { payload: ProcessExited, version: 2 },
  RolloutBatchRecorded: { payload: RolloutBatchRecorded, version: 2 },
  SubmissionReceived: { payload: SubmissionReceived, version: 1 },
  SubmissionGraded: { payload: SubmissionGraded, version: 1 },
  SubmissionRejected: { payload: SubmissionRejected, version: 1 },
  AgentOutput: { payload: AgentOutput, version: 2 },
  AgentExited: { payload: AgentExited, version: 1 },
  RunCompleted: { payload: RunCompleted, version: 1 },
  RunInterrupted: { payload: RunInterrupted, version: 1 },
  RunResumed: { payload: RunResumed, version: 1 },
  TreeHeadSigned: { payload: TreeHeadSigned, version: 1 },
  ObservationGap: { payload: ObservationGap, version: 1 },
} as const;

export type EventType = keyof typeof EVENT_CATALOG;
export const EVENT_TYPES = Object.keys(EVENT_CATALOG) as EventType[];

export type EventData<T extends EventType> = InstanceType<(typeof EVENT_CATALOG)[T]['payload']>;

/** The envelope every stored event has; `data` is the type's payload. */
export interface Envelope<T extends EventType = EventType> {
  type: T;
  runId: string;
  seq: number;
  id: string;
  occurredAt: string;
  schemaVersion: number;
  data: EventData<T>;
}

/** The discriminated union over all event types: narrowing on `type` gives the payload. */
export type A2rlEvent = { [T in EventType]: Envelope<T> }[EventType];

export function isEventType(type: string): type is EventType {
  return Object.prototype.hasOwnProperty.call(EVENT_CATALOG, type);
}
