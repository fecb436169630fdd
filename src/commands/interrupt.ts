// The CLI's one way of hearing Ctrl-C and SIGTERM: every command that reacts to them (a run that
// stops its agents, a campaign pool, a worker, a following command) listens here, and only while
// it is in use, so that a signal nobody is listening for is the process's again.

/** Calls `on` for each SIGINT/SIGTERM (with how many came so far) until the returned function is called. */
export function onInterrupt(on: (signal: NodeJS.Signals, count: number) => void): () => void {
  let count = 0;
  const listener = (signal: NodeJS.Signals) => on(signal, ++count);
  process.on('SIGINT', listener);
  process.on('SIGTERM', listener);
  return () => {
    process.off('SIGINT', listener);
    process.off('SIGTERM', listener);
  };
}

/** The exit status after a signal: 130 for Ctrl-C, 143 for SIGTERM. */
export const signalExitCode = (signal: NodeJS.Signals): number => (signal === 'SIGINT' ? 130 : 143);

/**
 * Aborted on the first SIGINT/SIGTERM while in use, after which it stops listening (a later signal
 * goes to whoever else listens, e.g. withRunApp's second-Ctrl-C exit). With `exitCodes` the exit
 * status becomes 130/143 here; under withRunApp its own handler sets it. Dispose when done.
 */
export function interruptSignal(opts: { exitCodes?: boolean } = {}): { signal: AbortSignal; dispose: () => void } {
  const controller = new AbortController();
  const dispose = onInterrupt((signal) => {
    if (opts.exitCodes) process.exitCode = signalExitCode(signal);
    dispose();
    controller.abort();
  });
  return { signal: controller.signal, dispose };
}

/**
 * Runs `work` with a signal that Ctrl-C or SIGTERM aborts (exit code 130 or 143), listening for them
 * only while it runs: what a following command (`events --follow`, `logs --follow`) stops on.
 */
export async function untilInterrupted<T>(work: (signal: AbortSignal) => Promise<T>): Promise<T> {
  const stop = new AbortController();
  const dispose = onInterrupt((signal) => {
    process.exitCode = signalExitCode(signal);
    stop.abort();
  });
  try {
    return await work(stop.signal);
  } finally {
    dispose();
  }
}

/** Resolves on the first SIGINT/SIGTERM, and stops listening then (a worker's stop). */
export function nextInterrupt(): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    const dispose = onInterrupt((signal) => {
      dispose();
      resolve(signal);
    });
  });
}

/**
 * Resolves on the next Ctrl-C, which only this waiter hears: whoever else listens for SIGINT (a
 * finished run's handler, say) is set aside meanwhile and listens again afterwards.
 */
export async function nextInterruptAlone(): Promise<void> {
  const others = process.listeners('SIGINT');
  process.removeAllListeners('SIGINT');
  try {
    await new Promise<void>((resolve) => process.once('SIGINT', () => resolve()));
  } finally {
    for (const handler of others) process.on('SIGINT', handler);
  }
}
