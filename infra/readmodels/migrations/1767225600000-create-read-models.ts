import { Table, type MigrationInterface, type QueryRunner } from 'typeorm';

/** Checkpoints and the run list. Written with the Table API so it runs on SQLite and PostgreSQL alike. */
export class CreateReadModels1767225600000 implements MigrationInterface {
  name = 'CreateReadModels1767225600000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.createTable(
      new Table({
        name: 'projection_checkpoints',
        columns: [
          { name: 'name', type: 'varchar', length: '100', isPrimary: true },
          { name: 'position', type: 'text', isNullable: true },
          { name: 'version', type: 'integer' },
          { name: 'events_processed', type: 'bigint', default: 0 },
        ],
      }),
    );
    await queryRunner.createTable(
      new Table({
        name: 'run_list',
        columns: [
          { name: 'run_id', type: 'varchar', length: '128', isPrimary: true },
          { name: 'task', type: 'varchar', length: '200', isNullable: true },
          { name: 'agent', type: 'varchar', length: '200', isNullable: true },
          { name: 'driver', type: 'varchar', length: '200', isNullable: true },
          { name: 'base_model', type: 'varchar', length: '200', isNullable: true },
          { name: 'state', type: 'varchar', length: '16', isNullable: true },
          { name: 'event_count', type: 'integer' },
          { name: 'last_seq', type: 'integer' },
          { name: 'scheduled_at', type: 'varchar', length: '40', isNullable: true },
          { name: 'last_event_at', type: 'varchar', length: '40' },
        ],
      }),
    );
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.dropTable('run_list');
    await queryRunner.dropTable('projection_checkpoints');
  }
}
