/**
 * Per-run resource limits: set per task pack (`TaskPack.limits`), overridable per run
 * (`a2rl run --limit name=value`), recorded in `WorkspacePrepared.limits`, and each one reached is a
 * `LimitReached` fact. `null` means not limited.
 */
export interface RunLimits {
  /** Processes and threads the agent's uid may have at once (RLIMIT_NPROC; `ulimit -u`). */
  maxProcesses: number;
  /** Address-space-independent memory cap of the whole agent tree (cgroup memory), where the machine allows. */
  memoryBytes: number | null;
  /** CPU seconds per agent process (RLIMIT_CPU). */
  cpuSeconds: number | null;
  /** Largest single file the agent may write (RLIMIT_FSIZE: the write fails with EFBIG). */
  fileBytes: number;
  /** The workspace's total logical size (sparse files count at their logical size), accounted by the harness. */
  diskBytes: number;
  /** Bytes of stdout and of stderr archived per stream; the rest is counted, not stored. */
  outputBytesPerStream: number;
  /** A submitted checkpoint's total logical size, checked before any byte is copied. */
  checkpointBytes: number;
  /** Tokens (input, output and cache) of the agent's model calls through the LLM gateway (`--max-llm-tokens`). */
  llmTokens: number | null;
  /** US dollars of the agent's model calls by the price table (`--max-llm-cost`); calls of unpriced models add nothing. */
  llmCostUsd: number | null;
}

export type LimitName = keyof RunLimits;

const GiB = 1024 ** 3;
const MiB = 1024 ** 2;

/** Defaults for the CPU reference tasks (seconds of work, kilobytes of checkpoints). */
export const REFERENCE_LIMITS: RunLimits = {
  maxProcesses: 1024,
  memoryBytes: 8 * GiB,
  cpuSeconds: null,
  fileBytes: 1 * GiB,
  diskBytes: 4 * GiB,
  outputBytesPerStream: 64 * MiB,
  checkpointBytes: 1 * GiB,
  llmTokens: null,
  llmCostUsd: null,
};

/** Defaults for the paper's GPU tasks: 7B-class checkpoints, datasets and caches of tens of GB. */
export const PAPER_LIMITS: RunLimits = {
  maxProcesses: 8192,
  memoryBytes: null,
  cpuSeconds: null,
  fileBytes: 64 * GiB,
  diskBytes: 200 * GiB,
  outputBytesPerStream: 256 * MiB,
  checkpointBytes: 64 * GiB,
  llmTokens: null,
  llmCostUsd: null,
};

export const LIMIT_NAMES = Object.keys(REFERENCE_LIMITS) as LimitName[];

/** Limits that may be lifted with `none`; the rest can only be set. */
const LIFTABLE: readonly LimitName[] = ['memoryBytes', 'cpuSeconds', 'llmTokens', 'llmCostUsd'];

const UNITS: Record<string, number> = { '': 1, k: 1024, m: MiB, g: GiB, t: 1024 * GiB };

/**
 * `a2rl run --limit name=value` (repeatable): sizes take K/M/G/T suffixes (powers of 1024), `none`
 * lifts a limit that may be lifted (memoryBytes, cpuSeconds). Throws one line naming what is wrong.
 */
export function parseLimitOverrides(specs: readonly string[]): Partial<RunLimits> {
  const out: Partial<Record<LimitName, number | null>> = {};
  for (const spec of specs) {
    const match = /^([A-Za-z]+)=(.+)$/.exec(spec.trim());
    if (!match) throw new Error(`--limit must be name=value, got "${spec}" (names: ${LIMIT_NAMES.join(', ')})`);
    const [, name, raw] = match;
    if (!LIMIT_NAMES.includes(name as LimitName)) throw new Error(`unknown limit "${name}" (names: ${LIMIT_NAMES.join(', ')})`);
    const limit = name as LimitName;
    if (raw === 'none') {
      if (!LIFTABLE.includes(limit)) throw new Error(`the limit ${limit} cannot be lifted, only set`);
      out[limit] = null;
      continue;
    }
    if (limit === 'llmCostUsd') {
      out[limit] = parseDollars(raw);
      continue;
    }
    const value = /^(\d+(?:\.\d+)?)([kmgt]?)i?b?$/i.exec(raw);
    if (!value) throw new Error(`--limit ${limit}: "${raw}" is not a number (sizes may end in K, M, G or T)`);
    const n = Math.floor(Number(value[1]) * UNITS[value[2].toLowerCase()]);
    if (n < 1 || !Number.isSafeInteger(n)) throw new Error(`--limit ${limit}: ${raw} is out of range`);
    out[limit] = n;
  }
  return out as Partial<RunLimits>;
}

/** `--max-llm-cost` / `--limit llmCostUsd=`: a positive amount of US dollars, e.g. 25 or 2.50 or $5. */
export function parseDollars(raw: string): number {
  const match = /^\$?(\d+(?:\.\d+)?)$/.exec(raw.trim());
  const n = match ? Number(match[1]) : NaN;
  if (!(n > 0) || !Number.isFinite(n)) throw new Error(`the LLM cost limit must be a positive number of US dollars, got "${raw}"`);
  return n;
}
