import { describe, expect, it } from '@jest/globals';
import { plainToInstance } from 'class-transformer';
import { validateSync } from 'class-validator';
import { EVENT_CATALOG, EVENT_TYPES, type EventType } from './catalog.js';
import { InvalidEventError, validatePayload } from './envelope.js';
import { payloadCheck } from './payload-check.js';

const T = '2026-01-01T00:00:01.000Z';
const SHA = 'a'.repeat(64);
const BLOB = { sha256: SHA, size: 3, key: `sha256/aa/${SHA}` };

// One payload per event type, with its optional and nested fields present, so every decorator is exercised.
const FIXTURES: Record<EventType, object> = {
  RunScheduled: { task: 't', agent: 'reference', driver: 'd', baseModel: 'm', budgetSeconds: 60, seed: 0, mode: 'free', campaign: { id: 'c-1', cell: 0, attempt: 1 } },
  WorkspacePrepared: {
    workspace: '/w', sandbox: 'bwrap', mounts: [{ path: '/w/data', access: 'ro' }], dataManifest: [{ path: 'data/a', sha256: SHA, size: 1 }],
    isolation: { mode: 'userns', uid: 1000, network: 'bridged', allowNet: ['pypi.org'], limits: { memoryBytes: 5, pids: null }, memoryEnforced: true },
  },
  WorkspaceIntegrityChecked: { phase: 'end', submissionId: 's', ok: false, full: true, checked: 2, differences: [{ path: 'data/a', expected: SHA, actual: null, found: 'symlink' }], moreDifferences: 1, observedAt: T },
  BaselineEvaluated: { score: 10, cached: false, evaluatorVersion: '1' },
  AgentStarted: { command: 'run.sh', pid: 42, gateway: { providers: ['anthropic'], url: 'http://127.0.0.1:1' } },
  FileChanged: { path: 'code/train.py', op: 'modify', sha256: SHA, size: 3, previousSha256: SHA, key: BLOB.key, observedAt: T },
  ProcessStarted: {
    pid: 43, ppid: 42, argv: ['python3', 'code/train.py'], cwd: '/w', executable: '/usr/bin/python3',
    exe: { path: '/usr/bin/python3.11', sha256: SHA, size: 9, note: 'system file: hashed, not kept' },
    script: { path: '/w/code/train.py', sha256: SHA, size: 3, key: BLOB.key, deleted: true, via: 'argument' }, capture: 'at-exec', observedAt: T,
  },
  ProcessExited: { pid: 43, exitCode: 0, signal: 'SIGKILL', durationMs: 5, cpuMs: 1.5, peakRssKb: 100, observedAt: T },
  AgentOutput: { stream: 'stdout', chunk: BLOB, observedAt: T },
  RolloutBatchRecorded: { env: 'e', episodes: 1, steps: 2, successRate: 1, meanReturn: -1.5, trajectories: BLOB, observedAt: T },
  ObservationGap: { observer: 'files', reason: 'buffer full', count: 3, observedAt: T },
  TransientFileRecorded: { path: 'code/x.sh', sha256: SHA, size: 3, key: BLOB.key, note: 'n', observedAt: T },
  SubmissionReceived: { submissionId: 's', modelPath: 'output/ck', manifest: [{ path: 'w.bin', sha256: SHA, size: 9 }], checkpoint: BLOB },
  SubmissionGraded: { submissionId: 's', score: 40, improvement: 30, details: { duplicateOf: 'x' } },
  GradingRepeated: { subject: 'submission', submissionId: 's', series: 'g-1', repeat: 1, of: 3, score: 40, evaluatorVersion: '1', details: { x: 1 } },
  SubmissionRejected: { submissionId: 's', reasonClass: 'invalid_path', message: 'no such dir' },
  AgentExited: { exitCode: 137, signal: 'SIGKILL', reason: 'killed', observedAt: T, stoppedBy: 'operator' },
  SecretRedacted: { where: 'blob', eventType: 'ProcessStarted', field: 'argv[2]', blob: 'file', path: 'code/x', kind: 'run-token', count: 1, observedAt: T },
  RunCompleted: { best: 40, submissions: 1 },
  RunInterrupted: { reason: 'set-up failed', cause: 'setup_failed' },
  RunResumed: { note: 'again' },
  TreeHeadSigned: { treeSize: 3, rootHash: SHA, signature: 'sig', keyId: 'k' },
  EgressConnection: { host: 'pypi.org', port: 443, method: 'CONNECT', allowed: true, reason: 'x', address: '1.2.3.4', bytesOut: 1, bytesIn: 2, observedAt: T, closedAt: T },
  LimitReached: { limit: 'diskBytes', value: 5, max: 4, scope: 'code/', action: 'stopped the agent', observedAt: T },
  LlmCallRecorded: {
    callId: 'llm-1', provider: 'anthropic', api: 'messages', modelRequested: 'claude-x', modelAnswered: null, stream: true, status: 200, outcome: 'ok', error: 'e',
    stopReason: 'end_turn', usage: { inputTokens: 10, outputTokens: 2, cacheReadTokens: null, cacheWriteTokens: 0 }, costUsd: 0.5, priceTable: 'test',
    latencyMs: 5, ttftMs: null, messages: 1, userText: 'u', toolResults: [{ id: 'i', name: 'n', output: 'o', isError: false }], outputText: 'hi',
    toolCalls: [{ id: 'i', name: 'n', input: '{}' }], request: BLOB, response: BLOB, startedAt: T, observedAt: T,
  },
  AgentHomeArchived: { files: [{ path: '.config/x', sha256: SHA, size: 1 }], skipped: 0, skippedReason: 'r', observedAt: T },
  CampaignScheduled: {
    matrix: { tasks: ['t'], agents: ['reference'], drivers: [], seeds: 1 }, cells: [{ cell: 0, task: 't', agent: 'reference', driver: 'd', seed: 0, gpus: 0 }],
    budgetSeconds: 60, retries: 1, queue: 'local', concurrency: 2, regradeBaseline: true,
  },
  RunRequested: { cell: 0, attempt: 1 },
  RunAssigned: { cell: 0, attempt: 1, runId: 'r-1', worker: { id: 'h-1-abcd', host: 'h', pid: 1, gpus: ['0'] }, gpus: ['0'] },
  RunFinished: { cell: 0, attempt: 1, runId: 'r-1', outcome: 'completed', best: 40, baseline: 10, reason: 'r' },
  RunRetried: { cell: 0, attempt: 2, reason: 'worker lost', handedBack: true },
  CampaignCompleted: { completed: 1, failed: 0 },
  CampaignCancelled: { reason: 'operator' },
  TokenCreated: { tokenId: 'abcd1234', name: 'ci', role: 'viewer', sha256: SHA, expiresAt: null },
  TokenRevoked: { tokenId: 'abcd1234' },
  AccessRecorded: { actor: { kind: 'token', id: 'abcd1234', name: 'ci', role: 'operator' }, action: 'export', target: { runId: 'r-1' }, outcome: 'ok', verified: true, detail: 'd' },
};

