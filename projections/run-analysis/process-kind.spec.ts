import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from '@jest/globals';
import Database from 'better-sqlite3';
import { SqliteEventStore } from '../../infra/eventstore/sqlite-event-store.js';
import { openReadModels } from '../../infra/readmodels/data-source.js';
import { canonicalBytes, canonicalJson } from '../../modules/ledger/events/canonical-json.js';
import { EVENT_CATALOG, type A2rlEvent, type EventData, type EventType } from '../../modules/ledger/events/catalog.js';
import { buildEvent } from '../../modules/ledger/events/envelope.js';
import { eventId, streamName } from '../../modules/ledger/events/ids.js';
import { ProjectionCheckpoint } from '../../modules/readmodels/projection-checkpoint.entity.js';
import { ProjectionRunner } from '../../modules/readmodels/projection-runner.js';
import type { RunAnalysis } from './analysis.types.js';
import { classifyProcesses, programKind, type ProcessFacts } from './process-kind.js';
import { RunAnalysisRow } from './run-analysis.entity.js';
import { runAnalysisProjection } from './run-analysis.projection.js';

const kind = (argv: string[], executable?: string) => programKind({ argv, ...(executable ? { executable } : {}) } as ProcessFacts);

describe('programKind: the program and the script it runs decide, never free text', () => {
  it('is not training when train, eval, sft or grpo appear only inside a quoted prompt or command string', () => {
    const prompt = 'Train the model with SFT, then GRPO; eval.py must pass. Run `python train.py`.';
    expect(kind(['claude', '-p', prompt, '--dangerously-skip-permissions'], '/usr/local/bin/claude')).toBe('agent-tool');
    expect(kind(['node', '/usr/local/bin/claude', '-p', prompt], '/usr/bin/node')).toBe('agent-tool');
    expect(kind(['codex', 'exec', '--skip-git-repo-check', prompt])).toBe('agent-tool');
    expect(kind(['gemini', '-p', prompt])).toBe('agent-tool');
    expect(kind(['opencode', 'run', prompt])).toBe('agent-tool');
    expect(kind(['openhands', '--headless', '-t', prompt])).toBe('agent-tool');
    // Claude Code's tool-call wrapper: a command string, classified by what it runs, not by its text.
    expect(kind(['/bin/bash', '-c', '-l', `source /root/.claude/shell-snapshots/snapshot-bash-1.sh && eval 'python train.py --sft' < /dev/null`])).toBe('other');
    expect(kind(['bash', '-lc', 'torchrun code/train.py'])).toBe('other');
    expect(kind(['sh', '-c', 'echo train sft grpo eval'])).toBe('other');
    expect(kind(['python3', '-c', 'print("train sft grpo")'])).toBe('other');
    expect(kind(['python3', 'code/chat.py', '--prompt', 'please train with grpo and eval'])).toBe('other');
    expect(kind(['node', '-e', 'train()', 'sft'])).toBe('other');
    expect(kind(['echo', 'train', 'sft', 'grpo', 'eval'])).toBe('other');
    expect(kind(['ls', '-la', 'constraints.txt', 'training_data/'])).toBe('other');
  });

  it('is training for training scripts run by an interpreter, a shell, a launcher or the trl CLI', () => {
    expect(kind(['python3', 'code/train.py'])).toBe('training');
    expect(kind(['python', '-u', 'train.py', '--lr', '1e-5'])).toBe('training');
    expect(kind(['torchrun', 'code/train.py'])).toBe('training');
    expect(kind(['torchrun', '--nproc_per_node', '8', '--master_port', '29500', 'code/main.py'])).toBe('training');
    expect(kind(['bash', 'code/run_grpo.sh'])).toBe('training');
    expect(kind(['bash', 'code/train.sh'])).toBe('training');
    expect(kind(['sh', '-e', 'scripts/finetune.sh'])).toBe('training');
    expect(kind(['./train.sh'], '/ws/code/train.sh')).toBe('training'); // a #! script: strace's executable
    expect(kind(['python', '-m', 'trl', 'sft', '--model_name_or_path', 'm'])).toBe('training');
    expect(kind(['python', '-m', 'trl.scripts.grpo'])).toBe('training');
    expect(kind(['python3', '-m', 'torch.distributed.run', '--nproc_per_node=2', 'code/sft.py'])).toBe('training');
    expect(kind(['accelerate', 'launch', '--config_file', 'cfg.yaml', 'train.py'])).toBe('training');
    expect(kind(['deepspeed', '--num_gpus', '1', 'code/main.py'])).toBe('training');
    expect(kind(['trl', 'grpo', '--config', 'grpo.yaml'])).toBe('training');
    expect(kind(['node', '/ws/code/train_sft.mjs', '--data', 'd'], '/usr/bin/node')).toBe('training');
    expect(kind(['python', 'code/sft/run.py'])).toBe('training'); // the directory, when the file name says nothing
    expect(kind(['python', 'train_eval.py'])).toBe('training');
    expect(kind(['node', '/ws/code/rl.mjs'])).toBe('training');
  });

  it('recognises evaluation, installs and the agent adapters, and leaves the rest other', () => {
    expect(kind(['python', 'scripts/evaluate.py'])).toBe('evaluation');
    expect(kind(['python3', 'code/eval_sft.py'])).toBe('evaluation');
    expect(kind(['lm_eval', '--model', 'hf', '--tasks', 'gsm8k'])).toBe('evaluation');
    expect(kind(['python', '-m', 'lm_eval', '--tasks', 'x'])).toBe('evaluation');
    expect(kind(['torchrun', '--nproc_per_node', '2', 'code/evaluate.py'])).toBe('evaluation');
    expect(kind(['python', 'code/eval/run.py'])).toBe('evaluation');
    expect(kind(['pip', 'install', 'trl'])).toBe('install');
    expect(kind(['pip3.11', '-q', 'install', '-r', 'requirements.txt'])).toBe('install');
    expect(kind(['python', '-m', 'pip', 'install', 'x'])).toBe('install');
    expect(kind(['uv', 'pip', 'install', 'x'])).toBe('install');
    expect(kind(['uv', 'add', 'x'])).toBe('install');
    expect(kind(['/usr/bin/npm', 'install'])).toBe('install');
    expect(kind(['npm', 'ci'])).toBe('install');
    expect(kind(['pip', 'list'])).toBe('other');
    expect(kind(['npm', 'run', 'train'])).toBe('other'); // what the script runs is recorded on its own
    expect(kind(['uv', 'run', 'train.py'])).toBe('other');
    expect(kind(['bash', '/agent/claude-code/start.sh'])).toBe('agent-tool');
    expect(kind(['node', '/agent/reference/ref-arith/agent.mjs'])).toBe('agent-tool');
    expect(kind(['node', '/usr/lib/node_modules/@anthropic-ai/claude-code/cli.js', '-p', 'x'])).toBe('agent-tool');
    expect(kind(['codex-x86_64-unknown-linux-musl', 'exec', 'x'])).toBe('agent-tool');
    expect(kind(['python', 'code/prepare_data.py'])).toBe('other');
    expect(kind(['accelerate', 'config'])).toBe('other');
    expect(kind(['trl', 'env'])).toBe('other');
    expect(kind([])).toBe('other');
  });

  it('trusts the executable over a disguised argv[0]', () => {
    expect(kind(['train.py'], '/usr/bin/sleep')).toBe('other');
    expect(kind(['bash', 'train.sh'], '/usr/bin/bash')).toBe('training');
  });
});

