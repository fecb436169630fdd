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
  ValidateIf,
  ValidateNested,
} from 'class-validator';
import { BlobRef, Cause, ID, ISO_UTC, ManifestEntry, SHA256 } from './shared.js';

// The run stream's events (`run-<runId>`): the run's lifecycle, what the observers saw, gradings,
// model calls, limits and the harness's seals. Names are part of the product.

export class RunCampaignRef {
  @Matches(/^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/) id!: string;
  @IsInt() @Min(0) cell!: number;
  @IsInt() @Min(1) attempt!: number;
}

export class RunScheduled {
  @IsString() @MinLength(1) @MaxLength(200) task!: string;
  @IsString() @MinLength(1) @MaxLength(200) agent!: string;
  @IsOptional() @IsString() @MaxLength(200) driver?: string;
  @IsString() @MinLength(1) @MaxLength(200) baseModel!: string;
  @IsInt() @Min(1) budgetSeconds!: number;
  @IsInt() seed!: number;
  @IsIn(['free', 'sft-only', 'rl-oriented']) mode!: 'free' | 'sft-only' | 'rl-oriented';
  /** The campaign job this run is an attempt of (absent for a run started on its own). */
  @IsOptional() @ValidateNested() @Type(() => RunCampaignRef) campaign?: RunCampaignRef;
}

export class Mount {
  @IsString() @MinLength(1) path!: string;
  @IsIn(['rw', 'ro']) access!: 'rw' | 'ro';
}

/** How the agent is kept apart (see docs/security.md); absent in runs recorded before it was. */
export class Isolation {
  /** userns: unprivileged user namespace; setuid: root bwrap + setpriv; none: unsandboxed. */
  @IsIn(['userns', 'setuid', 'none']) mode!: 'userns' | 'setuid' | 'none';
  /** The agent's uid on the host (a root harness gives each run its own). */
  @IsOptional() @IsInt() @Min(1) uid?: number;
  /** bridged: own network namespace, loopback only, grading API (and proxy) bridged in; host: none of that. */
  @IsIn(['bridged', 'host']) network!: 'bridged' | 'host';
  /** Hosts the egress proxy allows (empty: no egress). */
  @IsArray() @ArrayMaxSize(200) @IsString({ each: true }) @MaxLength(300, { each: true }) allowNet!: string[];
  /** The run's resource limits (RunLimits; null = not limited). */
  @IsObject() limits!: Record<string, number | null>;
  /** Whether memoryBytes is enforced (a cgroup of the run); where not, the limit is recorded but not applied. */
  @IsOptional() @IsBoolean() memoryEnforced?: boolean;
  /** Device nodes bound into the sandbox: the GPUs the run holds and the NVIDIA driver's control nodes. */
  @IsOptional() @IsArray() @ArrayMaxSize(64) @IsString({ each: true }) @MaxLength(300, { each: true }) devices?: string[];
  /** The agent's Python environment (A2RL_AGENT_PYTHON…), read-only at this path. */
  @IsOptional() @IsString() @MaxLength(4096) python?: string;
}

export class WorkspacePrepared {
  @IsString() @MinLength(1) workspace!: string;
  @IsIn(['bwrap', 'none']) sandbox!: 'bwrap' | 'none';
  @IsArray() @ArrayMaxSize(64) @ValidateNested({ each: true }) @Type(() => Mount) mounts!: Mount[];
  @IsArray() @ArrayMaxSize(2000) @ValidateNested({ each: true }) @Type(() => ManifestEntry) dataManifest!: ManifestEntry[];
  @IsOptional() @ValidateNested() @Type(() => Isolation) isolation?: Isolation;
}

export class BaselineEvaluated {
  @IsNumber() @Min(0) @Max(100) score!: number;
  @IsBoolean() cached!: boolean;
  @IsOptional() @IsString() evaluatorVersion?: string;
}

