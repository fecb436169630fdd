/** Feeds fds 3, 4… of a spawned child; a command that never reads them fails on its own. */
export function writeExtraFds(stdio: ReadonlyArray<unknown>, fds: Buffer[] | undefined): void {
  fds?.forEach((bytes, i) => {
    const pipe = stdio[3 + i] as NodeJS.WritableStream & { on(event: 'error', fn: () => void): unknown };
    pipe.on('error', () => undefined);
    pipe.end(bytes);
  });
}
