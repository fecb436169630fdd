import type { A2rlEvent } from '../modules/ledger/events/catalog.js';

/**
 * A keyed-row projection: each event updates at most one read-model row, chosen by `keyOf`, and the
 * row's next state is a pure function of its previous state and the event. No I/O, no clock, no
 * randomness: rebuilding from the same events yields the same rows, byte for byte.
 *
 * Every event that touches a row comes from a single run, so the row records the `lastSeq` it has
 * applied; the runner skips an event whose seq is not above it (handlers are idempotent).
 *
 * `entity` is a flat TypeORM entity (columns only, no relations or embeddeds) whose primary key is
 * the single column `keyOf` returns. `version` is bumped whenever `evolve` or the entity changes
 * meaning; the runner then rebuilds the projection from zero.
 */
export interface KeyedRow {
  lastSeq: number;
}

export interface Projection<Row extends KeyedRow = KeyedRow> {
  readonly name: string;
  readonly version: number;
  readonly entity: new () => Row;
  /** The primary-key value of the row this event updates, or null when it updates none. */
  keyOf(event: A2rlEvent): string | null;
  /** The row after the event; `row` is undefined for the first event of a key. Must not mutate `row`. */
  evolve(row: Row | undefined, event: A2rlEvent): Row;
}

/** Helps type inference when declaring a projection object literal. */
export function defineProjection<Row extends KeyedRow>(projection: Projection<Row>): Projection<Row> {
  return projection;
}
