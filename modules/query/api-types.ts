// The JSON the query API answers, one exported name per OpenAPI component: setupOpenApi adds them from
// api-schemas.ts, which `npm run openapi:types` generates from this file with ts-json-schema-generator.
// The server's own types, re-exported, so the document follows the code it describes; the few below
// are spelled out where the server's shape has no name.
import type { FailureClass, Route } from '../../projections/run-analysis/analysis.types.js';
import type { RunState } from '../../projections/run-state.js';

/** GET /runs/:id. */
export type { RunAnalysis } from '../../projections/run-analysis/analysis.types.js';
/** An item of GET /scoreboard?format=json. */
export type { ScoreboardRow } from '../../projections/scoreboard/scoreboard.js';
/** GET /runs/:id/report?format=json. */
export type { RunReport } from '../reports/report-model.js';
/** GET /runs/:id/transcript with after_seq or limit. */
export type { TranscriptPage } from './transcript-page.js';

/**
 * One item of GET /runs (and the data of the dashboard's `run` SSE event). Spelled out because
 * runSummary's return type is inferred; api-types.check.ts fails the type-check when they part.
 */
export interface RunSummary {
  runId: string;
  task: string | null;
  agent: string | null;
  driver: string | null;
  declaredDriver: string | null;
  driverMismatch: boolean;
  baseModel: string | null;
  state: RunState | null;
  scheduledAt: string | null;
  durationS: number | null;
  /** Present (true) when the run is open but its harness is gone: listed interrupted. */
  harnessGone?: boolean;
  baseline: number | null;
  best: number | null;
  improvement: number | null;
  submissions: number;
  failureClass: FailureClass | null;
  outcome: string | null;
  route: Route;
  lastSeq: number;
}

/** GET /runs: newest first. */
export interface RunPage {
  total: number;
  limit: number;
  offset: number;
  items: RunSummary[];
}

/** An item of GET /runs/:id/events: the stored envelope; `data` is the event type's payload (modules/ledger/events). */
export interface LedgerEvent {
  type: string;
  runId: string;
  seq: number;
  id: string;
  occurredAt: string;
  schemaVersion: number;
  data: Record<string, unknown>;
}