/** Values a field is replaced with: wrong types, edge numbers, lengths, shapes. */
const ODD: unknown[] = [
  undefined, null, '', 'x', 'x'.repeat(5000), '\u{1F600}'.repeat(150), 0, -1, 1.5, 1e300, Number.MAX_SAFE_INTEGER + 2, NaN, Infinity, -Infinity, true, false,
  [], ['x'], [1], [null], [{}], [[]], {}, { x: 1 }, SHA, 'A'.repeat(64), T, '2026-01-01T00:00:01Z', 'free', 'ok', 'token', new Date(0), BLOB, [BLOB],
];

/** class-validator's verdict, exactly as validatePayload asked it before the compiled check. */
function classValidatorAccepts(type: EventType, data: unknown): boolean {
  if (typeof data !== 'object' || data === null || Array.isArray(data)) return false;
  const instance = plainToInstance(EVENT_CATALOG[type].payload as new () => object, data);
  return validateSync(instance, { whitelist: true, forbidNonWhitelisted: true, forbidUnknownValues: true }).length === 0;
}

type Path = Array<string | number>;

/** A deep copy of arrays and plain objects made in this realm (structuredClone's objects have another realm's prototype under jest). */
function clone<T>(value: T): T {
  if (Array.isArray(value)) return value.map(clone) as T;
  if (typeof value === 'object' && value !== null && Object.getPrototypeOf(value) === Object.prototype) {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, clone(v)])) as T;
  }
  return value;
}

const isContainer = (value: unknown): value is object =>
  Array.isArray(value) || (typeof value === 'object' && value !== null && Object.getPrototypeOf(value) === Object.prototype);

/** Every path to a value inside `value` (objects' keys and arrays' items), the root excluded. */
function paths(value: unknown, prefix: Path = []): Path[] {
  if (!isContainer(value)) return [];
  const out: Path[] = [];
  for (const [k, v] of Object.entries(value).filter(([k]) => k !== '__proto__')) {
    const p = [...prefix, Array.isArray(value) ? Number(k) : k];
    out.push(p, ...paths(v, p));
  }
  return out;
}

/** Containers (the root and every nested object or array). */
function containers(value: unknown, prefix: Path = []): Path[] {
  if (!isContainer(value)) return [];
  return [prefix, ...Object.entries(value).filter(([k]) => k !== '__proto__').flatMap(([k, v]) => containers(v, [...prefix, Array.isArray(value) ? Number(k) : k]))];
}

function withChange(root: object, path: Path, change: (parent: Record<string | number, unknown>, key: string | number) => void): object {
  const copy = clone(root) as Record<string | number, unknown>;
  let parent = copy;
  for (const k of path.slice(0, -1)) parent = parent[k] as Record<string | number, unknown>;
  change(parent, path[path.length - 1]);
  return copy;
}