describe('programKind with exec-time facts: what really ran decides, never the name it was invoked by', () => {
  const SHA = 'a'.repeat(64);
  const file = (path: string) => ({ path, sha256: SHA, size: 1 });
  const facts = (argv: string[], executable: string, exe: string, script?: { path: string; via: 'shebang' | 'argument' }): ProcessFacts =>
    ({ argv, executable, exe: file(exe), ...(script ? { script: { ...file(script.path), via: script.via } } : {}) }) as ProcessFacts;

  it('is other for a link called torchrun (or train.py) that runs sleep', () => {
    expect(programKind(facts(['./torchrun', '1'], '/ws/torchrun', '/usr/bin/sleep'))).toBe('other');
    expect(programKind(facts(['torchrun', 'code/train.py'], '/ws/bin/torchrun', '/usr/bin/sleep'))).toBe('other');
    expect(programKind(facts(['./train.py'], '/ws/code/train.py', '/usr/bin/sleep'))).toBe('other');
    // The same facts without exec-time capture (an older run) kept the name's word.
    expect(kind(['./torchrun', '1'], '/ws/torchrun')).toBe('training');
  });

  it('is other for a binary copied under the name of a tool that only exists as a Python script', () => {
    expect(programKind(facts(['./torchrun', 'code/train.py'], '/ws/torchrun', '/ws/torchrun'))).toBe('other');
    expect(programKind(facts(['trl', 'sft'], '/ws/bin/trl', '/ws/bin/trl'))).toBe('other');
  });

  it('still counts an honest torchrun (a #! Python script) and python -m torch.distributed.run as training', () => {
    const torchrun = { path: '/usr/local/bin/torchrun', via: 'shebang' as const };
    expect(programKind(facts(['torchrun', '--nproc_per_node', '2', 'code/train.py'], '/usr/local/bin/torchrun', '/usr/bin/python3.11', torchrun))).toBe('training');
    expect(programKind(facts(['torchrun', 'code/evaluate.py'], '/usr/local/bin/torchrun', '/usr/bin/python3.11', torchrun))).toBe('evaluation');
    expect(programKind(facts(['python3', '-m', 'torch.distributed.run', 'code/sft.py'], '/usr/bin/python3', '/usr/bin/python3.11'))).toBe('training');
  });

  it('classifies a script by its resolved file, not by the link or name it was started through', () => {
    // `python3 train.py` where train.py is a link to /tmp/idle.py: the file that ran says nothing of training.
    expect(programKind(facts(['python3', 'train.py'], '/usr/bin/python3', '/usr/bin/python3.11', { path: '/tmp/idle.py', via: 'argument' }))).toBe('other');
    expect(programKind(facts(['python3', 'x.py'], '/usr/bin/python3', '/usr/bin/python3.11', { path: '/ws/code/train_grpo.py', via: 'argument' }))).toBe('training');
    // A #! script named train.sh that is really /tmp/x.sh.
    expect(programKind(facts(['./train.sh'], '/ws/train.sh', '/usr/bin/dash', { path: '/tmp/x.sh', via: 'shebang' }))).toBe('other');
    expect(programKind(facts(['./go'], '/ws/go', '/usr/bin/bash', { path: '/ws/code/train.sh', via: 'shebang' }))).toBe('training');
    // A link `python3 -> /usr/bin/bash`: a shell with a script operand.
    expect(programKind(facts(['./python3', 'code/train.py'], '/ws/python3', '/usr/bin/bash', { path: '/ws/code/train.py', via: 'argument' }))).toBe('training');
    expect(programKind(facts(['./python3', '-c', 'x'], '/ws/python3', '/usr/bin/bash'))).toBe('other');
  });

  it('keeps installers, agent CLIs and the agent adapters recognisable through their real files', () => {
    expect(programKind(facts(['npm', 'install'], '/usr/bin/npm', '/usr/bin/node', { path: '/usr/lib/node_modules/npm/bin/npm-cli.js', via: 'shebang' }))).toBe('install');
    expect(programKind(facts(['pip', 'install', 'x'], '/usr/bin/pip', '/usr/bin/python3.11', { path: '/usr/bin/pip', via: 'shebang' }))).toBe('install');
    expect(programKind(facts(['claude', '-p', 'train'], '/usr/local/bin/claude', '/usr/bin/node', { path: '/usr/lib/node_modules/@anthropic-ai/claude-code/cli.js', via: 'shebang' }))).toBe('agent-tool');
    expect(programKind(facts(['/agent/reference/run'], '/agent/reference/run', '/usr/bin/bash', { path: '/agent/reference/run', via: 'shebang' }))).toBe('agent-tool');
    expect(programKind(facts(['uv', 'add', 'x'], '/usr/local/bin/uv', '/usr/local/bin/uv'))).toBe('install');
  });
});

