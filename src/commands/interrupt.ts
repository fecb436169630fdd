/**
 * Runs `work` with a signal that Ctrl-C or SIGTERM aborts (exit code 130 or 143), listening for them
 * only while it runs: what a following command (`events --follow`, `logs --follow`) stops on.
 */
export async function untilInterrupted<T>(work: (signal: AbortSignal) => Promise<T>): Promise<T> {
  const stop = new AbortController();
  const onSignal = (signal: NodeJS.Signals) => {
    process.exitCode = signal === 'SIGINT' ? 130 : 143;
    stop.abort();
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  try {
    return await work(stop.signal);
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
}