/** Mutants of a payload: each field deleted, replaced by every ODD value, and an unknown key in every object. */
function mutants(data: object): object[] {
  const out: object[] = [];
  for (const p of paths(data)) {
    out.push(deleted(data, p));
    for (const odd of ODD) out.push(replaced(data, p, odd));
  }
  for (const c of containers(data)) out.push(extended(data, c));
  out.push(JSON.parse(JSON.stringify(data).replace(/^\{/, '{"__proto__":{"x":1}').replace(/^(\{"__proto__":\{"x":1\})(?!\})/, '$1,')) as object);
  return out;
}

const deleted = (data: object, p: Path) => withChange(data, p, (parent, key) => (Array.isArray(parent) ? parent.splice(Number(key), 1) : delete parent[key]));
const replaced = (data: object, p: Path, odd: unknown) => withChange(data, p, (parent, key) => (parent[key] = clone(odd)));

/** An unknown key added to the object at `c`, or two more items (a copy of the first, and {}) to the array there. */
function extended(data: object, c: Path): object {
  const extra = clone(data);
  const at = c.reduce<Record<string | number, unknown>>((o, k) => o[k] as Record<string | number, unknown>, extra as Record<string | number, unknown>);
  if (Array.isArray(at)) at.push(clone(at[0] ?? 'x'), {});
  else at.unexpected = 1;
  return extra;
}

/** One mutation of `data` chosen by `next`. */
function randomMutant(data: object, next: () => number): object {
  const pick = <T>(list: T[]) => list[Math.floor(next() * list.length)];
  const ps = paths(data);
  const r = next();
  if (!ps.length || r < 0.1) return extended(data, pick(containers(data)));
  if (r < 0.25) return deleted(data, pick(ps));
  return replaced(data, pick(ps), pick(ODD));
}

/** A small deterministic generator (mulberry32): combined mutations, reproducible. */
function random(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

describe('the compiled payload check', () => {
  it('has a fixture for every event type, each valid, and the compiled check accepts it', () => {
    expect(Object.keys(FIXTURES).sort()).toEqual([...EVENT_TYPES].sort());
    for (const type of EVENT_TYPES) {
      expect([type, classValidatorAccepts(type, FIXTURES[type])]).toEqual([type, true]);
      expect([type, payloadCheck(EVENT_CATALOG[type].payload)?.(FIXTURES[type])]).toEqual([type, true]);
    }
  });

  it('never accepts a payload class-validator refuses (every field deleted or replaced, unknown keys, combined mutations)', () => {
    const next = random(16);
    let refused = 0;
    for (const type of EVENT_TYPES) {
      const check = payloadCheck(EVENT_CATALOG[type].payload)!;
      const single = mutants(FIXTURES[type]);
      const combined = Array.from({ length: 200 }, () => {
        let m = FIXTURES[type];
        for (let i = 0; i < 3; i++) m = randomMutant(m, next);
        return m;
      });
      for (const data of [...single, ...combined]) {
        const cv = classValidatorAccepts(type, data);
        if (!cv) refused += 1;
        // The compiled check may send a valid payload on to class-validator; it must never pass an invalid one.
        if (check(data)) expect({ type, data, classValidator: cv }).toEqual({ type, data, classValidator: true });
      }
    }
    expect(refused).toBeGreaterThan(1000); // the fuzz reached class-validator's refusals, not only valid payloads
  });

  it('agrees with class-validator on the plain JSON payloads stored events carry', () => {
    let agreed = 0;
    let total = 0;
    for (const type of EVENT_TYPES) {
      const check = payloadCheck(EVENT_CATALOG[type].payload)!;
      for (const m of mutants(FIXTURES[type])) {
        const data = JSON.parse(JSON.stringify(m) ?? 'null') as object;
        if (typeof data !== 'object' || data === null) continue;
        total += 1;
        if (check(data) === classValidatorAccepts(type, data)) agreed += 1;
      }
    }
    // Not required for correctness (a "no" only costs the slow path), but the fast path must be the common one.
    expect(agreed / total).toBeGreaterThan(0.97);
  });

  it('leaves refusals and their messages to class-validator', () => {
    const bad = { ...FIXTURES.AgentOutput, chunk: { ...BLOB, size: -1 }, extra: 1 } as unknown;
    expect(() => validatePayload('AgentOutput', bad)).toThrow(InvalidEventError);
    expect(() => validatePayload('AgentOutput', bad)).toThrow(/data\.chunk\.size: size must not be less than 0.*property extra should not exist|property extra should not exist.*data\.chunk\.size/);
    expect(validatePayload('AgentOutput', FIXTURES.AgentOutput)).toBe(FIXTURES.AgentOutput);
  });
});
