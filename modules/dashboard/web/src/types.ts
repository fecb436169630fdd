// The JSON the dashboard reads (docs/dashboard.md, "API the dashboard reads"). The API's response
// types are aliases of api-types.ts, which `npm run openapi:types` generates from the server's
// OpenAPI document (/docs/json); modules/query/openapi-codegen.spec.ts fails when it is stale. The
// rest (SSE payloads, campaigns, the transcript entry) are still copied by hand from the server.
import type { components } from './api-types';

type Schemas = components['schemas'];

export type RunState = Schemas['RunState'];
export type Evidence = Schemas['Evidence'];

/** One item of GET /runs, and the data of the `run` event of GET /live. */
export type RunSummary = Schemas['RunSummary'] & {
  /** Read when present; the server does not send it (yet): its schema has no campaignId. */
  campaignId?: string | null;
};

/** GET /runs (RunPage), and any `{total, limit, offset, items}` page. */
export interface Page<T> {
  total: number;
  limit: number;
  offset: number;
  items: T[];
}

/** An item of GET /runs/:id/events. */
export type LedgerEvent = Schemas['LedgerEvent'];

/** GET /runs/:id: the run's analysis. */
export type RunAnalysis = Schemas['RunAnalysis'] & {
  /** Read when present; GET /runs/:id does not send it (yet): only GET /runs items do. */
  harnessGone?: boolean;
};
export type SubmissionAnalysis = Schemas['SubmissionAnalysis'];
export type LlmTotals = Schemas['LlmStats'];

/** GET /runs/:id/report?format=json (modules/reports/report-model.ts). */
export type RunReport = Schemas['RunReport'];
export type Hunk = Schemas['Hunk'];
export type FileChangeReport = Schemas['FileChangeReport'];
export type ProcessReport = Schemas['ProcessReport'];
export type SubmissionReport = Schemas['SubmissionReport'];
export type TimelineItem = Schemas['TimelineItem'];

/** GET /scoreboard?format=json (projections/scoreboard/scoreboard.ts). */
export type ScoreboardRow = Schemas['ScoreboardRow'];

/** An entry of GET /runs/:id/transcript. By hand: the generator does not follow the server's type (it indexes the event class). */
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
