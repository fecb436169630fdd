/** Undoes one thing a step started (closes a socket, stops observers, removes a cgroup). */
export type Disposer = () => Promise<unknown> | unknown;

/**
 * What a run has started, to be undone in reverse order (Node 20 has no AsyncDisposableStack). Each
 * step pushes a disposer as soon as the thing it undoes exists, so a failure at any step undoes exactly
 * what was started. `dispose` runs every disposer, last pushed first, each after the previous settled;
 * a failing one never skips the others, and the first failure is thrown once all have run.
 */
export class DisposalStack {
  private readonly disposers: Disposer[] = [];

  /** Pushes `disposer`; it runs before everything pushed earlier. */
  defer(disposer: Disposer): void {
    this.disposers.push(disposer);
  }

  /** Pushes `resource.close` and hands the resource back. */
  use<T extends { close(): Promise<unknown> | unknown }>(resource: T): T {
    this.defer(() => resource.close());
    return resource;
  }

  /** Runs and forgets every disposer, last pushed first; throws the first failure after all have run. */
  async dispose(): Promise<void> {
    let failure: { error: unknown } | undefined;
    for (let disposer = this.disposers.pop(); disposer; disposer = this.disposers.pop()) {
      try {
        await disposer();
      } catch (error) {
        failure ??= { error };
      }
    }
    if (failure) throw failure.error;
  }
}

/** Closes `resources` in the order given (the sandbox's ways out close in the order they opened), like `dispose`. */
export async function closeInOrder(resources: ReadonlyArray<{ close(): Promise<unknown> }>): Promise<void> {
  const stack = new DisposalStack();
  for (const resource of [...resources].reverse()) stack.use(resource);
  await stack.dispose();
}
