// The tables `a2rl query` and `a2rl export-tables` serve (docs/analysis.md, "Tables for SQL and
// dataframes"). Their names, columns and types are part of the product: a column is added, never
// renamed or retyped, so notebooks written against them keep working.

export type ColumnType = 'VARCHAR' | 'INTEGER' | 'BIGINT' | 'DOUBLE' | 'BOOLEAN';

export interface ColumnSpec {
  name: string;
  type: ColumnType;
}

export interface TableSpec {
  name: string;
  columns: readonly ColumnSpec[];
}

const col = (name: string, type: ColumnType): ColumnSpec => ({ name, type });

/** One row per run: the run list and the run analysis read models, plus RunScheduled's campaign reference and seed. */
export const RUNS: TableSpec = {
  name: 'runs',
  columns: [
    col('run_id', 'VARCHAR'), col('task', 'VARCHAR'), col('agent', 'VARCHAR'), col('driver', 'VARCHAR'), col('declared_driver', 'VARCHAR'),
    col('base_model', 'VARCHAR'), col('mode', 'VARCHAR'), col('seed', 'BIGINT'), col('budget_s', 'BIGINT'),
    col('campaign_id', 'VARCHAR'), col('campaign_cell', 'INTEGER'), col('campaign_attempt', 'INTEGER'),
    col('state', 'VARCHAR'), col('scheduled_at', 'VARCHAR'), col('duration_s', 'DOUBLE'), col('exit_reason', 'VARCHAR'), col('sandbox', 'VARCHAR'),
    col('baseline', 'DOUBLE'), col('baseline_cached', 'BOOLEAN'), col('best', 'DOUBLE'), col('improvement', 'DOUBLE'),
    col('failure_class', 'VARCHAR'), col('failure_rule', 'VARCHAR'), col('route_best', 'VARCHAR'), col('route_declared', 'VARCHAR'),
    col('submissions', 'INTEGER'), col('valid_submission_rate', 'DOUBLE'), col('training_launches', 'INTEGER'), col('total_training_time_s', 'DOUBLE'),
    col('rollout_episodes', 'BIGINT'), col('copy_model_count', 'INTEGER'),
    col('llm_calls', 'INTEGER'), col('llm_input_tokens', 'BIGINT'), col('llm_output_tokens', 'BIGINT'), col('llm_cost_usd', 'DOUBLE'),
    col('event_count', 'INTEGER'), col('last_seq', 'INTEGER'),
  ],
};

/** One row per submission with an outcome (the analysis's submissions). */
export const SUBMISSIONS: TableSpec = {
  name: 'submissions',
  columns: [
    col('run_id', 'VARCHAR'), col('idx', 'INTEGER'), col('submission_id', 'VARCHAR'), col('seq', 'INTEGER'), col('at_s', 'DOUBLE'),
    col('status', 'VARCHAR'), col('score', 'DOUBLE'), col('rejected_reason', 'VARCHAR'), col('valid', 'BOOLEAN'), col('is_copy_of_base', 'BOOLEAN'),
    col('route_declared', 'VARCHAR'), col('route_executed', 'VARCHAR'), col('checkpoint_sha256', 'VARCHAR'), col('code_changes', 'INTEGER'), col('processes', 'INTEGER'),
  ],
};

/** One row per run × model the agent called through the gateway (the analysis's `llm.models`). */
export const LLM_USAGE: TableSpec = {
  name: 'llm_usage',
  columns: [
    col('run_id', 'VARCHAR'), col('model', 'VARCHAR'), col('calls', 'INTEGER'), col('billable_calls', 'INTEGER'), col('turns', 'INTEGER'),
    col('input_tokens', 'BIGINT'), col('output_tokens', 'BIGINT'), col('cache_read_tokens', 'BIGINT'), col('cache_write_tokens', 'BIGINT'),
    col('cost_usd', 'DOUBLE'), col('calls_without_cost', 'INTEGER'),
  ],
};

/** Every event of every run stream, flat: the envelope, the payload as canonical JSON, and the sha256 of the stored bytes (what the tree heads hash). */
export const EVENTS: TableSpec = {
  name: 'events',
  columns: [
    col('run_id', 'VARCHAR'), col('seq', 'INTEGER'), col('event_id', 'VARCHAR'), col('type', 'VARCHAR'), col('occurred_at', 'VARCHAR'),
    col('schema_version', 'INTEGER'), col('bytes_sha256', 'VARCHAR'), col('data', 'VARCHAR'),
  ],
};

/** The built-in tables, in the order they are listed and exported. */
export const BUILT_IN_TABLES: readonly TableSpec[] = [RUNS, SUBMISSIONS, LLM_USAGE, EVENTS];

/** A table's rows: one array per row, the column order of its spec; null for a missing value. */
export type Cell = string | number | bigint | boolean | null;
export interface TableData {
  spec: TableSpec;
  rows: Cell[][];
}
