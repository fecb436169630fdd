import { alfworld } from './alfworld/index.js';
import { alpacaeval } from './alpacaeval/index.js';
import { deepsearchqa } from './deepsearchqa/index.js';
import { gsm8k } from './gsm8k/index.js';
import { humaneval } from './humaneval/index.js';
import { refArith } from './ref-arith/index.js';
import { refHousehold } from './ref-household/index.js';
import { refJudge } from './ref-judge/index.js';
import { webshop } from './webshop/index.js';
import type { TaskPack } from './task-pack.js';

/** Every task pack a2rl can run, by id. */
export const TASKS: readonly TaskPack[] = [refArith, refJudge, refHousehold, gsm8k, humaneval, alpacaeval, alfworld, webshop, deepsearchqa];

export function getTask(id: string): TaskPack {
  const task = TASKS.find((t) => t.id === id);
  if (!task) throw new Error(`unknown task "${id}" (available: ${TASKS.map((t) => t.id).join(', ')})`);
  return task;
}
