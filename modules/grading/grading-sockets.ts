import type { Server as HttpServer } from 'node:http';
import net from 'node:net';
import { Injectable, Optional } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import { listenUnix, type SocketOwner } from '../sandbox/unix-socket.js';

/** Marks a connection that arrived on a run's socket: every request on it acts for that run. */
const BRIDGED_TOKEN = Symbol('a2rl.bridgedRunToken');

interface BridgedSocket extends net.Socket {
  [BRIDGED_TOKEN]?: string;
}

export interface GradingSocket {
  readonly path: string;
  close(): Promise<void>;
}

/**
 * The grading API on a Unix socket per run: the sandbox binds that socket in and bridges it to a
 * loopback port, so the agent's only way to the grading API needs no credential and reaches only its
 * own run. Connections are handed to the application's HTTP server itself (no second hop); the
 * middleware `bridgedRunPrefix` then routes each of their requests under `/g/<token>`.
 */
@Injectable()
export class GradingSockets {
  constructor(@Optional() private readonly adapterHost?: HttpAdapterHost) {}

  async open(path: string, token: string, owner?: SocketOwner): Promise<GradingSocket> {
    const http = this.adapterHost?.httpAdapter?.getHttpServer() as HttpServer | undefined;
    if (!http) throw new Error('the grading API is not served by this process: no socket can be opened for the sandbox');
    const live = new Set<net.Socket>();
    const server = net.createServer((socket: BridgedSocket) => {
      socket[BRIDGED_TOKEN] = token;
      live.add(socket);
      socket.once('close', () => live.delete(socket));
      http.emit('connection', socket);
    });
    const stop = await listenUnix(server, path, owner);
    return {
      path,
      close: async () => {
        for (const socket of live) socket.destroy();
        await stop();
      },
    };
  }
}

interface RoutedRequest {
  url?: string;
  socket: BridgedSocket;
}

/**
 * Express middleware: a request that came through a run's socket is served as `/g/<token>/<path>`
 * whatever path it names, so a bridged agent can reach nothing but its own run's routes.
 */
export function bridgedRunPrefix(req: RoutedRequest, _res: unknown, next: () => void): void {
  const token = req.socket[BRIDGED_TOKEN];
  if (token !== undefined) req.url = `/g/${token}${req.url?.startsWith('/') ? '' : '/'}${req.url ?? ''}`;
  next();
}
