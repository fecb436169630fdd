import { Column, Entity, PrimaryColumn } from 'typeorm';
import type { RunState } from '../run-state.js';

export type { RunState };

/** One row per run. Timestamps are the events' own `occurredAt` strings, never the wall clock. */
@Entity({ name: 'run_list' })
export class RunListRow {
  @PrimaryColumn({ name: 'run_id', type: 'varchar', length: 128 })
  runId: string;

  /** Null until the run's RunScheduled has been seen (task, agent, baseModel, scheduledAt alike). */
  @Column({ type: 'varchar', length: 200, nullable: true })
  task: string | null;

  @Column({ type: 'varchar', length: 200, nullable: true })
  agent: string | null;

  @Column({ type: 'varchar', length: 200, nullable: true })
  driver: string | null;

  @Column({ name: 'base_model', type: 'varchar', length: 200, nullable: true })
  baseModel: string | null;

  /** Null while no lifecycle event of the run has been seen. */
  @Column({ type: 'varchar', length: 16, nullable: true })
  state: RunState | null;

  @Column({ name: 'event_count', type: 'integer' })
  eventCount: number;

  @Column({ name: 'last_seq', type: 'integer' })
  lastSeq: number;

  @Column({ name: 'scheduled_at', type: 'varchar', length: 40, nullable: true })
  scheduledAt: string | null;

  @Column({ name: 'last_event_at', type: 'varchar', length: 40 })
  lastEventAt: string;
}
