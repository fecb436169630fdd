import 'reflect-metadata';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { gunzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Controller, Get, type INestApplication, ValidationPipe } from '@nestjs/common';
import { APP_GUARD } from '@nestjs/core';
import { Test } from '@nestjs/testing';
import { MemoryArtifactStore } from '../../infra/artifacts/memory-artifact-store.js';
import { MemoryEventStore } from '../../infra/eventstore/memory-event-store.js';
import { SignedRunWriter } from '../audit/bundle/testing/signed-run.js';
import { initSigningKey } from '../ledger/tree-head.js';
import { ARTIFACT_STORE } from '../artifacts/artifacts.module.js';
import { CampaignService } from '../campaigns/campaign.service.js';
import { RegradeService } from '../grading/regrade.service.js';
import type { A2rlEvent } from '../ledger/events/catalog.js';
import { accessStreamName } from '../ledger/events/ids.js';
import { CLOCK, EVENT_STORE } from '../ledger/tokens.js';
import { RUN_LOCKS, type RunLock } from '../ledger/run-locks.port.js';
import { SETTINGS, type Settings } from '../settings/settings.port.js';
import { AccessControl } from './access-control.js';
import { AccessLedger } from './access-ledger.js';
import { AccessController } from './access.controller.js';
import { Public } from './access.decorators.js';
import { AccessGuard } from './access.guard.js';
import { authSettings } from './auth-settings.js';
import { HARNESS_SIGNALS, RunActionsController, TASK_LEVELS } from '../run-actions/run-actions.controller.js';

// The guard matrix over HTTP on loopback: "required" comes from the settings (A2RL_AUTH=required),
// so no bind beyond loopback is needed. The clock is fixed and moved by the tests (expiry, the
// one-per-minute refusal records).

@Controller()
class FakeReadController {
  @Get('runs')
  runs() {
    return { total: 1, limit: 50, offset: 0, items: [{ runId: 'secret-run' }] };
  }

  @Get('g/:token/time')
  @Public()
  gradingTime() {
    return { remaining: 5 };
  }
}

const SEALED = 'ref-arith-20260301000000-aaaaaa';
const OPEN = 'ref-arith-20260301000000-bbbbbb';
const PROXY_SECRET = 'p'.repeat(24);

interface Server {
  app: INestApplication;
  base: string;
  store: MemoryEventStore;
  ledger: AccessLedger;
  signals: Array<[number, string]>;
  locks: RunLock[];
  now: { t: number };
}

async function start(env: NodeJS.ProcessEnv, home: string, regrades?: object): Promise<Server> {
  const store = new MemoryEventStore();
  const now = { t: Date.parse('2026-03-01T00:00:00.000Z') };
  const signals: Array<[number, string]> = [];
  const locks: RunLock[] = [];
  const settings: Settings = {
    home, ledgerUrl: 'memory:', artifactsUrl: 'file:///x', readModelUrl: 'sqlite:///x', workspacesDir: home, httpPort: 0, httpHost: '127.0.0.1',
    auth: authSettings(env, '127.0.0.1'),
  };
  const campaigns = {
    get: async (id: string) => {
      if (id !== 'camp-1') throw new Error(`unknown campaign "${id}"`);
      return { campaignId: id, status: 'running' };
    },
    cancel: async (id: string) => ({ campaignId: id, status: 'cancelled' }),
  };
  const moduleRef = await Test.createTestingModule({
    controllers: [FakeReadController, AccessController, RunActionsController],
    providers: [
      AccessLedger, AccessControl,
      { provide: APP_GUARD, useClass: AccessGuard },
      { provide: EVENT_STORE, useValue: store },
      { provide: ARTIFACT_STORE, useValue: new MemoryArtifactStore() },
      { provide: CLOCK, useValue: () => new Date(now.t) },
      { provide: SETTINGS, useValue: settings },
      { provide: RUN_LOCKS, useValue: { list: () => locks, write: () => undefined, remove: () => undefined, pidFile: () => '' } },
      { provide: HARNESS_SIGNALS, useValue: { alive: () => true, signal: (pid: number, s: string) => signals.push([pid, s]), self: 1 } },
      { provide: CampaignService, useValue: campaigns },
      { provide: TASK_LEVELS, useValue: async () => () => 1 },
      ...(regrades ? [{ provide: RegradeService, useValue: regrades }] : []),
    ],
  }).compile();
  const app = moduleRef.createNestApplication({ logger: false });
  app.useGlobalPipes(new ValidationPipe({ whitelist: true, forbidNonWhitelisted: true, transform: true }));
  await app.listen(0, '127.0.0.1');
  const base = `http://127.0.0.1:${(app.getHttpServer().address() as { port: number }).port}`;
  return { app, base, store, ledger: app.get(AccessLedger), signals, locks, now };
}

