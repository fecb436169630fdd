import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from '@jest/globals';
import { agentPython } from '../../modules/sandbox/agent-python.js';
import { runA2rl } from './a2rl-cli.js';

// `a2rl data micro gsm8k`: made twice from one seed into two A2RL_HOMEs, byte for byte the same; the
// pack's split reads the rows; transformers loads the tiny checkpoint offline and generates greedily;
// `a2rl data fetch` keeps micro assets unless --force; assets made once are copied from the machine cache. Needs torch and transformers: the agents' Python
// (`a2rl agents python install`, run by npm test's pretest) or A2RL_AGENT_PYTHON; skipped without them.

const exec = promisify(execFile);
const prefix = (() => {
  try {
    return agentPython(process.env, 'gsm8k')?.prefix ?? null;
  } catch {
    return null;
  }
})();
const python = prefix ? path.join(prefix, 'bin', 'python') : null;
const describeReady = python ? describe : describe.skip;
const why = python ? '' : " (skipped: needs the agents' Python with torch and transformers — `a2rl agents python install`)";

interface MicroJson {
  dir: string;
  present: boolean;
  cached: boolean;
  files: { name: string; size: number; sha256: string }[];
  summary: { rows: Record<string, number>; model: { parameters: number }; seconds: number } | null;
}

const homes: string[] = [];
const newHome = () => {
  const home = mkdtempSync(path.join(os.tmpdir(), 'a2rl-micro-'));
  homes.push(home);
  return home;
};
// A machine cache of this spec's own: what npm test's pretest left in the real one is not seen here (the
// agents' Python, which lives in the real one, is named directly).
const cache = mkdtempSync(path.join(os.tmpdir(), 'a2rl-micro-cache-'));
homes.push(cache);
const env = (home: string) => ({ ...process.env, A2RL_HOME: home, A2RL_CACHE: cache, ...(prefix ? { A2RL_AGENT_PYTHON: prefix } : {}) });
const sha256 = (file: string) => createHash('sha256').update(readFileSync(file)).digest('hex');

async function micro(home: string, ...extra: string[]): Promise<MicroJson> {
  const r = await runA2rl(['data', 'micro', 'gsm8k', '--seed', '1', '--json', ...extra], { env: env(home) });
  expect(r.stderr).toBe('');
  expect(r.code).toBe(0);
  return JSON.parse(r.stdout.trim().split('\n').pop()!) as MicroJson;
}

