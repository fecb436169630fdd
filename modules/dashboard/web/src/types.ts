// The JSON the dashboard reads (docs/dashboard.md, "API the dashboard reads"). Only the fields the
// pages use; the server sends more. Shapes follow modules/query and projections/*.

export type RunState = 'scheduled' | 'running' | 'completed' | 'interrupted' | 'setup_failed' | 'cancelled';
export type Evidence = number[];

/** One item of GET /runs, and the data of the `run` event of GET /live. */
export interface RunSummary {
  runId: string;
  task: string | null;
  agent: string | null;
  driver: string | null;
  baseModel: string | null;
  state: RunState | null;
  scheduledAt: string | null;
  harnessGone?: boolean;
  baseline: number | null;
  best: number | null;
  improvement: number | null;
  submissions: number;
  failureClass: string | null;
  /** An LLM-driven run that tested the infrastructure: the class it is badged with instead of its state (absent from older servers). */
  outcome?: string | null;
  route: string | null;
  lastSeq: number;
  /** Present when the server sends them. */
  durationS?: number | null;
  campaignId?: string | null;
}

export interface Page<T> {
  total: number;
  limit: number;
  offset: number;
  items: T[];
}

export interface LedgerEvent {
  type: string;
  runId: string;
  seq: number;
  id?: string;
  occurredAt: string;
  schemaVersion?: number;
  data: Record<string, unknown>;
}

export interface SubmissionAnalysis {
  index: number;
  submissionId: string;
  seq: number;
  atS: number;
  status: 'graded' | 'rejected';
  score: number;
  rejectedReason: string | null;
  valid: boolean;
  isCopyOfBase: boolean;
  codeChanges: { path: string; op: string; linesAdded: number; linesRemoved: number; seq: number }[];
  processes: ProcessAnalysis[];
  rollouts: { episodes: number; steps: number; successRate: number; batches: number };
  evidence: Evidence;
}

export interface ProcessAnalysis {
  pid: number;
  argv: string[];
  kind: string;
  startSeq: number;
  exitSeq: number | null;
  exitCode: number | null;
  signal: string | null;
  durationS: number | null;
}

/** GET /runs/:id: the run's analysis. */
export interface RunAnalysis {
  runId: string;
  task: string | null;
  agent: string | null;
  driver: string | null;
  baseModel: string | null;
  budgetSeconds: number | null;
  mode: string | null;
  state: RunState | null;
  scheduledAt: string | null;
  baseline: number | null;
  best: number | null;
  improvement: number | null;
  durationS: number | null;
  exitReason: string | null;
  submissions: SubmissionAnalysis[];
  pendingSubmissions: number;
  metrics: { score_trajectory: number[]; rollout_episodes: number; training_launches: number; [key: string]: unknown };
  failure: { class: string; rule: string; evidence: Evidence };
  route: { best: string; declared: string; evidence: Evidence };
  llm: { totals: LlmTotals; models: { model: string; calls: number; evidence: Evidence }[] } | null;
  eventCount: number;
  lastSeq: number;
  harnessGone?: boolean;
}

export interface LlmTotals {
  calls: number;
  turns?: number;
  inputTokens: number;
  outputTokens: number;
  cacheReadTokens: number;
  cacheWriteTokens: number;
  costUsd: number | null;
}

export interface Hunk {
  header: string;
  lines: string[];
  truncatedLines: number;
}

export interface FileChangeReport {
  path: string;
  op: 'create' | 'modify' | 'delete' | 'transient';
  linesAdded: number;
  linesRemoved: number;
  hunks: Hunk[];
  omittedHunks: number;
  note: string | null;
  evidence: Evidence;
}

export interface ProcessReport {
  pid: number;
  argv: string[];
  kind: string;
  startS: number;
  endS: number | null;
  exitCode: number | null;
  signal: string | null;
  durationS: number | null;
  evidence: Evidence;
  /** The model call whose tool call started it (ProcessStarted.causedBy), when one was matched. */
  startedBy?: { seq: number; toolCallId?: string; command?: string };
}