/** A sealed, signed run and an open one, as a harness writes them. */
async function writeRuns(store: MemoryEventStore, home: string): Promise<void> {
  const key = initSigningKey(home);
  for (const runId of [SEALED, OPEN]) {
    const w = new SignedRunWriter(store, runId, key, { headEvery: 3 });
    await w.add('RunScheduled', { task: 'ref-arith', agent: 'reference', baseModel: 'tiny-base', budgetSeconds: 60, seed: 0, mode: 'free' });
    await w.add('WorkspacePrepared', { workspace: '/tmp/ws', sandbox: 'none', mounts: [], dataManifest: [] });
    await w.add('BaselineEvaluated', { score: 10, cached: false });
    await w.add('AgentStarted', { command: 'bash start.sh' });
    if (runId === SEALED) {
      await w.add('AgentExited', { exitCode: 0, reason: 'completed' });
      await w.add('RunCompleted', { best: 10, submissions: 0 });
    }
    await w.seal();
  }
}

async function call(s: Server, method: string, p: string, opts: { token?: string; headers?: Record<string, string>; body?: unknown; raw?: string } = {}) {
  const headers: Record<string, string> = { ...(opts.token ? { authorization: `Bearer ${opts.token}` } : {}), ...(opts.body ? { 'content-type': 'application/json' } : {}), ...opts.headers };
  const res = await fetch(`${s.base}${p}`, { method, headers, body: opts.raw ?? (opts.body ? JSON.stringify(opts.body) : undefined) });
  const bytes = Buffer.from(await res.arrayBuffer());
  return { status: res.status, headers: res.headers, bytes, text: bytes.toString('utf8') };
}

async function records(s: Server): Promise<Array<Extract<A2rlEvent, { type: 'AccessRecorded' }>['data']>> {
  const out = [];
  for await (const r of s.store.readStream(accessStreamName())) if (r.event.type === 'AccessRecorded') out.push(r.event.data);
  return out;
}

const minutes = (s: Server, n: number) => (s.now.t += n * 60_000);

let home: string;
let req: Server;
let open: Server;
let viewer: string;
let operator: string;

beforeAll(async () => {
  home = mkdtempSync(path.join(os.tmpdir(), 'a2rl-access-'));
  req = await start({ A2RL_AUTH: 'required', A2RL_AUTH_PROXY_HEADER: 'x-forwarded-user', A2RL_AUTH_PROXY_ROLES: 'alice=operator,*=viewer', A2RL_AUTH_PROXY_SECRET: PROXY_SECRET }, path.join(home, 'required'), {
    regrade: async (runId: string, opts: { repeat: number }) => ({ runId, repeat: opts.repeat }),
  });
  open = await start({}, path.join(home, 'loopback'));
  await writeRuns(req.store, path.join(home, 'required'));
  viewer = (await req.ledger.createToken({ role: 'viewer', name: 'reader', expiresAt: null })).secret;
  operator = (await req.ledger.createToken({ role: 'operator', name: 'ops', expiresAt: null })).secret;
});
afterAll(async () => {
  await req?.app.close();
  await open?.app.close();
  rmSync(home, { recursive: true, force: true });
});

describe('on loopback without A2RL_AUTH=required', () => {
  it('serves every route without a credential, as an anonymous operator, recording nothing', async () => {
    expect((await call(open, 'GET', '/runs')).status).toBe(200);
    expect(JSON.parse((await call(open, 'GET', '/auth/me')).text)).toEqual({ required: false, identity: { kind: 'anonymous', name: 'anonymous', role: 'operator' } });
    expect((await call(open, 'GET', '/access')).status).toBe(200);
    expect(await records(open)).toEqual([]);
  });
});

