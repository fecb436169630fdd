/** Summary of repeated gradings of one checkpoint; all null when none succeeded. */
export interface ScoreStats {
  n: number;
  mean: number | null;
  /** Sample standard deviation (n − 1); null with fewer than two scores. */
  std: number | null;
  min: number | null;
  max: number | null;
}

export function scoreStats(scores: readonly number[]): ScoreStats {
  const n = scores.length;
  if (!n) return { n, mean: null, std: null, min: null, max: null };
  const mean = scores.reduce((a, b) => a + b, 0) / n;
  const std = n < 2 ? null : Math.sqrt(scores.reduce((acc, x) => acc + (x - mean) ** 2, 0) / (n - 1));
  return { n, mean, std, min: Math.min(...scores), max: Math.max(...scores) };
}