export interface SubmissionReport {
  index: number;
  submissionId: string;
  status: 'graded' | 'rejected';
  score: number;
  valid: boolean;
  rejectedReason: string | null;
  isCopyOfBase: boolean;
  atS: number;
  code: { files: FileChangeReport[]; linesAdded: number; linesRemoved: number };
  processes: ProcessReport[];
  rollouts: { episodes: number; steps: number; successRate: number; batches: number; evidence: Evidence };
  evidence: Evidence;
}

export interface TimelineItem {
  lane: string;
  startS: number;
  endS: number | null;
  label: string;
  seq: number;
}

/** GET /runs/:id/report?format=json (modules/reports/report-model.ts). */
export interface RunReport {
  scores: { baseline: number | null; best: number | null; improvement: number | null; baselineEvidence: Evidence; bestEvidence: Evidence };
  submissions: SubmissionReport[];
  timeline: { endS: number; items: TimelineItem[] };
  /** Limits the run reached (absent when none); `over` > 0 is an overrun. */
  limits?: { limit: string; value: number; max: number; over: number; scope: string | null; action: string; seq: number }[];
}

export interface TranscriptEntry {
  seq: number;
  callId: string;
  role: 'turn' | 'side' | 'failed';
  turn: number | null;
  api: string;
  model: string | null;
  startedAt: string;
  latencyMs: number;
  outcome: string;
  error: string | null;
  request: { messages: number; userText: string | null; toolResults: { output: string; [key: string]: unknown }[] };
  answer: { text: string | null; toolCalls: { name: string; input: string; [key: string]: unknown }[]; stopReason: string | null };
  usage: { inputTokens: number | null; outputTokens: number | null; cacheReadTokens?: number | null; cacheWriteTokens?: number | null };
  costUsd: number | null;
}

/** `event: status` of GET /runs/:id/live. */
export interface LiveStatus {
  state: RunState | null;
  budgetLeftMs: number | null;
  submissions: number;
  best: number | null;
  baseline: number | null;
  processes: { pid: number; command: string; startedSeq: number }[];
}

/** GET /scoreboard?format=json (projections/scoreboard/scoreboard.ts). */
export interface ScoreboardRow {
  task: string | null;
  agent: string | null;
  driver: string | null;
  runs: number;
  n: number;
  unscoredRuns: number;
  baseline: number | null;
  best: { mean: number | null; ci95: [number, number] | null };
  noiseFloor: { n: number; mean: number; ci95: [number, number] } | null;
  distinguishable: boolean | null;
  /** Why no verdict on noise: an interval of zero width (absent otherwise, and from older servers). */
  caveat?: string;
  /** Pooled sd of repeated gradings of the same checkpoints; absent from older servers. */
  evaluationNoise?: { checkpoints: number; gradings: number; std: number } | null;
  improvement: number | null;
  /** The classes of the row's ended runs (absent from older servers). */
  failureClasses?: { class: string; count: number }[];
  runIds: string[];
}

export interface CampaignListItem {
  campaignId: string;
  state: string;
  cells: number;
  done: number;
  running: number;
  failed: number;
  scheduledAt: string | null;
}

/** A cell of GET /campaigns/:id: the contract's `{cell, state, runId, attempts}`, or the progress fold's flat cell. */
export interface CampaignCellView {
  cell?: { task: string; agent: string; driver?: string | null; repeat?: number; seed?: number; cell?: number };
  task?: string;
  agent?: string;
  driver?: string | null;
  seed?: number;
  state?: string;
  status?: string;
  runId: string | null;
  attempts?: number;
  attempt?: number;
  reason?: string | null;
}

export interface CampaignDetail {
  campaignId: string;
  state?: string;
  status?: string;
  cells: CampaignCellView[];
  scheduledAt?: string | null;
}