describe('where a credential is required', () => {
  it('refuses a request without one with 401 and no data, and records the refusal at most once a minute per source', async () => {
    minutes(req, 2);
    const res = await call(req, 'GET', '/runs');
    expect(res.status).toBe(401);
    expect(res.text).not.toContain('secret-run');
    expect(JSON.parse(res.text)).toMatchObject({ statusCode: 401, message: expect.stringMatching(/requires a credential/) });
    expect((await call(req, 'GET', '/runs?x=1')).status).toBe(401);
    const refused = (await records(req)).filter((r) => r.outcome === 'refused');
    expect(refused).toEqual([{ actor: { kind: 'anonymous', id: '127.0.0.1', name: 'anonymous' }, action: 'token-use', target: null, outcome: 'refused', detail: 'GET /runs from 127.0.0.1: no credential' }]);
    minutes(req, 2);
    expect((await call(req, 'GET', '/runs', { token: 'a2rl_not-a-real-token-at-all-but-shaped-right00' })).status).toBe(401);
    expect((await records(req)).filter((r) => r.outcome === 'refused')).toHaveLength(2);
  });

  it('keeps /health-like open paths, @Public routes (the grading API) and /auth/me reachable', async () => {
    expect((await call(req, 'GET', '/g/run-token/time')).status).toBe(200);
    expect(JSON.parse((await call(req, 'GET', '/auth/me')).text)).toEqual({ required: true, identity: null });
    expect(JSON.parse((await call(req, 'GET', '/auth/me', { token: viewer })).text)).toEqual({ required: true, identity: { kind: 'token', name: 'reader', role: 'viewer' } });
  });

  it('lets a viewer read, recording its use once per 10 minutes, and refuses it operator routes with 403', async () => {
    minutes(req, 11);
    expect(JSON.parse((await call(req, 'GET', '/runs', { token: viewer })).text).items).toHaveLength(1);
    expect((await call(req, 'GET', '/runs', { token: viewer })).status).toBe(200);
    const viewerId = viewer.slice(5, 13);
    const uses = (await records(req)).filter((r) => r.action === 'token-use' && r.actor.id === viewerId && r.outcome === 'ok');
    expect(uses).toEqual([{ actor: { kind: 'token', id: viewerId, name: 'reader', role: 'viewer' }, action: 'token-use', target: null, outcome: 'ok', detail: 'GET /runs from 127.0.0.1' }]);

    minutes(req, 2);
    const exported = await call(req, 'POST', `/runs/${SEALED}/export`, { token: viewer });
    expect(exported.status).toBe(403);
    expect(exported.headers.get('content-type')).toMatch(/json/);
    expect((await call(req, 'GET', '/access', { token: viewer })).status).toBe(403);
    const refusal = (await records(req)).at(-1)!;
    expect(refusal).toMatchObject({ actor: { kind: 'token', id: viewerId, role: 'viewer' }, action: 'export', target: { runId: SEALED }, outcome: 'refused' });
  });

  it('streams an operator the export as a gzip attachment and records who exported which run', async () => {
    const res = await call(req, 'POST', `/runs/${SEALED}/export`, { token: operator });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/gzip');
    expect(res.headers.get('content-disposition')).toBe(`attachment; filename="${SEALED}.tar.gz"`);
    expect(gunzipSync(res.bytes).toString('latin1')).toContain('events.ndjson');
    const last = (await records(req)).at(-1)!;
    expect(last).toMatchObject({ actor: { kind: 'token', id: operator.slice(5, 13), name: 'ops', role: 'operator' }, action: 'export', target: { runId: SEALED }, outcome: 'ok' });
    expect(last.detail).toMatch(/^bundle of \d+ events, \d+ bytes, sha256 [0-9a-f]{64}, key id /);
    // GET /access shows it to operators, without token hashes.
    const access = JSON.parse((await call(req, 'GET', `/access?run=${SEALED}`, { token: operator })).text);
    expect(access.items.map((e: A2rlEvent) => e.type)).toContain('AccessRecorded');
    const all = JSON.parse((await call(req, 'GET', '/access?limit=1000', { token: operator })).text);
    expect(all.items.filter((e: A2rlEvent) => e.type === 'TokenCreated').every((e: { data: object }) => !('sha256' in e.data))).toBe(true);
  });

  it('refuses a revoked token and an expired one with 401', async () => {
    const { secret, token } = await req.ledger.createToken({ role: 'operator', name: 'old', expiresAt: new Date(req.now.t + 3_600_000).toISOString() });
    expect((await call(req, 'GET', '/runs', { token: secret })).status).toBe(200);
    minutes(req, 61);
    expect((await call(req, 'GET', '/runs', { token: secret })).status).toBe(401);
    const other = await req.ledger.createToken({ role: 'viewer', name: 'gone', expiresAt: null });
    expect((await call(req, 'GET', '/runs', { token: other.secret })).status).toBe(200);
    await req.ledger.revokeToken(other.token.tokenId);
    const res = await call(req, 'GET', '/runs', { token: other.secret });
    expect(res.status).toBe(401);
    expect(JSON.parse(res.text).message).toMatch(new RegExp(`token ${other.token.tokenId} is revoked`));
    expect(token.tokenId).not.toBe(other.token.tokenId);
  });

  it('signs a browser in with an HttpOnly SameSite=Strict cookie, recording every sign-in', async () => {
    minutes(req, 2);
    expect((await call(req, 'POST', '/auth/login', { body: { token: 'a2rl_wrong' } })).status).toBe(401);
    const login = await call(req, 'POST', '/auth/login', { body: { token: viewer } });
    expect(login.status).toBe(204);
    const cookie = login.headers.get('set-cookie')!;
    expect(cookie).toMatch(/^a2rl_session=a2rl_[^;]+; Path=\/; HttpOnly; SameSite=Strict$/);
    expect((await call(req, 'GET', '/runs', { headers: { cookie: cookie.split(';')[0] } })).status).toBe(200);
    const signIns = (await records(req)).filter((r) => r.action === 'sign-in');
    expect(signIns.map((r) => r.outcome)).toEqual(['refused', 'ok']);
    expect((await call(req, 'POST', '/auth/logout')).headers.get('set-cookie')).toMatch(/^a2rl_session=; Path=\/; Expires=Thu, 01 Jan 1970/);
  });

  it('refuses a cross-site form post to /auth/login (403) and any body but JSON (415), while the JSON sign-in from the own page works', async () => {
    minutes(req, 2);
    const form = (headers: Record<string, string>) => call(req, 'POST', '/auth/login', { headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers }, body: undefined, raw: `token=${viewer}` });
    const crossSite = await form({ origin: 'https://evil.example', 'sec-fetch-site': 'cross-site' });
    expect(crossSite.status).toBe(403);
    expect(crossSite.headers.get('set-cookie')).toBeNull();
    expect((await form({ origin: 'https://evil.example' })).status).toBe(403); // a browser without Sec-Fetch-Site
    expect((await form({ 'sec-fetch-site': 'same-site', origin: 'http://127.0.0.1:1' })).status).toBe(403); // another port of this host
    const sameOriginForm = await form({ origin: req.base, 'sec-fetch-site': 'same-origin' });
    expect(sameOriginForm.status).toBe(415);
    expect(sameOriginForm.headers.get('set-cookie')).toBeNull();
    const textPlain = await call(req, 'POST', '/auth/login', { headers: { 'content-type': 'text/plain' }, raw: JSON.stringify({ token: viewer }) });
    expect(textPlain.status).toBe(415);
    expect((await call(req, 'POST', '/auth/logout', { headers: { origin: 'https://evil.example', 'sec-fetch-site': 'cross-site' } })).status).toBe(403);
    // The dashboard's own sign-in (fetch with JSON from the same origin), and a script's (no browser headers).
    const own = await call(req, 'POST', '/auth/login', { body: { token: viewer }, headers: { origin: req.base, 'sec-fetch-site': 'same-origin' } });
    expect(own.status).toBe(204);
    expect(own.headers.get('set-cookie')).toMatch(/^a2rl_session=a2rl_/);
    expect((await call(req, 'POST', '/auth/login', { body: { token: viewer } })).status).toBe(204);
    const refused = (await records(req)).filter((r) => r.action === 'sign-in' && r.outcome === 'refused').at(-1);
    expect(refused?.detail).toMatch(/POST \/auth\/login from 127\.0\.0\.1: Sec-Fetch-Site is cross-site/);
  });

  it('honours the reverse proxy header only with the proxy secret, and only where configured', async () => {
    const proxied = { 'x-forwarded-user': 'alice', 'x-a2rl-proxy-secret': PROXY_SECRET };
    expect((await call(req, 'GET', '/access', { headers: proxied })).status).toBe(200);
    expect(JSON.parse((await call(req, 'GET', '/auth/me', { headers: { ...proxied, 'x-forwarded-user': 'bob' } })).text).identity).toEqual({ kind: 'proxy', name: 'bob', role: 'viewer' });
    expect((await call(req, 'GET', '/runs', { headers: { 'x-forwarded-user': 'alice' } })).status).toBe(401);
    expect((await call(req, 'GET', '/runs', { headers: { 'x-forwarded-user': 'alice', 'x-a2rl-proxy-secret': 'q'.repeat(24) } })).status).toBe(401);
    // Without A2RL_AUTH_PROXY_HEADER the header means nothing: an anonymous caller on loopback, and not an identity.
    expect(JSON.parse((await call(open, 'GET', '/auth/me', { headers: proxied })).text).identity.kind).toBe('anonymous');
  });

  it('verifies a run for a viewer and records the outcome', async () => {
    const res = await call(req, 'POST', `/runs/${SEALED}/verify`, { token: viewer });
    expect(res.status).toBe(200);
    // A sealed run gets the checks of `a2rl verify` (its blobs too); an open one its chain so far.
    expect(JSON.parse(res.text)).toMatchObject({ runId: SEALED, ok: true, sealed: true, failureCount: 0, artifacts: expect.any(Number), checks: ['chain', 'artifacts', 'integrity'] });
    expect(JSON.parse((await call(req, 'POST', `/runs/${OPEN}/verify`, { token: viewer })).text)).toMatchObject({ ok: true, sealed: false, artifacts: null, checks: ['chain'] });
    expect((await records(req)).at(-2)).toMatchObject({ action: 'verify', target: { runId: SEALED }, outcome: 'ok', verified: true });
    expect((await call(req, 'POST', '/runs/nope-run/verify', { token: viewer })).status).toBe(404);
    expect(await req.ledger.lastVerified(SEALED)).toEqual({ time: expect.any(String), ok: true, actor: { kind: 'token', name: 'reader' } });
    expect(await req.ledger.lastVerified('nope-run')).toBeNull();
  });

  it('cancels an open run by signalling its harness, and refuses an unknown, an ended or an unlocked run', async () => {
    expect((await call(req, 'POST', '/runs/nope-run/cancel', { token: operator })).status).toBe(404);
    const ended = await call(req, 'POST', `/runs/${SEALED}/cancel`, { token: operator });
    expect(ended.status).toBe(409);
    expect(JSON.parse(ended.text).message).toMatch(/has already ended \(RunCompleted\)/);
    expect(JSON.parse((await call(req, 'POST', `/runs/${OPEN}/cancel`, { token: operator })).text).message).toMatch(/no harness on this machine holds run/);
    req.locks.push({ runId: OPEN, pid: 4242 });
    const res = await call(req, 'POST', `/runs/${OPEN}/cancel`, { token: operator });
    expect(res.status).toBe(202);
    expect(req.signals).toEqual([[4242, 'SIGINT']]);
    expect((await records(req)).at(-1)).toMatchObject({ action: 'cancel', target: { runId: OPEN }, outcome: 'ok', detail: 'SIGINT to harness pid 4242' });
    expect((await call(req, 'POST', `/runs/${OPEN}/cancel`, { token: viewer })).status).toBe(403);
  });

  it('cancels a campaign for an operator, regrades through RegradeService (501 without one), 400 for a malformed id', async () => {
    expect((await call(req, 'POST', '/campaigns/camp-1/cancel', { token: operator })).status).toBe(200);
    expect((await records(req)).at(-1)).toMatchObject({ action: 'cancel', target: { campaignId: 'camp-1' }, outcome: 'ok' });
    expect((await call(req, 'POST', '/campaigns/camp-2/cancel', { token: operator })).status).toBe(404);
    const regraded = await call(req, 'POST', `/runs/${SEALED}/regrade`, { token: operator, body: { repeat: 2 } });
    expect(JSON.parse(regraded.text)).toEqual({ runId: SEALED, repeat: 2 });
    expect((await records(req)).at(-1)).toMatchObject({ action: 'regrade', target: { runId: SEALED }, outcome: 'ok', detail: 'repeat 2' });
    expect((await call(open, 'POST', `/runs/${SEALED}/regrade`, { body: { repeat: 2 } })).status).toBe(501);
    expect((await call(req, 'POST', `/runs/${SEALED}/regrade`, { token: operator, body: { repeat: 0 } })).status).toBe(400);
    expect((await call(req, 'POST', '/runs/..%2Fx/verify', { token: operator })).status).toBe(400);
  });
});