describeReady(`a2rl data micro gsm8k${why}`, () => {
  const first = newHome();
  const second = newHome();
  let made: MicroJson;

  afterAll(() => {
    for (const home of homes) rmSync(home, { recursive: true, force: true });
  });

  it('makes the same bytes from the same seed, listed with their hashes in a micro manifest', async () => {
    // Both at once: two processes, one torch thread each; the second leaves its assets in the machine cache.
    const [one, two] = await Promise.all([micro(first, '--no-cache'), micro(second)]);
    made = one;
    const again = two;
    expect(made.present).toBe(false);
    expect([made.cached, again.cached]).toEqual([false, false]);
    expect(readdirSync(path.join(cache, 'micro'))).toHaveLength(1);
    expect(again.files).toEqual(made.files);
    const names = made.files.map((f) => f.name);
    expect(names).toEqual(expect.arrayContaining(['train.jsonl', 'test.jsonl', 'base-model/config.json', 'base-model/model.safetensors', 'base-model/tokenizer.json', 'base-model/tokenizer_config.json', 'base-model/generation_config.json']));
    const manifest = JSON.parse(readFileSync(path.join(made.dir, 'manifest.json'), 'utf8')) as { micro: boolean; seed: number; files: { name: string; sha256: string; check: string }[] };
    expect(manifest).toMatchObject({ micro: true, seed: 1 });
    for (const f of manifest.files) expect(sha256(path.join(made.dir, f.name))).toBe(f.sha256);
    expect(manifest.files.every((f) => f.check === 'generated')).toBe(true);
    expect(readFileSync(path.join(made.dir, 'manifest.json'))).toEqual(readFileSync(path.join(again.dir, 'manifest.json')));
  }, 2_400_000);

  it('copies the assets made once from the machine cache into another home, byte for byte, without generating', async () => {
    const third = newHome();
    const copied = await micro(third);
    expect(copied).toMatchObject({ present: false, cached: true });
    expect(copied.files).toEqual(made.files);
    expect(copied.summary).toMatchObject({ cached: true, rows: made.summary!.rows });
    expect(readFileSync(path.join(copied.dir, 'manifest.json'))).toEqual(readFileSync(path.join(made.dir, 'manifest.json')));
    for (const f of copied.files) expect(sha256(path.join(copied.dir, f.name))).toBe(f.sha256);
  }, 120_000);

  it('installs idempotently: a second run finds the assets present and verified', async () => {
    const again = await micro(first);
    expect(again.present).toBe(true);
    expect(again.files).toEqual(made.files);
  }, 120_000);

  it('has the row counts the protocol declares for micro data, read through the pack\'s split', async () => {
    const protocol = JSON.parse(readFileSync('tasks/gsm8k/protocol.json', 'utf8')) as { split: { micro: { expectedRows: Record<string, number> } } };
    const r = await runA2rl(['data', 'split', 'gsm8k', '--json'], { env: env(first) });
    expect(r.code).toBe(0);
    const split = JSON.parse(r.stdout) as { visible: number[]; private: number[]; rowCounts: string };
    expect(split.rowCounts).toBe('fetched');
    expect(split.visible).toHaveLength(protocol.split.micro.expectedRows['train.jsonl']);
    expect(split.private).toHaveLength(protocol.split.micro.expectedRows['test.jsonl']);
    const rows = readFileSync(path.join(made.dir, 'test.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as Record<string, string>);
    for (const row of rows) {
      expect(Object.keys(row)).toEqual(['question', 'answer']);
      expect(row.answer).toMatch(/\n#### \d+$/);
    }
  }, 120_000);

  it('is a Hugging Face checkpoint transformers loads offline and runs greedily through its chat template', async () => {
    const script = [
      'import sys, json',
      'from transformers import AutoModelForCausalLM, AutoTokenizer',
      'd = sys.argv[1]',
      'm = AutoModelForCausalLM.from_pretrained(d); t = AutoTokenizer.from_pretrained(d)',
      'ids = t.apply_chat_template([{"role": "user", "content": "Question: Ava has 3 apples. Ava gets 4 more apples. How many apples does Ava have now?\\nLet\'s think step by step\\nAnswer:"}], add_generation_prompt=True, return_tensors="pt", return_dict=True)',
      'out = [m.generate(**ids, max_new_tokens=40, do_sample=False) for _ in range(2)]',
      'print(json.dumps({"model": type(m).__name__, "same": out[0].tolist() == out[1].tolist(), "new": int(out[0].shape[1] - ids["input_ids"].shape[1]), "text": t.decode(out[0][0, ids["input_ids"].shape[1]:], skip_special_tokens=True)}))',
    ].join('\n');
    const { stdout } = await exec(python!, ['-c', script, path.join(made.dir, 'base-model')], { env: { ...process.env, HF_HUB_OFFLINE: '1', TRANSFORMERS_OFFLINE: '1' }, maxBuffer: 16 << 20 });
    const result = JSON.parse(stdout.trim().split('\n').pop()!) as { model: string; same: boolean; new: number; text: string };
    expect(result.model).toBe('LlamaForCausalLM');
    expect(result.same).toBe(true);
    expect(result.new).toBeGreaterThan(0);
    expect(result.text.trim()).not.toBe('');
  }, 300_000);

  it('is kept by `a2rl data fetch` without --force, and replaced with it', async () => {
    // Files to import "air-gapped": the other home's rows stand in for the real dataset.
    const from = path.join(second, 'datasets', 'gsm8k');
    const refused = await runA2rl(['data', 'fetch', 'gsm8k', '--from', from], { env: env(first) });
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toMatch(/micro assets .*--force/);
    expect(sha256(path.join(made.dir, 'manifest.json'))).toBe(sha256(path.join(from, 'manifest.json')));

    const replaced = await runA2rl(['data', 'fetch', 'gsm8k', '--from', from, '--force', '--json'], { env: env(first) });
    expect(replaced.code).toBe(0);
    const manifest = JSON.parse(readFileSync(path.join(made.dir, 'manifest.json'), 'utf8')) as { micro?: boolean; files: { name: string; check: string }[] };
    expect(manifest.micro).toBeUndefined();
    expect(manifest.files.map((f) => [f.name, f.check])).toEqual([['train.jsonl', 'recorded'], ['test.jsonl', 'recorded']]);
    // No micro file is left behind: the base model is the operator's to install.
    expect(() => readFileSync(path.join(made.dir, 'base-model', 'config.json'))).toThrow();
    const micro = await runA2rl(['data', 'micro', 'gsm8k'], { env: env(first) });
    expect(micro.code).not.toBe(0);
    expect(micro.stderr).toMatch(/fetched gsm8k dataset.*--force/);
  }, 120_000);
});
