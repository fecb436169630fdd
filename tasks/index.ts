import { refArith } from './ref-arith/index.js';
import { refHousehold } from './ref-household/index.js';
import { refJudge } from './ref-judge/index.js';
import type { TaskPack } from './task-pack.js';

/** Every task pack a2rl can run, by id. */
export const TASKS: readonly TaskPack[] = [refArith, refJudge, refHousehold];

export function getTask(id: string): TaskPack {
  const task = TASKS.find((t) => t.id === id);
  if (!task) throw new Error(`unknown task "${id}" (available: ${TASKS.map((t) => t.id).join(', ')})`);
  return task;
}
