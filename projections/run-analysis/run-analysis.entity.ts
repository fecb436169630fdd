import { Column, Entity, PrimaryColumn } from 'typeorm';
import type { FailureClass, Route, RunAnalysis } from './analysis.types.js';

/**
 * One row per run: the columns people filter and sort on, plus the whole RunAnalysis as canonical
 * JSON (`analysis`), so a rebuild reproduces the table byte for byte.
 */
@Entity({ name: 'run_analysis' })
export class RunAnalysisRow {
  @PrimaryColumn({ name: 'run_id', type: 'varchar', length: 128 })
  runId: string;

  @Column({ type: 'varchar', length: 200, nullable: true })
  task: string | null;

  @Column({ type: 'varchar', length: 200, nullable: true })
  agent: string | null;

  @Column({ type: 'varchar', length: 200, nullable: true })
  driver: string | null;

  @Column({ name: 'base_model', type: 'varchar', length: 200, nullable: true })
  baseModel: string | null;

  @Column({ type: 'varchar', length: 16, nullable: true })
  state: RunAnalysis['state'];

  @Column({ type: 'double precision', nullable: true })
  baseline: number | null;

  @Column({ type: 'double precision', nullable: true })
  best: number | null;

  @Column({ type: 'double precision', nullable: true })
  improvement: number | null;

  /** Null until the run has ended (failureClassOf): the taxonomy judges a whole run. */
  @Column({ name: 'failure_class', type: 'varchar', length: 32, nullable: true })
  failureClass: FailureClass | null;

  @Column({ name: 'route_best', type: 'varchar', length: 32 })
  routeBest: Route;

  @Column({ name: 'valid_submission_rate', type: 'double precision', nullable: true })
  validSubmissionRate: number | null;

  @Column({ type: 'integer' })
  submissions: number;

  @Column({ name: 'scheduled_at', type: 'varchar', length: 40, nullable: true })
  scheduledAt: string | null;

  @Column({ name: 'last_seq', type: 'integer' })
  lastSeq: number;

  /** Canonical JSON of the full RunAnalysis. */
  @Column({ type: 'text' })
  analysis: string;
}
