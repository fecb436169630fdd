import { ConfigError } from '../../src/config/config.js';
import { chooseServeEngine, DEFAULT_SERVE_COMMAND, defaultEnvCommand, loadServingConfig, renderCommand, splitCommand, type EngineProbe } from './serving.config.js';

function configError(env: NodeJS.ProcessEnv): ConfigError {
  try {
    loadServingConfig(env);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return err as ConfigError;
  }
  throw new Error('expected a ConfigError');
}

describe('serving configuration', () => {
  it('defaults to vLLM on a free port, a 600 s readiness timeout and no judge', () => {
    const config = loadServingConfig({});
    expect(config.serveCommand).toEqual(splitCommand(DEFAULT_SERVE_COMMAND));
    expect(config.serveCommand[0]).toBe('vllm');
    expect(config).toMatchObject({ inferenceUrl: null, readyTimeoutMs: 600_000, judge: null });
  });

  it('starts the bundled Python environment server with each task\'s backend unless a command or URL is configured', () => {
    const config = loadServingConfig({ A2RL_ENV_WEBSHOP_URL: 'http://gpu-box:3000/', A2RL_ENV_WEBSHOP_TOKEN: 'secret' });
    expect(config.envServers.alfworld).toEqual({ kind: 'command', command: defaultEnvCommand('alfworld'), variable: 'A2RL_ENV_ALFWORLD_COMMAND', passEnv: ['ALFWORLD_DATA'] });
    expect(config.envServers.alfworld!.kind === 'command' && config.envServers.alfworld!.command.slice(-4)).toEqual(['--backend', expect.stringMatching(/tasks\/alfworld\/env_backend\.py$/), '--port', '{port}']);
    expect(config.envServers.webshop).toEqual({ kind: 'url', baseUrl: 'http://gpu-box:3000', token: 'secret', variable: 'A2RL_ENV_WEBSHOP_URL' });
    expect(config.envReadyTimeoutMs).toBe(600_000);
  });

  it('splits the template without a shell and keeps a substituted path with spaces as one argument', () => {
    expect(splitCommand(`a 'b c' "d \\"e\\" \\\\" f\\ g $HOME|x`)).toEqual(['a', 'b c', 'd "e" \\', 'f g', '$HOME|x']);
    const argv = renderCommand(splitCommand('serve {model_path} --port={port} --name {name}'), { model_path: '/tmp/my ckpt', port: '8001', name: 'm' });
    expect(argv).toEqual(['serve', '/tmp/my ckpt', '--port=8001', '--name', 'm']);
  });

  it('normalises endpoint URLs to end before /v1 and reads the judge', () => {
    const config = loadServingConfig({
      A2RL_INFERENCE_URL: 'http://127.0.0.1:8000/v1/',
      A2RL_INFERENCE_LORA: 'runtime',
      A2RL_SERVE_READY_TIMEOUT: '2m',
      A2RL_JUDGE_URL: 'https://api.openai.com/v1',
      A2RL_JUDGE_MODEL: 'gpt-4-1106-preview',
      A2RL_JUDGE_API_KEY: 'sk-test',
    });
    expect(config.inferenceUrl).toBe('http://127.0.0.1:8000');
    expect(config.inferenceLora).toBe(true);
    expect(config.readyTimeoutMs).toBe(120_000);
    expect(config.judge).toEqual({ baseUrl: 'https://api.openai.com', model: 'gpt-4-1106-preview', apiKey: 'sk-test' });
  });

  it.each([
    [{ A2RL_SERVE_COMMAND: 'vllm serve "{model_path} --port {port}' }, 'A2RL_SERVE_COMMAND', /unterminated/],
    [{ A2RL_SERVE_COMMAND: 'vllm serve {model_path}' }, 'A2RL_SERVE_COMMAND', /\{port\}/],
    [{ A2RL_SERVE_COMMAND: 'vllm serve {model_path} --port {port} {gpu}' }, 'A2RL_SERVE_COMMAND', /unknown placeholder \{gpu\}/],
    [{ A2RL_SERVE_READY_TIMEOUT: 'soon' }, 'A2RL_SERVE_READY_TIMEOUT', /invalid duration/],
    [{ A2RL_INFERENCE_URL: 'localhost:8000' }, 'A2RL_INFERENCE_URL', /scheme|not a URL/],
    [{ A2RL_INFERENCE_URL: 'ftp://host/v1' }, 'A2RL_INFERENCE_URL', /scheme/],
    [{ A2RL_JUDGE_URL: 'https://api.openai.com' }, 'A2RL_JUDGE_MODEL', /no judge model/],
    [{ A2RL_JUDGE_MODEL: 'gpt-4' }, 'A2RL_JUDGE_URL', /no judge endpoint/],
    [{ A2RL_ENV_ALFWORLD_COMMAND: 'python3 server.py' }, 'A2RL_ENV_ALFWORLD_COMMAND', /\{port\}/],
    [{ A2RL_ENV_WEBSHOP_COMMAND: 'python3 server.py --port {port} --model {model_path}' }, 'A2RL_ENV_WEBSHOP_COMMAND', /unknown placeholder \{model_path\}/],
    [{ A2RL_ENV_WEBSHOP_URL: 'http://h:3000', A2RL_ENV_WEBSHOP_COMMAND: 'x --port {port}' }, 'A2RL_ENV_WEBSHOP_URL', /either/],
    [{ A2RL_ENV_ALFWORLD_URL: 'gpu-box:3000' }, 'A2RL_ENV_ALFWORLD_URL', /scheme|not a URL/],
    [{ A2RL_ENV_READY_TIMEOUT: 'later' }, 'A2RL_ENV_READY_TIMEOUT', /invalid duration/],
  ])('rejects %j naming %s', (env, variable, message) => {
    const err = configError(env);
    expect(err.variable).toBe(variable);
    expect(err.message.startsWith(`${variable}: `)).toBe(true);
    expect(err.message).toMatch(message);
  });
});

