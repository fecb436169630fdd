import { chmod, chown, rm } from 'node:fs/promises';
import type net from 'node:net';

/** Who may use a socket bound into the sandbox besides the harness: the agent's group (root harness). */
export interface SocketOwner {
  gid: number;
}

/** A socket of the run directory usable by the harness and the agent's group only (0660, root:gid). */
export async function restrictSocket(path: string, owner?: SocketOwner): Promise<void> {
  if (owner) await chown(path, 0, owner.gid);
  await chmod(path, 0o660);
}

/**
 * `server` listening on the Unix socket `path` (a stale file there is replaced), restricted as above;
 * once listening, no error of a connection can crash the harness. Resolves with its closer, which
 * also removes the file.
 */
export async function listenUnix(server: net.Server, path: string, owner?: SocketOwner): Promise<() => Promise<void>> {
  await rm(path, { force: true });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(path, () => resolve());
  });
  server.on('error', () => undefined);
  await restrictSocket(path, owner);
  return async () => {
    await new Promise<void>((resolve) => server.close(() => resolve()));
    await rm(path, { force: true });
  };
}
