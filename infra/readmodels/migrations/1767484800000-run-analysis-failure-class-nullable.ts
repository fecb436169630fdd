import { TableColumn, type MigrationInterface, type QueryRunner } from 'typeorm';

/** run_analysis.failure_class is null until the run has ended (failureClassOf): a running run has no failure class yet. */
export class RunAnalysisFailureClassNullable1767484800000 implements MigrationInterface {
  name = 'RunAnalysisFailureClassNullable1767484800000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.changeColumn('run_analysis', 'failure_class', new TableColumn({ name: 'failure_class', type: 'varchar', length: '32', isNullable: true }));
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DELETE FROM run_analysis WHERE failure_class IS NULL`); // rebuilt by the projection's next catch-up
    await queryRunner.changeColumn('run_analysis', 'failure_class', new TableColumn({ name: 'failure_class', type: 'varchar', length: '32' }));
  }
}