/** How the agent reaches its model: the run's LLM gateway, for the providers its adapter declares. */
export class AgentGateway {
  @IsArray() @ArrayMaxSize(3) @IsIn(['anthropic', 'openai', 'gemini'], { each: true }) providers!: Array<'anthropic' | 'openai' | 'gemini'>;
  /** The gateway's base URL as the agent sees it (loopback inside the sandbox). */
  @IsString() @MinLength(1) @MaxLength(300) url!: string;
}

export class AgentStarted {
  @IsString() @MinLength(1) @MaxLength(8192) command!: string;
  @IsOptional() @IsInt() pid?: number;
  /** Present when the agent is LLM-driven: its model calls go through the run's gateway (LlmCallRecorded). */
  @IsOptional() @ValidateNested() @Type(() => AgentGateway) gateway?: AgentGateway;
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
  /** The file's hard link count when it was read, when more than 1: it can be changed through another name, maybe outside the workspace. */
  @IsOptional() @IsInt() @Min(2) links?: number;
  @Matches(ISO_UTC) observedAt!: string;
}

/**
 * A path in the workspace the file observer was notified of and found gone when it came to read it
 * (created and removed in between): what could be captured of it. Absent in runs recorded before.
 */
export class TransientFileRecorded {
  @IsString() @MinLength(1) @MaxLength(4096) path!: string;
  @IsOptional() @Matches(SHA256) sha256?: string;
  @IsOptional() @IsInt() @Min(0) size?: number;
  /** The content in the artifact store, when it could be read. */
  @IsOptional() @IsString() @MinLength(1) @MaxLength(300) key?: string;
  /** Why there is no content. */
  @IsOptional() @IsString() @MaxLength(300) note?: string;
  @Matches(ISO_UTC) observedAt!: string;
}

/** A file a process ran, read while the process was stopped at its exec (see ProcessStarted.capture). */
export class ExecutedFile {
  /** As the process saw it (the sandbox's view), links resolved. */
  @IsString() @MinLength(1) @MaxLength(4096) path!: string;
  @IsOptional() @Matches(SHA256) sha256?: string;
  @IsOptional() @IsInt() @Min(0) size?: number;
  /** The content in the artifact store, when kept (not for large system files). */
  @IsOptional() @IsString() @MinLength(1) @MaxLength(300) key?: string;
  /** The file was already unlinked. */
  @IsOptional() @IsBoolean() deleted?: boolean;
  /** Why there is no hash or no content. */
  @IsOptional() @IsString() @MaxLength(300) note?: string;
}

export class ExecutedScript extends ExecutedFile {
  /** shebang: the #! file execve was given; argument: an interpreter's script operand. */
  @IsIn(['shebang', 'argument']) via!: 'shebang' | 'argument';
}

export class ProcessStarted {
  @IsInt() @Min(0) pid!: number;
  @IsInt() @Min(0) ppid!: number;
  @IsArray() @ArrayMaxSize(4096) @IsString({ each: true }) argv!: string[];
  @IsString() cwd!: string;
  /** The file the kernel executed (strace's execve path, or /proc/<pid>/exe); absent when unknown. */
  @IsOptional() @IsString() @MaxLength(4096) executable?: string;
  /** The executable image the kernel loaded (/proc/<pid>/exe), hashed by content; absent in older runs. */
  @IsOptional() @ValidateNested() @Type(() => ExecutedFile) exe?: ExecutedFile;
  /** The script it runs: a #! file, or an interpreter's script argument. */
  @IsOptional() @ValidateNested() @Type(() => ExecutedScript) script?: ExecutedScript;
  /** at-exec: exe and script were read while the process was stopped at its exec; after-start: read later (no guarantee it is what ran). */
  @IsOptional() @IsIn(['at-exec', 'after-start']) capture?: 'at-exec' | 'after-start';
  /** What caused it (docs/event-catalog.md#causation): the model call whose shell tool call started it (evidence: toolCallId and the matching command line), when that could be matched. Absent in older runs and where no cause could be told. */
  @IsOptional() @ValidateNested() @Type(() => Cause) causedBy?: Cause;
  @Matches(ISO_UTC) observedAt!: string;
}

