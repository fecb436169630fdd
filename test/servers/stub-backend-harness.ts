import { chmod } from 'node:fs/promises';
import path from 'node:path';
import { expect } from '@jest/globals';
import { EnvClient } from '../../modules/serving/env-client.js';
import { startEnvServer } from '../../modules/serving/env-server.js';
import { loadServingConfig } from '../../modules/serving/serving.config.js';
import type { EnvServer } from '../../tasks/task-pack.js';
import { processesWith } from './processes.js';

const ENV_SERVER = path.resolve('tasks/paper-common/env_server.py');
/** The stub packages' directory (what the command puts on PYTHONPATH). */
export const STUBS = path.resolve('test/servers/stubs');
const TIMINGS = { stopGraceMs: 1_000, pollMs: 50 };

/**
 * Starts a task's REAL environment backend (`tasks/<env>/env_backend.py`) behind the bundled server,
 * the way the harness starts it, with the stub packages of test/servers/stubs on PYTHONPATH. The
 * command goes through `env` (stubs' PYTHONPATH, no .pyc files in the checkout, `unset` variables
 * dropped); `--option marker=<marker>` is an option the backend must ignore and finds the server in `ps`.
 */
export function stubBackendHarness(env: 'alfworld' | 'webshop', marker: string, unset: readonly string[] = []) {
  const backend = path.resolve(`tasks/${env}/env_backend.py`);
  const command = (options: string, vars: Record<string, string> = {}, python = 'python3'): string => {
    const assignments = Object.entries({ PYTHONPATH: STUBS, PYTHONDONTWRITEBYTECODE: '1', ...vars }).map(([k, v]) => `'${k}=${v}'`);
    return `env ${unset.map((u) => `-u ${u} `).join('')}${assignments.join(' ')} ${python} '${ENV_SERVER}' --backend '${backend}' --port {port} --option marker=${marker} ${options}`;
  };
  const start = async (options: string, vars?: Record<string, string>, python?: string): Promise<EnvServer> => {
    // The stubs' logs (`*_LOG=<file>`) are written by the confined server, whose uid is its own: their folders are lent writable.
    const logDirs = [...new Set(Object.entries(vars ?? {}).flatMap(([k, v]) => (k.endsWith('_LOG') && path.isAbsolute(v) ? [path.dirname(v)] : [])))];
    for (const dir of logDirs) await chmod(dir, 0o1777);
    const config = loadServingConfig({ [`A2RL_ENV_${env.toUpperCase()}_COMMAND`]: command(options, vars, python), A2RL_ENV_READY_TIMEOUT: '20s', A2RL_SERVER_WRITABLE: logDirs.join(':') });
    return startEnvServer(config, env, TIMINGS);
  };

  return {
    start,
    /** The error a start fails with; a server that starts anyway is stopped, and the test fails. */
    async startError(options: string, vars?: Record<string, string>, python?: string): Promise<Error> {
      let server: EnvServer;
      try {
        server = await start(options, vars, python);
      } catch (err) {
        return err as Error;
      }
      await server.stop();
      throw new Error(`the ${env} environment server started with: ${options}`);
    },
    /** Runs `use` against a started server, stops it and checks nothing of it is left running. */
    async withServer(options: string, use: (client: EnvClient) => Promise<void>, vars?: Record<string, string>): Promise<void> {
      const server = await start(options, vars);
      try {
        await use(new EnvClient(server));
      } finally {
        await server.stop();
      }
      expect(processesWith(marker)).toEqual([]);
    },
  };
}

/** A start-up error's text without line breaks, so one pattern can span the server's output tail. */
export const flat = (err: Error): string => err.message.replace(/\n/g, '');
