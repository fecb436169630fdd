import type { AnyProjection } from './run-projection.js';
import { runAnalysisProjection } from './run-analysis/run-analysis.projection.js';
import { runListProjection } from './run-list/run-list.projection.js';
import { workspaceRevisionsProjection } from './workspace-revisions/workspace-revisions.projection.js';

/** Every projection a2rl maintains, in the order they are caught up. */
export const PROJECTIONS: AnyProjection[] = [runListProjection, runAnalysisProjection, workspaceRevisionsProjection];