export class ProcessExited {
  @IsInt() @Min(0) pid!: number;
  @IsOptional() @IsInt() exitCode?: number;
  @IsOptional() @IsString() signal?: string;
  @IsNumber() @Min(0) durationMs!: number;
  @IsOptional() @IsNumber() @Min(0) cpuMs?: number;
  @IsOptional() @IsInt() @Min(0) peakRssKb?: number;
  /** What caused it (docs/event-catalog.md#causation): the process's ProcessStarted (evidence: pid). Absent in older runs and where no cause could be told. */
  @IsOptional() @ValidateNested() @Type(() => Cause) causedBy?: Cause;
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
  /** Recorded by older runs: score − baseline, now computed by the readers (projections/run-analysis/derived.ts). */
  @IsOptional() @IsNumber() improvement?: number;
  @IsOptional() @IsObject() details?: Record<string, unknown>;
  /** Each graded item as the evaluator saw it (completion, prediction, verdict), an NDJSON blob; absent for evaluators that report none and for duplicates. */
  @IsOptional() @ValidateNested() @Type(() => BlobRef) items?: BlobRef;
  /** What caused it (docs/event-catalog.md#causation): the SubmissionReceived it grades (evidence: submissionId). Absent in older runs and where no cause could be told. */
  @IsOptional() @ValidateNested() @Type(() => Cause) causedBy?: Cause;
}

export class SubmissionRejected {
  @IsString() @MinLength(1) submissionId!: string;
  @IsIn(['invalid_path', 'invalid_checkpoint', 'evaluator_error', 'infra_error', 'budget_exhausted'])
  reasonClass!: 'invalid_path' | 'invalid_checkpoint' | 'evaluator_error' | 'infra_error' | 'budget_exhausted';
  @IsString() @MaxLength(4096) message!: string;
  /** What caused it (docs/event-catalog.md#causation): the SubmissionReceived it rejects (evidence: submissionId); absent when the submission was refused before it was received. Absent in older runs and where no cause could be told. */
  @IsOptional() @ValidateNested() @Type(() => Cause) causedBy?: Cause;
}

export class AgentOutput {
  @IsIn(['stdout', 'stderr']) stream!: 'stdout' | 'stderr';
  @ValidateNested() @Type(() => BlobRef) chunk!: BlobRef;
  @Matches(ISO_UTC) observedAt!: string;
}

export const AGENT_STOPPERS = ['operator', 'campaign', 'limit'] as const;
export type AgentStopper = (typeof AGENT_STOPPERS)[number];
export const INTERRUPTION_CAUSES = ['setup_failed', 'harness_gone'] as const;
export type InterruptionCause = (typeof INTERRUPTION_CAUSES)[number];

export class AgentExited {
  @IsOptional() @IsInt() exitCode?: number;
  @IsOptional() @IsString() signal?: string;
  @IsIn(['completed', 'timeout', 'killed', 'crashed']) reason!: 'completed' | 'timeout' | 'killed' | 'crashed';
  /** When the launcher saw the agent's whole tree gone (absent in runs recorded before it was kept). */
  @IsOptional() @Matches(ISO_UTC) observedAt?: string;
  /**
   * Who had the harness stop the agent (reason `killed`): the operator (Ctrl-C / SIGTERM to the
   * harness), a campaign (cancelled, or its worker stopping), or a resource limit the harness enforces.
   * Absent when nobody asked (the agent ended on its own, or the budget ran out) and in older runs.
   */
  @IsOptional() @IsIn(AGENT_STOPPERS) stoppedBy?: AgentStopper;
}

export class RunCompleted {
  /** Recorded by older runs: the best score, a fold of the gradings (the run analysis's `best`); read by nothing. */
  @IsOptional() @IsNumber() best?: number;
  @IsInt() @Min(0) submissions!: number;
}

export class RunInterrupted {
  @IsString() @MaxLength(4096) reason!: string;
  /**
   * What cut the run short: its set-up failed before the agent started, or the harness that ran it
   * was gone (found by recovery). Absent in runs recorded before it was kept.
   */
  @IsOptional() @IsIn(INTERRUPTION_CAUSES) cause?: InterruptionCause;
  /** harness_gone: the lost harness's last heartbeat (its lock on the machine that recovered it), when known: it was alive then. */
  @IsOptional() @Matches(ISO_UTC) lastAliveAt?: string;
}

