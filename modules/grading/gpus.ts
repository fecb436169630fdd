import { readdirSync } from 'node:fs';

/** The grading device of a submission that ran on no GPU (and the lock key of such gradings). */
export const CPU = 'cpu';

/** A submission's `gpu` this server cannot grade on: answered 400 `{error, available_gpus}` as the paper's server does. */
export class GpuRequestError extends Error {
  override readonly name = 'GpuRequestError';
  constructor(
    message: string,
    readonly availableGpus: readonly string[],
  ) {
    super(message);
  }
}

/**
 * The GPUs gradings may use. As the paper's server: the ids in `CUDA_VISIBLE_DEVICES` as the
 * harness was started. Where that is unset, one index per `/dev/nvidia<N>` (a2rl's addition: the
 * paper's server then knows no GPU at all and refuses every `gpu`). An empty list: no GPU here.
 */
export function detectAvailableGpus(env: NodeJS.ProcessEnv = process.env, devDir = '/dev'): string[] {
  const visible = env.CUDA_VISIBLE_DEVICES;
  if (visible !== undefined) return sortIds(splitIds(visible));
  let names: string[];
  try {
    names = readdirSync(devDir);
  } catch {
    return [];
  }
  const count = names.filter((name) => /^nvidia\d+$/.test(name)).length;
  return Array.from({ length: count }, (_, i) => String(i));
}

/**
 * The device a submission is graded on, from its `gpu`: absent → the first available GPU (the
 * paper's default), or 'cpu' where there is none; "cpu" → 'cpu'; an index, an id or a list such
 * as "2,3" → those GPUs, each of which must be available, sorted and joined by ",".
 * ("cuda:1" is taken as "1".) Throws GpuRequestError otherwise.
 */
export function gradingDevice(gpu: number | string | null | undefined, available: readonly string[]): string {
  if (gpu === undefined || gpu === null) return available[0] ?? CPU;
  const text = String(gpu).trim();
  if (text.toLowerCase() === CPU) return CPU;
  const requested = splitIds(text).map((id) => id.replace(/^cuda:/i, ''));
  if (requested.length === 0) throw new GpuRequestError('gpu is empty: give GPU ids such as "0" or "2,3", or leave it out', available);
  if (requested.some((id) => id.toLowerCase() === CPU)) throw new GpuRequestError('gpu cannot mix "cpu" with GPU ids', available);
  const missing = requested.filter((id) => !available.includes(id));
  if (missing.length > 0) {
    const where = available.length ? `the available GPUs are ${available.join(',')}` : 'no GPU is available to the grading server';
    throw new GpuRequestError(`GPU ${missing.join(',')} not available: ${where} (CUDA_VISIBLE_DEVICES of the harness)`, available);
  }
  return sortIds([...new Set(requested)]).join(',');
}

/** The locks a grading on `device` holds, in the one order every grading takes them (so overlapping lists never deadlock). */
export function deviceLocks(device: string): string[] {
  return device === CPU ? [CPU] : device.split(',');
}

function splitIds(list: string): string[] {
  return list
    .split(',')
    .map((id) => id.trim())
    .filter((id) => id !== '');
}

/** Numeric ids by value (the paper's `sorted(key=int)`), then other ids (UUIDs, MIG ids) as given. */
function sortIds(ids: string[]): string[] {
  const numeric = ids.filter((id) => /^\d+$/.test(id)).sort((a, b) => Number(a) - Number(b));
  return [...numeric, ...ids.filter((id) => !/^\d+$/.test(id))];
}
