import { chmod, chown, rm } from 'node:fs/promises';
import net from 'node:net';

export interface Lifeline {
  close(): Promise<void>;
}

/**
 * The harness's end of the sandbox's lifeline (bridge.mjs `--lifeline`): a Unix socket whose
 * connections are held open and never read. When the harness process dies, however it dies, the
 * kernel closes them and the bridge kills what is left of the agent. Closed by the harness only once
 * the agent has exited.
 */
export async function openLifeline(path: string, owner?: { gid: number }): Promise<Lifeline> {
  const held = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    held.add(socket);
    socket.on('error', () => undefined);
    socket.on('close', () => held.delete(socket));
    socket.on('data', () => undefined); // nothing is expected; whatever comes is dropped
  });
  await rm(path, { force: true });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(path, () => resolve());
  });
  server.on('error', () => undefined);
  if (owner) await chown(path, 0, owner.gid);
  await chmod(path, 0o660);
  return {
    close: async () => {
      for (const socket of held) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await rm(path, { force: true });
    },
  };
}