/** What a resume found of the workspace, before the agent restarted (docs/resume.md). */
export class ResumedWorkspace {
  /** on-disk: the workspace was still there and was checked against the ledger; rebuilt: it was gone and was rebuilt from the ledger and the artifact store. */
  @IsIn(['on-disk', 'rebuilt']) source!: 'on-disk' | 'rebuilt';
  /** On disk: the agent's files that differed from the ledger's last recorded state (each then recorded as FileChanged); the first 100 paths. */
  @IsInt() @Min(0) differences!: number;
  @IsArray() @ArrayMaxSize(100) @IsString({ each: true }) @MaxLength(4096, { each: true }) differing!: string[];
  /** Rebuilt: files the ledger holds without content (over a limit, never archived) or whose blob is missing, which could not be restored; the first 100 paths. */
  @IsInt() @Min(0) unrestorable!: number;
  @IsArray() @ArrayMaxSize(100) @IsString({ each: true }) @MaxLength(4096, { each: true }) unrestorablePaths!: string[];
  /** Files written back from the artifact store (rebuilt). */
  @IsInt() @Min(0) restored!: number;
}

/**
 * A run interrupted because its harness was lost continues in the same stream (`a2rl run --resume`).
 * The gap is recorded: the interruption it ends, the last fact recorded before the loss, the agent
 * time already used (by AgentStarted to the last fact of each earlier segment) and the budget left,
 * what was found of the workspace and of the agent's home, and how the agent restarts. All but `note`
 * are absent in events recorded before resume was built.
 */
export class RunResumed {
  @IsOptional() @IsString() @MaxLength(4096) note?: string;
  /** The seq of the RunInterrupted this resume ends. */
  @IsOptional() @IsInt() @Min(0) interruptedSeq?: number;
  /** The last event recorded before the harness was lost (not a head, not the interruption). */
  @IsOptional() @IsInt() @Min(0) lastFactSeq?: number;
  @IsOptional() @Matches(ISO_UTC) lastFactAt?: string;
  /** Agent time used before this resume, all earlier segments together (seconds). */
  @IsOptional() @IsNumber() @Min(0) agentSecondsUsed?: number;
  /** The budget the agent is given from now on: budgetSeconds − agentSecondsUsed. */
  @IsOptional() @IsNumber() @Min(0) budgetSecondsLeft?: number;
  @IsOptional() @ValidateNested() @Type(() => ResumedWorkspace) workspace?: ResumedWorkspace;
  /** The agent's home: still on disk, restored from its last archive, or none (an agent without one, or never archived). */
  @IsOptional() @IsIn(['on-disk', 'restored', 'none']) agentHome?: 'on-disk' | 'restored' | 'none';
  /** How the agent restarts: its CLI continues its own session, or it starts again with the instructions and a note of what was restored. */
  @IsOptional() @IsIn(['continued', 'restarted']) session?: 'continued' | 'restarted';
  /** Submissions that were being graded when the harness was lost: recorded rejected (infra_error) right after. */
  @IsOptional() @IsArray() @ArrayMaxSize(100) @IsString({ each: true }) abandonedSubmissions?: string[];
}

export class TreeHeadSigned {
  @IsInt() @Min(0) treeSize!: number;
  @Matches(SHA256) rootHash!: string;
  @IsString() @MinLength(1) signature!: string;
  @IsString() @MinLength(1) keyId!: string;
}

/**
 * One decision of the egress proxy (`a2rl run --allow-net`): a CONNECT tunnel or one plain-HTTP request
 * the agent asked for. Refused ones are recorded when refused (bytes 0); allowed ones when closed, with
 * the bytes each way (`bytesOut` agent → upstream, `bytesIn` upstream → agent; tunnel bytes for CONNECT,
 * body bytes for HTTP). `address` is the IP the proxy connected to (or refused) after resolving `host`.
 * `reason` says why it was refused, or why an allowed one failed (DNS, upstream, idle timeout).
 */
