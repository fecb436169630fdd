import type { A2rlEvent } from '../modules/ledger/events/catalog.js';
import type { Projection } from './projection.js';
import type { BlobReader } from './blob-reader.js';

/**
 * A run-recompute projection: one row per run, recomputed from the run's complete stream (and
 * content-addressed blobs) whenever the run gets new events. For derivations that are not a fold
 * of single events (the post-hoc analysis reads file contents and looks across the whole run).
 *
 * `analyze` must be deterministic: same events and blobs → same row. `entity` is flat and keyed by
 * one primary column holding the run id, as for keyed-row projections. Bump `version` whenever
 * `analyze` or the entity changes meaning; the runner then rebuilds from zero.
 */
export interface RunProjection<Row extends object = object> {
  readonly kind: 'run';
  readonly name: string;
  readonly version: number;
  readonly entity: new () => Row;
  /** The row of one run from all its events, in seq order. */
  analyze(events: A2rlEvent[], blobs: BlobReader): Promise<Row>;
}

/** Any projection the ProjectionRunner maintains. */
export type AnyProjection = Projection | RunProjection;

export function isRunProjection(projection: AnyProjection): projection is RunProjection {
  return (projection as RunProjection).kind === 'run';
}

/** Helps type inference when declaring a run projection object literal. */
export function defineRunProjection<Row extends object>(projection: Omit<RunProjection<Row>, 'kind'>): RunProjection<Row> {
  return { kind: 'run', ...projection };
}