const at = (ms: number) => new Date(Date.UTC(2026, 0, 1, 0, 0, 0, ms)).toISOString();

/** A run's events at the catalog's versions; `procs` are [pid, ppid, argv, exit (no status when undefined), exec time]. */
function run(procs: { pid: number; ppid: number; argv: string[]; exec?: boolean }[]): A2rlEvent[] {
  const events: A2rlEvent[] = [];
  const add = <T extends EventType>(type: T, data: EventData<T>) => events.push(buildEvent(type, 'r', events.length, at(events.length), data));
  add('AgentStarted', { command: 'agent' });
  for (const p of procs) {
    const time = at(events.length);
    add('ProcessStarted', { pid: p.pid, ppid: p.ppid, argv: p.argv, cwd: '/ws', observedAt: time });
    // An exec ends the program without status, at the time of the next program of that pid.
    if (p.exec) add('ProcessExited', { pid: p.pid, durationMs: 1, observedAt: at(events.length + 1) });
  }
  return events;
}

describe('classifyProcesses: kinds in the context of the process tree', () => {
  it('makes the agent CLI’s own helpers agent-tool, and counts one training launch per launch', () => {
    const events = run([
      { pid: 10, ppid: 1, argv: ['bash', '/agent/claude-code/start.sh'] },
      { pid: 11, ppid: 10, argv: ['claude', '-p', 'train a grpo model'] },
      { pid: 12, ppid: 11, argv: ['/bin/bash', '-c', '-l', 'source /root/.claude/shell-snapshots/snapshot-bash-1.sh && eval "bash code/run_grpo.sh"'] },
      { pid: 13, ppid: 12, argv: ['bash', 'code/run_grpo.sh'] },
      { pid: 14, ppid: 13, argv: ['python3', 'code/train.py', '--method', 'grpo'] }, // started by the launch
      { pid: 15, ppid: 14, argv: ['python3', 'code/train.py', '--method', 'grpo'] }, // its DataLoader fork
      { pid: 16, ppid: 11, argv: ['rg', '--files'] }, // a search the CLI runs itself
      { pid: 17, ppid: 12, argv: ['ls', '-la'] }, // a command the wrapper runs
      { pid: 18, ppid: 11, argv: ['/bin/bash', '-c', '-l', 'eval "torchrun code/train.py"'], exec: true },
      { pid: 18, ppid: 11, argv: ['torchrun', 'code/train.py'] }, // the wrapper exec'd it: a launch
      { pid: 19, ppid: 18, argv: ['python', '-u', 'code/train.py'] }, // a torchrun worker
    ]);
    const kinds = classifyProcesses(events);
    const starts = events.filter((e) => e.type === 'ProcessStarted');
    expect(starts.map((e) => kinds.kindOf(e.seq))).toEqual([
      'agent-tool', 'agent-tool', 'agent-tool', 'training', 'training', 'training', 'agent-tool', 'other', 'agent-tool', 'training', 'training',
    ]);
    const launches = starts.filter((e) => kinds.launches.has(e.seq)).map((e) => (e.type === 'ProcessStarted' ? e.data.argv.join(' ') : ''));
    expect(launches).toEqual(['bash code/run_grpo.sh', 'torchrun code/train.py']);
  });

  it('follows a training wrapper through its exec: the program it execs is part of the same launch', () => {
    const events = run([
      { pid: 20, ppid: 1, argv: ['bash', 'code/train.sh'], exec: true },
      { pid: 20, ppid: 1, argv: ['python', 'code/train.py'] },
      { pid: 21, ppid: 1, argv: ['python', 'code/train.py'] }, // a new launch
    ]);
    const kinds = classifyProcesses(events);
    expect([...kinds.launches]).toEqual([1, 4]);
  });
});