export class EgressConnection {
  @IsString() @MinLength(1) @MaxLength(300) host!: string;
  @IsInt() @Min(0) @Max(65535) port!: number;
  @IsIn(['CONNECT', 'HTTP']) method!: 'CONNECT' | 'HTTP';
  @IsBoolean() allowed!: boolean;
  @IsOptional() @IsString() @MaxLength(1000) reason?: string;
  @IsOptional() @IsString() @MaxLength(64) address?: string;
  @IsInt() @Min(0) bytesOut!: number;
  @IsInt() @Min(0) bytesIn!: number;
  @Matches(ISO_UTC) observedAt!: string;
  @IsOptional() @Matches(ISO_UTC) closedAt?: string;
}

/**
 * A per-run limit (`RunLimits`, modules/sandbox/limits.ts) was reached and the harness acted:
 * `value` is what it observed against `max` (bytes for the size limits), `scope` what it applies to
 * (a stream, a workspace path, a submission id), `action` what the harness did about it.
 */
export class LimitReached {
  @IsString() @MinLength(1) @MaxLength(100) limit!: string;
  @IsNumber() @Min(0) value!: number;
  @IsNumber() @Min(0) max!: number;
  @IsOptional() @IsString() @MaxLength(4096) scope?: string;
  /** What the harness did, where it decided (diskBytes: stopped the agent or only recorded); for a limit whose action is always the same it is absent and readers name it (derived.ts `limitAction`); older runs recorded it always. */
  @IsOptional() @IsString() @MinLength(1) @MaxLength(1000) action?: string;
  /** What caused it (docs/event-catalog.md#causation): what reached the limit: the process, the submission or the model call. Absent in older runs and where no cause could be told. */
  @IsOptional() @ValidateNested() @Type(() => Cause) causedBy?: Cause;
  @Matches(ISO_UTC) observedAt!: string;
}

/** What stands at a checked path instead of a readable regular file. */
const FOUND_INSTEAD = ['symlink', 'directory', 'other', 'unreadable'] as const;

/** One path of data/ or models/ that is not as WorkspacePrepared.dataManifest says. */
export class IntegrityDifference {
  @IsString() @MinLength(1) @MaxLength(4096) path!: string;
  /** The manifest's sha256; null for a path the manifest does not list (added). */
  @ValidateIf((d: IntegrityDifference) => d.expected !== null) @Matches(SHA256) expected!: string | null;
  /** The content's sha256 now; null when no regular file could be read there (missing, or `found`). */
  @ValidateIf((d: IntegrityDifference) => d.actual !== null) @Matches(SHA256) actual!: string | null;
  @IsOptional() @IsIn(FOUND_INSTEAD) found?: (typeof FOUND_INSTEAD)[number];
}

/**
 * The read-only world (data/ and models/) compared with WorkspacePrepared.dataManifest: before each
 * grading and at the end of the run (`full` false: files whose stat is unchanged since the last hash
 * keep it; `full`: every file re-hashed, at the end of an unsandboxed run and on resume). `ok` (older
 * runs) is false exactly when there is a difference.
 */
export class WorkspaceIntegrityChecked {
  /** grading: before a submission is graded; end: at the end of the run; resume: a resumed run's workspace found on disk, before its agent restarts. */
  @IsIn(['grading', 'end', 'resume']) phase!: 'grading' | 'end' | 'resume';
  @IsOptional() @IsString() @MinLength(1) @MaxLength(200) submissionId?: string;
  /** Recorded by older runs: whether `differences` is empty, now computed by the readers (derived.ts `integrityOk`). */
  @IsOptional() @IsBoolean() ok?: boolean;
  @IsBoolean() full!: boolean;
  @IsInt() @Min(0) checked!: number;
  @IsArray() @ArrayMaxSize(100) @ValidateNested({ each: true }) @Type(() => IntegrityDifference) differences!: IntegrityDifference[];
  @IsOptional() @IsInt() @Min(1) moreDifferences?: number;
  @Matches(ISO_UTC) observedAt!: string;
}

