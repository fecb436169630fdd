import { Table, TableIndex, type MigrationInterface, type QueryRunner } from 'typeorm';

/** The workspace-revision index (projections/workspace-revisions). Table API, so it runs on SQLite and PostgreSQL alike. */
export class CreateWorkspaceRevisions1767398400000 implements MigrationInterface {
  name = 'CreateWorkspaceRevisions1767398400000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.createTable(
      new Table({
        name: 'workspace_revisions',
        columns: [
          { name: 'id', type: 'varchar', length: '160', isPrimary: true },
          { name: 'run_id', type: 'varchar', length: '128' },
          { name: 'seq', type: 'integer' },
          { name: 'occurred_at', type: 'varchar', length: '40' },
          { name: 'event_type', type: 'varchar', length: '32' },
          { name: 'replaces', type: 'text', isNullable: true },
          { name: 'revisions', type: 'text' },
        ],
      }),
    );
    // "State at seq S" reads one run's rows with seq <= S in seq order: a range scan of this index.
    await queryRunner.createIndex('workspace_revisions', new TableIndex({ name: 'ix_workspace_revisions_run_seq', columnNames: ['run_id', 'seq'] }));
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.dropTable('workspace_revisions');
  }
}
