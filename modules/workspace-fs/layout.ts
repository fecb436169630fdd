import { join } from 'node:path';

// A run's workspace as the paper lays it out, and the names in it: shared by the run session that
// prepares it, the sandbox that mounts it, the file watcher that observes it and the grading API that
// reads run_meta.json.

/** Paths of a run's workspace, laid out as in the paper. */
export interface WorkspaceLayout {
  /** `<workspacesRoot>/<runId>`: the agent's cwd and `WORKSPACE`. */
  root: string;
  codeDir: string; // <root>/code
  dataDir: string; // <root>/data (read-only to the agent)
  modelsDir: string; // <root>/models
  baseModelDir: string; // <root>/models/<baseModel> (read-only to the agent)
  outputDir: string; // <root>/output
  descriptionFile: string; // <root>/description.md
  instructionsFile: string; // <root>/instructions.md
  runMetaFile: string; // <root>/run_meta.json
}

export interface ManifestEntry {
  /** Workspace-relative, posix separators: `data/...` or `models/<baseModel>/...`. */
  path: string;
  sha256: string;
  size: number;
}

export class WorkspaceError extends Error {
  override readonly name = 'WorkspaceError';
}

/** Files the harness puts into the workspace itself (the file watcher ignores them). */
const HARNESS_FILES = new Set(['description.md', 'instructions.md', 'run_meta.json']);

export function isHarnessFile(workspaceRelativePath: string): boolean {
  return HARNESS_FILES.has(workspaceRelativePath);
}

const SAFE_SEGMENT = /^(?!\.{1,2}$)[A-Za-z0-9._-]{1,200}$/;


export function workspaceLayout(workspacesRoot: string, runId: string, baseModel: string): WorkspaceLayout {
  assertSegment('run id', runId);
  assertSegment('base model', baseModel);
  const root = join(workspacesRoot, runId);
  return {
    root,
    codeDir: join(root, 'code'),
    dataDir: join(root, 'data'),
    modelsDir: join(root, 'models'),
    baseModelDir: join(root, 'models', baseModel),
    outputDir: join(root, 'output'),
    descriptionFile: join(root, 'description.md'),
    instructionsFile: join(root, 'instructions.md'),
    runMetaFile: join(root, 'run_meta.json'),
  };
}

export function assertSegment(what: string, value: string): void {
  if (!SAFE_SEGMENT.test(value)) throw new WorkspaceError(`${what} "${value}" is not a safe directory name`);
}

/** run_meta.json as the paper has it; times are Unix epoch seconds (fractional), null until known. */
export interface RunMetaFields {
  start_time: number | null;
  timeout_s: number | null;
  last_submit_time: number | null;
  end_time: number | null;
}