/**
 * A secret was kept out of the ledger: a value the harness knows (run token, gateway token, a
 * credential of its environment) or a common key shape was replaced by `[REDACTED:<kind>]` in an
 * event's data (`where: 'event'`, `field` its JSON path) or in a blob before it was archived
 * (`where: 'blob'`; `blob` says which, `path` the workspace file). Never carries the value.
 */
export class SecretRedacted {
  @IsIn(['event', 'blob']) where!: 'event' | 'blob';
  /** The event the redaction was made in (for a blob: the event that refers to it). */
  @IsOptional() @IsString() @MaxLength(100) eventType?: string;
  @IsOptional() @IsString() @MaxLength(4096) field?: string;
  @IsOptional() @IsIn(['file', 'output', 'other']) blob?: 'file' | 'output' | 'other';
  @IsOptional() @IsString() @MaxLength(4096) path?: string;
  @IsString() @MinLength(1) @MaxLength(200) kind!: string;
  @IsInt() @Min(1) count!: number;
  @Matches(ISO_UTC) observedAt!: string;
}

export class LlmUsage {
  @ValidateIf((u: LlmUsage) => u.inputTokens !== null) @IsInt() @Min(0) inputTokens!: number | null;
  @ValidateIf((u: LlmUsage) => u.outputTokens !== null) @IsInt() @Min(0) outputTokens!: number | null;
  @ValidateIf((u: LlmUsage) => u.cacheReadTokens !== null) @IsInt() @Min(0) cacheReadTokens!: number | null;
  @ValidateIf((u: LlmUsage) => u.cacheWriteTokens !== null) @IsInt() @Min(0) cacheWriteTokens!: number | null;
}

/** A tool call the model asked for (`input`: its arguments as JSON text, cut at 2000 characters). */
export class LlmToolCall {
  @IsOptional() @IsString() @MaxLength(300) id?: string;
  @IsString() @MinLength(1) @MaxLength(300) name!: string;
  @IsString() @MaxLength(2100) input!: string;
}

/** A tool result the agent sent back to the model in this request (`output` cut at 2000 characters). */
export class LlmToolResult {
  @IsOptional() @IsString() @MaxLength(300) id?: string;
  @IsOptional() @IsString() @MaxLength(300) name?: string;
  @IsString() @MaxLength(2100) output!: string;
  @IsOptional() @IsBoolean() isError?: boolean;
}

export const LLM_CALL_OUTCOMES = ['ok', 'upstream_error', 'upstream_unreachable', 'upstream_timeout', 'limit_exceeded', 'refused', 'client_aborted', 'gateway_closed'] as const;

/**
 * One call of the agent to its model through the run's LLM gateway (modules/llm-gateway/): what was
 * asked (provider, API, model, the new tool results and user text of the request), what came back
 * (model answered, usage, stop reason, text and tool calls), how long (latency, time to first byte
 * of the body), the price table its cost is computed with (older runs also recorded the cost) and the whole request
 * and response as redacted blobs. `status` is what the agent got; `outcome` says why.
 */
/**
 * A model-call body stored as pieces (docs/llm-gateway.md#how-bodies-are-stored): each distinct
 * message, system prompt, tool list once per run, and a manifest listing the body's segments (the
 * parent call's first ones, then its own). Readers rebuild it with request-pieces.ts `rebuildBody`.
 */
export class LlmBodyPieces {
  /** sha256 and size of the body the pieces rebuild: exactly what a whole-body record would have held. */
  @Matches(SHA256) sha256!: string;
  @IsInt() @Min(0) size!: number;
  @ValidateNested() @Type(() => BlobRef) manifest!: BlobRef;
  /** The pieces (sha256) the manifest's own segments name, not its parent's: what travels with the call in an audit bundle. */
  @IsArray() @ArrayMaxSize(1000) @Matches(SHA256, { each: true }) pieces!: string[];
}