describe('rebuilding the run analysis over a ledger written by the previous version', () => {
  let cleanup: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const c of cleanup.reverse()) await c();
    cleanup = [];
  });

  // The bytes an earlier a2rl stored: ProcessStarted/ProcessExited at schema version 1, with the
  // kind the record-time argv classifier gave (it saw "train" in Claude's prompt and wrapper).
  const PROCESSES_V1: [Record<string, unknown>, Record<string, unknown>][] = [
    [{ pid: 11, ppid: 1, argv: ['claude', '-p', 'Train the model with SFT, then GRPO. Evaluate and submit.'], cwd: '/ws/r', kind: 'training' }, { pid: 11, exitCode: 0, durationMs: 9000 }],
    [{ pid: 12, ppid: 11, argv: ['/bin/bash', '-c', '-l', 'source /root/.claude/shell-snapshots/snapshot-bash-1.sh && eval "python3 code/train.py"'], cwd: '/ws/r', kind: 'training' }, { pid: 12, exitCode: 0, durationMs: 4000 }],
    [{ pid: 13, ppid: 12, argv: ['python3', 'code/train.py'], cwd: '/ws/r', kind: 'training' }, { pid: 13, exitCode: 0, durationMs: 3000 }],
    [{ pid: 14, ppid: 11, argv: ['deepspeed', '--num_gpus', '1', 'code/main.py'], cwd: '/ws/r', kind: 'other' }, { pid: 14, exitCode: 0, durationMs: 2000 }],
  ];

  function storedRun(runId: string): { type: string; bytes: Buffer }[] {
    const stored: { type: string; bytes: Buffer }[] = [];
    const current = <T extends EventType>(type: T, data: EventData<T>) => stored.push({ type, bytes: canonicalBytes(buildEvent(type, runId, stored.length, at(stored.length * 1000), data)) });
    const v1 = (type: 'ProcessStarted' | 'ProcessExited', data: Record<string, unknown>) => {
      const seq = stored.length;
      stored.push({ type, bytes: canonicalBytes({ type, runId, seq, id: eventId(runId, seq), occurredAt: at(seq * 1000), schemaVersion: 1, data }) });
    };
    current('RunScheduled', { task: 'ref-x', agent: 'claude-code', baseModel: 'tiny', budgetSeconds: 60, seed: 0, mode: 'free' });
    current('AgentStarted', { command: 'claude-code' });
    for (const [start] of PROCESSES_V1) v1('ProcessStarted', start);
    for (const [, exit] of PROCESSES_V1.slice().reverse()) v1('ProcessExited', exit);
    current('SubmissionReceived', { submissionId: 's0', modelPath: 'output/s0', manifest: [{ path: 'w.json', sha256: 'a'.repeat(64), size: 1 }] });
    current('SubmissionGraded', { submissionId: 's0', score: 20, improvement: 10 });
    current('AgentExited', { reason: 'completed', exitCode: 0 });
    current('RunCompleted', { submissions: 1 });
    return stored;
  }

  it('reclassifies the processes: upcasting drops the stored kind and the new rules apply', async () => {
    expect(EVENT_CATALOG.ProcessStarted.version).toBeGreaterThan(1);
    const dir = await mkdtemp(path.join(os.tmpdir(), 'a2rl-kind-rebuild-'));
    const ledgerFile = path.join(dir, 'ledger.db');
    await (await SqliteEventStore.open(ledgerFile)).close(); // the schema
    const raw = new Database(ledgerFile);
    const insert = raw.prepare('INSERT INTO events (stream, revision, id, type, data) VALUES (?, ?, ?, ?, ?)');
    storedRun('r').forEach(({ type, bytes }, seq) => insert.run(streamName('r'), seq, eventId('r', seq), type, bytes));
    raw.close();
    const store = await SqliteEventStore.open(ledgerFile);
    const dataSource = await openReadModels(`sqlite://${path.join(dir, 'readmodels.db')}`);
    cleanup.push(async () => {
      await dataSource.destroy();
      await store.close();
      await rm(dir, { recursive: true, force: true });
    });
    const blobs = { read: async () => null };

    // The read model as the previous version left it: its analysis counted the stored kinds.
    const storedKinds = PROCESSES_V1.map(([start]) => start.kind);
    const previous = {
      ...runAnalysisProjection,
      version: runAnalysisProjection.version - 1,
      async analyze(events: A2rlEvent[]) {
        const row = await runAnalysisProjection.analyze(events, blobs);
        const a = JSON.parse(row.analysis) as RunAnalysis;
        a.metrics.training_launches = storedKinds.filter((k) => k === 'training').length;
        a.submissions[0].processes.forEach((p, i) => (p.kind = String(storedKinds[i])));
        return { ...row, analysis: canonicalJson(a) };
      },
    };
    await new ProjectionRunner(store, dataSource, [previous], { blobs }).catchUp();
    const analysis = async () => JSON.parse((await dataSource.getRepository(RunAnalysisRow).findOneByOrFail({ runId: 'r' })).analysis) as RunAnalysis;
    expect((await analysis()).metrics.training_launches).toBe(3);

    // This version: a changed projection version rebuilds from zero over the same stored bytes.
    const runner = new ProjectionRunner(store, dataSource, [runAnalysisProjection], { blobs });
    expect(await runner.catchUp()).toEqual([{ name: 'run-analysis', processed: 14 }]);
    expect(await dataSource.getRepository(ProjectionCheckpoint).findOneByOrFail({ name: 'run-analysis' })).toMatchObject({ version: runAnalysisProjection.version });
    const rebuilt = await analysis();
    expect(rebuilt.submissions[0].processes.map((p) => [p.argv[0], p.kind])).toEqual([
      ['claude', 'agent-tool'],
      ['/bin/bash', 'agent-tool'],
      ['python3', 'training'],
      ['deepspeed', 'training'],
    ]);
    expect(rebuilt.metrics.training_launches).toBe(2);
    expect(rebuilt.metrics.total_training_time).toBe(5);

    // The stored events are untouched: still version 1, still carrying the old kind.
    const stored = new Database(ledgerFile, { readonly: true });
    const first = JSON.parse(String((stored.prepare('SELECT data FROM events WHERE revision = 2').get() as { data: Buffer }).data)) as { schemaVersion: number; data: { kind: string } };
    stored.close();
    expect(first).toMatchObject({ schemaVersion: 1, data: { kind: 'training' } });
  });
});

