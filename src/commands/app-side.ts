/**
 * The app (Nest, TypeORM, every projection) and what the commands take from it, loaded only by the
 * commands that use it: the others start without it.
 */
export async function appSide() {
  const [{ withApp }, { ProjectionRunnerService }, { RunSource }] = await Promise.all([
    import('./cli-support.js'),
    import('../../modules/readmodels/readmodels.module.js'),
    import('../../modules/query/run-source.js'),
  ]);
  return { withApp, ProjectionRunnerService, RunSource };
}
