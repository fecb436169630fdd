import { Column, Entity, PrimaryColumn } from 'typeorm';

const toNumber = { to: (v: number) => v, from: (v: string | number | null) => (v === null ? null : Number(v)) };

/** Where each projection stands in the all-stream; written in the same transaction as its rows. */
@Entity({ name: 'projection_checkpoints' })
export class ProjectionCheckpoint {
  @PrimaryColumn({ type: 'varchar', length: 100 })
  name: string;

  /** Opaque all-stream position of the last event applied; null before the first. */
  @Column({ type: 'text', nullable: true })
  position: string | null;

  /** The projection version the rows were built with; a different version means rebuild. */
  @Column({ type: 'integer' })
  version: number;

  /** Events consumed since the projection was last built from zero (pg returns bigint as text). */
  @Column({ name: 'events_processed', type: 'bigint', transformer: toNumber })
  eventsProcessed: number;
}