describe('classifyProcesses on a long run', () => {
  it('gives every process the kind of its own facts, for programs seen again and past the programs it remembers', () => {
    // 6,000 programs (more than it remembers): each command line once with exec-time facts (the image
    // really run was python: `accelerate` is then not the launcher) and once without, each started twice.
    const programs: ProcessFacts[] = Array.from({ length: 6000 }, (_, i) => {
      const j = i >> 1;
      const argv = [['python', `code/train_${j}.py`], ['python', '-m', `tools.eval_${j}`], ['accelerate', 'launch', `run${j}.py`], ['bash', '-c', `echo ${j}`]][j % 4];
      return i % 2 === 0 ? ({ argv, exe: { path: '/usr/bin/python3.11', sha256: 'a'.repeat(64), size: 1 } } as ProcessFacts) : { argv };
    });
    const started = [...programs, ...programs].map((facts, i) => buildEvent('ProcessStarted', 'r-kinds', i, '2026-01-01T00:00:00.000Z', { pid: 10_000 + i, ppid: 1, cwd: '/ws', observedAt: '2026-01-01T00:00:00.000Z', ...facts } as EventData<'ProcessStarted'>));
    const kinds = classifyProcesses(started);
    expect(started.map((e) => kinds.kindOf(e.seq))).toEqual(started.map((e) => programKind(e.data as ProcessFacts)));
    expect(new Set(started.map((e) => kinds.kindOf(e.seq)))).toEqual(new Set(['training', 'evaluation', 'other']));
  });
});