export class LlmCallRecorded {
  @IsString() @MinLength(1) @MaxLength(100) callId!: string;
  @IsIn(['anthropic', 'openai', 'gemini']) provider!: 'anthropic' | 'openai' | 'gemini';
  /** The provider's API: messages, count_tokens, chat.completions, responses, generateContent, streamGenerateContent, countTokens. */
  @IsString() @MinLength(1) @MaxLength(100) api!: string;
  @ValidateIf((d: LlmCallRecorded) => d.modelRequested !== null) @IsString() @MaxLength(300) modelRequested!: string | null;
  @ValidateIf((d: LlmCallRecorded) => d.modelAnswered !== null) @IsString() @MaxLength(300) modelAnswered!: string | null;
  @IsBoolean() stream!: boolean;
  @IsInt() @Min(100) @Max(599) status!: number;
  @IsIn(LLM_CALL_OUTCOMES) outcome!: (typeof LLM_CALL_OUTCOMES)[number];
  @IsOptional() @IsString() @MaxLength(1000) error?: string;
  @ValidateIf((d: LlmCallRecorded) => d.stopReason !== null) @IsString() @MaxLength(100) stopReason!: string | null;
  @ValidateNested() @Type(() => LlmUsage) usage!: LlmUsage;
  /** Where `usage` comes from for a billable call that reached the upstream: the provider's complete answer, or the worst case of the call's reservation (no final usage came). */
  @IsOptional() @IsIn(['provider', 'estimated']) usageSource?: 'provider' | 'estimated';
  /** Tokens the call held against the run's limits while in flight (its body's bytes plus its output maximum). */
  @IsOptional() @IsInt() @Min(0) reservedTokens?: number;
  /** Present when the agent hung up first: bytes of `response` written to it before it did (the rest the gateway read to the end alone). */
  @IsOptional() @IsInt() @Min(0) deliveredBytes?: number;
  /** Recorded by older runs (null: unpriced): now computed by the readers from usage and `priceTable` (derived.ts `callCostUsd`). */
  @IsOptional() @IsNumber() @Min(0) costUsd?: number | null;
  @IsString() @MinLength(1) @MaxLength(100) priceTable!: string;
  @IsNumber() @Min(0) latencyMs!: number;
  @ValidateIf((d: LlmCallRecorded) => d.ttftMs !== null) @IsNumber() @Min(0) ttftMs!: number | null;
  @IsInt() @Min(0) messages!: number;
  @IsOptional() @IsString() @MaxLength(2100) userText?: string;
  @IsArray() @ArrayMaxSize(100) @ValidateNested({ each: true }) @Type(() => LlmToolResult) toolResults!: LlmToolResult[];
  @ValidateIf((d: LlmCallRecorded) => d.outputText !== null) @IsString() @MaxLength(4100) outputText!: string | null;
  @IsArray() @ArrayMaxSize(100) @ValidateNested({ each: true }) @Type(() => LlmToolCall) toolCalls!: LlmToolCall[];
  /** The request body as one blob; absent when it is stored as pieces (`requestPieces`, runs recorded since). */
  @ValidateIf((d: LlmCallRecorded) => d.requestPieces === undefined) @ValidateNested() @Type(() => BlobRef) request?: BlobRef;
  @IsOptional() @ValidateNested() @Type(() => LlmBodyPieces) requestPieces?: LlmBodyPieces;
  @IsOptional() @ValidateNested() @Type(() => BlobRef) response?: BlobRef;
  @IsOptional() @ValidateNested() @Type(() => LlmBodyPieces) responsePieces?: LlmBodyPieces;
  @Matches(ISO_UTC) startedAt!: string;
  @Matches(ISO_UTC) observedAt!: string;
  /** What caused it (docs/event-catalog.md#causation): the earlier model call whose tool call this request answers (evidence: toolCallId, the first answered tool result an earlier call asked for). Absent in older runs and where no cause could be told. */
  @IsOptional() @ValidateNested() @Type(() => Cause) causedBy?: Cause;
  /** The run's segment the call was made in, from 2 on: the agent's calls after a resume (docs/resume.md); absent in the first. */
  @IsOptional() @IsInt() @Min(2) segment?: number;
}

