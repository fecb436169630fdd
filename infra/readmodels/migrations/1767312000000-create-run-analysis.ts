import { Table, type MigrationInterface, type QueryRunner } from 'typeorm';

/** The run_analysis read model (projections/run-analysis). Table API, so it runs on SQLite and PostgreSQL alike. */
export class CreateRunAnalysis1767312000000 implements MigrationInterface {
  name = 'CreateRunAnalysis1767312000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.createTable(
      new Table({
        name: 'run_analysis',
        columns: [
          { name: 'run_id', type: 'varchar', length: '128', isPrimary: true },
          { name: 'task', type: 'varchar', length: '200', isNullable: true },
          { name: 'agent', type: 'varchar', length: '200', isNullable: true },
          { name: 'driver', type: 'varchar', length: '200', isNullable: true },
          { name: 'base_model', type: 'varchar', length: '200', isNullable: true },
          { name: 'state', type: 'varchar', length: '16', isNullable: true },
          { name: 'baseline', type: 'double precision', isNullable: true },
          { name: 'best', type: 'double precision', isNullable: true },
          { name: 'improvement', type: 'double precision', isNullable: true },
          { name: 'failure_class', type: 'varchar', length: '32' },
          { name: 'route_best', type: 'varchar', length: '32' },
          { name: 'valid_submission_rate', type: 'double precision', isNullable: true },
          { name: 'submissions', type: 'integer' },
          { name: 'scheduled_at', type: 'varchar', length: '40', isNullable: true },
          { name: 'last_seq', type: 'integer' },
          { name: 'analysis', type: 'text' },
        ],
      }),
    );
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.dropTable('run_analysis');
  }
}
