import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { TaskPack, TaskPaths } from '../../../tasks/task-pack.js';

/** A tiny deterministic task pack for runtime specs; counts how often it was materialised. */
export function fakeTask(overrides: Partial<Pick<TaskPack, 'id' | 'evaluatorVersion' | 'baseModel'>> = {}): TaskPack & {
  materializations: number;
} {
  return {
    id: 'fake-task',
    level: 1,
    title: 'Fake task',
    baseModel: 'tiny-base',
    evaluatorVersion: '1',
    description: '# Fake task\n\nLearn to add.\n',
    materializations: 0,
    ...overrides,
    async materialize(paths: TaskPaths) {
      this.materializations++;
      await mkdir(join(paths.dataDir, 'splits'), { recursive: true });
      await writeFile(join(paths.dataDir, 'train.jsonl'), '{"q":"1+1","a":"2"}\n');
      await writeFile(join(paths.dataDir, 'splits', 'dev.jsonl'), '{"q":"2+2","a":"4"}\n');
      await writeFile(join(paths.modelDir, 'manifest.json'), '{"format":"a2rl-ref/fake-task/1"}\n');
      await writeFile(join(paths.privateDir, 'heldout.jsonl'), '{"q":"3+3","a":"6"}\n');
    },
    async evaluate() {
      return { score: 0, details: {} };
    },
  };
}