/**
 * The agent's home (`HOME`: the CLI's own state, config, caches, outside the workspace's code tree)
 * as archived, redacted: one blob per file, at most `maxFiles` files. Whole once at the end of the run;
 * while the agent runs, what changed since the previous archive (`changedOnly`; `removed`: archived
 * files since gone), so its CLI's session survives the harness's loss. The home as of a seq is the last
 * whole archive before it with the later changed-only ones applied (agent-home.ts `homeFilesOf`).
 */
export class HomeChunk {
  @Matches(SHA256) sha256!: string;
  @IsInt() @Min(0) size!: number;
}

/** A file of the agent's home archived in pieces (agent-home.ts `chunksOf`); `sha256` hashes the list of pieces. */
export class ChunkedHomeFile {
  @IsString() @MinLength(1) @MaxLength(4096) path!: string;
  @Matches(SHA256) sha256!: string;
  @IsInt() @Min(0) size!: number;
  @IsArray() @ArrayMaxSize(1500) @ValidateNested({ each: true }) @Type(() => HomeChunk) chunks!: HomeChunk[];
}

export class AgentHomeArchived {
  @IsArray() @ArrayMaxSize(2000) @ValidateNested({ each: true }) @Type(() => ManifestEntry) files!: ManifestEntry[];
  @IsInt() @Min(0) skipped!: number;
  @IsOptional() @IsString() @MaxLength(1000) skippedReason?: string;
  @IsOptional() @IsIn([true]) changedOnly?: true;
  @IsOptional() @IsArray() @ArrayMaxSize(2000) @IsString({ each: true }) @MaxLength(4096, { each: true }) removed?: string[];
  /** With changedOnly: the changed files larger than a piece (1 MiB), as their pieces; pieces stored before are not stored again. */
  @IsOptional() @IsArray() @ArrayMaxSize(1500) @ValidateNested({ each: true }) @Type(() => ChunkedHomeFile) chunked?: ChunkedHomeFile[];
  @Matches(ISO_UTC) observedAt!: string;
}

/**
 * One more grading of a checkpoint the run already graded, to measure evaluation noise (judges, live
 * search, sampling): the base model again before the agent starts (`a2rl run --baseline-repeats k`),
 * or a submission's archived checkpoint after the run (`a2rl regrade --repeat k`; a closed run is
 * sealed again with a new head). `repeat` of `of` numbers it in its `series` (one request's k
 * gradings). `score` when graded, `error` (the evaluator's failure, one line) when not.
 */
export class GradingRepeated {
  @IsIn(['baseline', 'submission']) subject!: 'baseline' | 'submission';
  @ValidateIf((d: GradingRepeated) => d.subject === 'submission') @IsString() @MinLength(1) @MaxLength(200) submissionId?: string;
  @Matches(ID) series!: string;
  @IsInt() @Min(1) repeat!: number;
  @IsInt() @Min(1) @Max(1000) of!: number;
  @ValidateIf((d: GradingRepeated) => d.error === undefined) @IsNumber() @Min(0) @Max(100) score?: number;
  @IsOptional() @IsString() @MaxLength(4096) error?: string;
  @IsOptional() @IsString() @MaxLength(200) evaluatorVersion?: string;
  @IsOptional() @IsObject() details?: Record<string, unknown>;
}

/** The run stream event types, their payload classes and current schema versions. */
export const RUN_EVENTS = {
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
  TransientFileRecorded: { payload: TransientFileRecorded, version: 1 },
  EgressConnection: { payload: EgressConnection, version: 1 },
  LimitReached: { payload: LimitReached, version: 1 },
  WorkspaceIntegrityChecked: { payload: WorkspaceIntegrityChecked, version: 1 },
  SecretRedacted: { payload: SecretRedacted, version: 1 },
  LlmCallRecorded: { payload: LlmCallRecorded, version: 1 },
  AgentHomeArchived: { payload: AgentHomeArchived, version: 1 },
  GradingRepeated: { payload: GradingRepeated, version: 1 },
} as const;
