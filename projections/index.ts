import type { Projection } from './projection.js';
import { runListProjection } from './run-list/run-list.projection.js';

/** Every projection a2rl maintains, in the order they are caught up. */
export const PROJECTIONS: Projection[] = [runListProjection];
