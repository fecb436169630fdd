import 'reflect-metadata';
import {
  IsInt,
  IsOptional,
  IsString,
  Matches,
  MaxLength,
  Min,
  MinLength,
} from 'class-validator';

// What the event families share: the patterns their payloads use, blob and manifest references, causation.

export const SHA256 = /^[0-9a-f]{64}$/;
/** ISO-8601 UTC with milliseconds or finer, as `Date.prototype.toISOString` writes it. */
export const ISO_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3,9}Z$/;
export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
export const ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

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

/**
 * What caused an event (docs/event-catalog.md#causation): the cause's event in the same stream, by id
 * and seq, and — where the link is a match rather than a fact the emitter held — the evidence it was
 * made on (`pid`, `submissionId`, `toolCallId`, `command`). A payload field of the types that have a
 * cause; absent on events recorded before it was kept, and where no cause could be told.
 */
export class Cause {
  /** The cause's event id (UUIDv5 of runId/seq). */
  @Matches(UUID) event!: string;
  @IsInt() @Min(0) seq!: number;
  /** The pid the link was made on (a process's exit to its start; a limit to the process it hit). */
  @IsOptional() @IsInt() @Min(0) pid?: number;
  /** The submission the link was made on. */
  @IsOptional() @IsString() @MinLength(1) @MaxLength(200) submissionId?: string;
  /** The model's tool call id the link was made on. */
  @IsOptional() @IsString() @MinLength(1) @MaxLength(300) toolCallId?: string;
  /** The command line the link was made on (a process to the tool call that asked for it), cut at 1000 characters. */
  @IsOptional() @IsString() @MaxLength(1000) command?: string;
}

