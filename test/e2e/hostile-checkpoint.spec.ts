import { cpSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { runA2rl } from './a2rl-cli.js';

// A checkpoint whose loading runs code in the model server, against the built `a2rl` with the harness
// as root: hostile-serve.mjs stands in for a vLLM that a crafted checkpoint took over. It serves the
// base model honestly (the baseline), and on the agent's checkpoint tries what that code would try —
// the harness's keys, its ledger and the held-out data, loopback services of the host, writing its
// own checkpoint, a fork bomb — then exits with a one-line report, which the grading's error records.

const fixtures = path.resolve('tasks/gsm8k/fixtures');
const fakeVllm = path.resolve('test/servers/fake-vllm.mjs');
const hostile = path.resolve('modules/serving/testing/hostile-serve.mjs');

interface Ev {
  type: string;
  data: Record<string, unknown>;
}

let home: string;
let service: net.Server;
let serviceHits = 0;

beforeAll(async () => {
  home = mkdtempSync(path.join(os.tmpdir(), 'a2rl-hostile-ckpt-e2e-'));
  cpSync(fixtures, path.join(home, 'datasets', 'gsm8k'), { recursive: true });
  // A service of the host's loopback (PostgreSQL, Redis, a2rl serve stand here).
  service = net.createServer((s) => {
    serviceHits++;
    s.destroy();
  });
  await new Promise<void>((resolve) => service.listen(0, '127.0.0.1', resolve));
});
afterAll(async () => {
  await new Promise((resolve) => service.close(resolve));
  rmSync(home, { recursive: true, force: true });
});

const a2rl = (args: string[]) => {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    A2RL_HOME: home,
    A2RL_SERVE_COMMAND: `${process.execPath} ${hostile} {model_path} --port {port} --served-model-name {name} --mode report --honest ${fakeVllm}`,
    A2RL_SERVE_READY_TIMEOUT: '60s',
    A2RL_SERVER_MAX_PROCESSES: '64',
    // Keys the harness holds while it grades.
    A2RL_LLM_OPENAI_KEY: 'sk-a2rl-e2e-provider-key',
    HF_TOKEN: 'hf_a2rle2e',
  };
  delete env.A2RL_INFERENCE_URL;
  return runA2rl(args, { env });
};

describe('a hostile checkpoint in the model server a2rl starts (root harness, bubblewrap)', () => {
  it('reaches none of the harness\'s keys, ledger, held-out data or loopback services, cannot write its checkpoint or fork-bomb; the baseline still grades', async () => {
    const targets = {
      read: [path.join(home, 'ledger.db'), path.join(home, 'datasets', 'gsm8k', 'test.jsonl'), '/etc/shadow'],
      connect: [(service.address() as net.AddressInfo).port, 5432],
      fork: 200,
    };
    const encoded = Buffer.from(JSON.stringify(targets)).toString('base64');
    const submit = `node -e 'fetch(process.env.GRADING_SERVER_URL + "/submit", {method: "POST", headers: {"content-type": "application/json"}, body: JSON.stringify({model_path: "output/crafted"})}).then(async r => console.log("SUBMIT", r.status))'`;
    const script = ['cp -r models/base-model output/crafted', 'chmod -R u+w output/crafted', `echo ${encoded} | base64 -d > output/crafted/targets.json`, submit].join(' && ');

    const r = await a2rl(['run', '--json', '--task', 'gsm8k', '--agent-command', script, '--budget', '60s']);
    expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: expect.any(String) });
    const summary = JSON.parse(r.stdout.trim().split('\n').pop()!) as { runId: string; baseline: number; submissions: number };
    expect(summary).toMatchObject({ baseline: 25, submissions: 1 });

    const events = (await a2rl(['events', summary.runId, '--json'])).stdout.trim().split('\n').map((l) => JSON.parse(l) as Ev);
    const [rejected] = events.filter((e) => e.type === 'SubmissionRejected');
    const message = String(rejected?.data.message);
    expect(message).toMatch(/PROBES got 0 of 12; uid \d+; fork bomb: started \d+, then EAGAIN/);
    expect(message).not.toMatch(/GOT /);
    expect(Number(/uid (\d+)/.exec(message)![1])).toBeGreaterThanOrEqual(160_000);
    expect(Number(/started (\d+), then EAGAIN/.exec(message)![1])).toBeLessThan(64);
    expect(serviceHits).toBe(0);
    expect(events.some((e) => e.type === 'SubmissionGraded')).toBe(false);
    expect(readFileSync(path.join(home, 'datasets', 'gsm8k', 'test.jsonl'), 'utf8')).toBe(readFileSync(path.join(fixtures, 'test.jsonl'), 'utf8'));
    expect((await a2rl(['verify', summary.runId])).code).toBe(0);
  }, 240_000);
});
