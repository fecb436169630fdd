import net from 'node:net';
import { listenUnix, type SocketOwner } from './unix-socket.js';

export interface Lifeline {
  close(): Promise<void>;
}

/**
 * The harness's end of the sandbox's lifeline (bridge.mjs `--lifeline`): a Unix socket whose
 * connections are held open and never read. When the harness process dies, however it dies, the
 * kernel closes them and the bridge kills what is left of the agent. Closed by the harness only once
 * the agent has exited.
 */
export async function openLifeline(path: string, owner?: SocketOwner): Promise<Lifeline> {
  const held = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    held.add(socket);
    socket.on('error', () => undefined);
    socket.on('close', () => held.delete(socket));
    socket.on('data', () => undefined); // nothing is expected; whatever comes is dropped
  });
  const stop = await listenUnix(server, path, owner);
  return {
    close: async () => {
      for (const socket of held) socket.destroy();
      await stop();
    },
  };
}