describe('the engine that serves checkpoints', () => {
  const machine = (gpu: boolean, vllm: boolean, python: string | null): EngineProbe => ({ gpu: () => gpu, vllm: () => vllm, python: () => python });
  const PY = '/cache/agent-python/bin/python';

  it('is vLLM where a GPU and vllm are present, even with the CPU engine installed', () => {
    expect(chooseServeEngine({}, machine(true, true, PY))).toMatchObject({ engine: 'vllm', template: DEFAULT_SERVE_COMMAND });
  });

  it('is the CPU engine on the agents\' Python where there is no GPU with vLLM', () => {
    for (const m of [machine(false, false, PY), machine(false, true, PY), machine(true, false, PY)]) {
      const choice = chooseServeEngine({}, m);
      expect(choice.engine).toBe('transformers');
      const words = splitCommand(choice.template);
      expect(words[0]).toBe(PY);
      expect(words[1]).toMatch(/modules\/serving\/python\/transformers_server\.py$/);
      expect(words.slice(2)).toEqual(['{model_path}', '--host', '127.0.0.1', '--port', '{port}', '--served-model-name', '{name}', '--seed', '0']);
    }
  });

  it('stays vLLM (doctor names what is missing) when neither is there', () => {
    expect(chooseServeEngine({}, machine(false, false, null)).engine).toBe('vllm');
  });

  it('follows A2RL_SERVE_COMMAND first, then A2RL_SERVE_ENGINE', () => {
    expect(chooseServeEngine({ A2RL_SERVE_COMMAND: 'my-server {model_path} {port}' }, machine(false, false, PY))).toMatchObject({ engine: 'custom', template: 'my-server {model_path} {port}' });
    expect(chooseServeEngine({ A2RL_SERVE_ENGINE: 'vllm' }, machine(false, false, PY)).engine).toBe('vllm');
    expect(chooseServeEngine({ A2RL_SERVE_ENGINE: 'transformers' }, machine(true, true, PY)).engine).toBe('transformers');
    expect(() => chooseServeEngine({ A2RL_SERVE_ENGINE: 'transformers' }, machine(true, true, null))).toThrow(ConfigError);
    expect(() => chooseServeEngine({ A2RL_SERVE_ENGINE: 'tgi' }, machine(true, true, PY))).toThrow(/unknown engine/);
  });

  it('is what loadServingConfig serves with', () => {
    const config = loadServingConfig({}, machine(false, false, PY));
    expect(config.engine).toBe('transformers');
    expect(config.serveCommand[0]).toBe(PY);
  });
});
