import { randomBytes } from 'node:crypto';
import { EvaluatorError, type EnvServer } from '../../tasks/task-pack.js';
import { EnvClient } from './env-client.js';
import { confineServer, type ServerIsolation } from './confinement.js';
import { refuseMissingCommand, ServerProcess, type StartTimings } from './server-process.js';
import { renderCommand, type ServingConfig } from './serving.config.js';

/**
 * Starts the environment server `name` from its configured command (on a free loopback port, with a
 * fresh bearer token in `A2RL_ENV_TOKEN` so nothing else on the machine can drive it) and waits for
 * `GET /health`; or connects to the configured URL of a server someone else runs (never stopped).
 */
export async function startEnvServer(config: ServingConfig, name: string, t: StartTimings, signal?: AbortSignal, started: ServerIsolation[] = []): Promise<EnvServer> {
  const server = config.envServers[name];
  if (!server) throw new EvaluatorError(`no environment server is configured under the name "${name}" (known: ${Object.keys(config.envServers).join(', ')})`);
  if (server.kind === 'url') {
    const endpoint = { baseUrl: server.baseUrl, token: server.token };
    if ((await new EnvClient(endpoint, 5_000).probe(signal)) === null) {
      throw new EvaluatorError(`the ${name} environment server at ${server.baseUrl} (${server.variable}) does not answer GET /health with a2rl environment protocol 1`);
    }
    return { ...endpoint, stop: async () => undefined };
  }
  if (signal?.aborted) throw new EvaluatorError(`cancelled before the ${name} environment server started`);
  const what = `the ${name} environment server`;
  refuseMissingCommand(server.command[0]!, what, server.variable);
  const token = randomBytes(24).toString('base64url');
  // Confined as model servers are: it answers what the agent sends. It grades on no GPU.
  const launch = await confineServer({
    what,
    command: (port) => renderCommand(server.command, { port: String(port) }),
    checkpoints: [],
    env: { A2RL_ENV_TOKEN: token },
    passEnv: server.passEnv,
    device: 'cpu',
    config: config.server,
  });
  started.push(launch.isolation);
  const child = new ServerProcess(launch, t.stopGraceMs, what, server.variable);
  await child.started;
  const endpoint = { baseUrl: `http://127.0.0.1:${launch.port}`, token };
  const client = new EnvClient(endpoint, 5_000);
  await child.waitUntilReady(async () => (await client.probe(signal)) !== null, config.envReadyTimeoutMs, t.pollMs, 'A2RL_ENV_READY_TIMEOUT', signal);
  return { ...endpoint, stop: () => child.stop() };
}
