import { describe, expect, it } from '@jest/globals';
import type { A2rlEvent, EventData } from '../ledger/events/catalog.js';
import { buildEvent } from '../ledger/events/envelope.js';
import { emptyAccess, evolveAccess, foldAccess, tokenStatus } from './access-state.js';
import { newSecret, parseExpiry, secretHash, secretMatches, tokenIdOf } from './token-secret.js';

const T0 = '2026-03-01T00:00:00.000Z';
const SHA = 'b'.repeat(64);

function stream(...items: Array<{ type: 'TokenCreated' | 'TokenRevoked' | 'AccessRecorded'; data: object; at?: string }>): A2rlEvent[] {
  return items.map((e, seq) => buildEvent(e.type, 'log', seq, e.at ?? T0, e.data as EventData<'TokenCreated'>));
}
const created = (tokenId: string, expiresAt: string | null = null, role: 'viewer' | 'operator' = 'viewer') =>
  ({ type: 'TokenCreated' as const, data: { tokenId, name: `n-${tokenId}`, role, sha256: SHA, expiresAt } });

describe('the access stream folded into tokens', () => {
  it('keeps each created token with its role, name, hash and creation time, and the revision to append after', () => {
    const state = foldAccess(stream(created('aaaa1111', null, 'operator'), created('bbbb2222', '2026-04-01T00:00:00.000Z')));
    expect(state.revision).toBe(1);
    expect([...state.tokens.values()]).toEqual([
      { tokenId: 'aaaa1111', name: 'n-aaaa1111', role: 'operator', sha256: SHA, createdAt: T0, expiresAt: null, revokedAt: null },
      { tokenId: 'bbbb2222', name: 'n-bbbb2222', role: 'viewer', sha256: SHA, createdAt: T0, expiresAt: '2026-04-01T00:00:00.000Z', revokedAt: null },
    ]);
    expect(emptyAccess.revision).toBe(-1);
  });

  it('revokes a token at the time of its TokenRevoked; a second revocation or an unknown id changes nothing but the revision', () => {
    const events = stream(created('aaaa1111'), { type: 'TokenRevoked', data: { tokenId: 'aaaa1111' }, at: '2026-03-02T00:00:00.000Z' }, { type: 'TokenRevoked', data: { tokenId: 'aaaa1111' }, at: '2026-03-03T00:00:00.000Z' }, { type: 'TokenRevoked', data: { tokenId: 'zzzz9999' } });
    const state = foldAccess(events);
    expect(state.tokens.get('aaaa1111')?.revokedAt).toBe('2026-03-02T00:00:00.000Z');
    expect(state.tokens.has('zzzz9999')).toBe(false);
    expect(state.revision).toBe(3);
  });

  it('folds access records as nothing but the revision, and leaves the earlier state untouched (pure)', () => {
    const before = foldAccess(stream(created('aaaa1111')));
    const record = stream(created('x'), { type: 'AccessRecorded', data: { actor: { kind: 'token', id: 'aaaa1111', name: 'n', role: 'viewer' }, action: 'export', target: { runId: 'r-1' }, outcome: 'refused' } })[1];
    const after = evolveAccess(before, record);
    expect(after.tokens).toBe(before.tokens);
    expect(after.revision).toBe(1);
    expect(before.revision).toBe(0);
  });

  it('says a token is active, expired from its expiry time on, and revoked over expired', () => {
    const state = foldAccess(stream(created('aaaa1111', '2026-03-10T00:00:00.000Z'), created('bbbb2222', '2026-03-10T00:00:00.000Z'), { type: 'TokenRevoked', data: { tokenId: 'bbbb2222' } }));
    const a = state.tokens.get('aaaa1111')!;
    expect(tokenStatus(a, new Date('2026-03-09T23:59:59.999Z'))).toBe('active');
    expect(tokenStatus(a, new Date('2026-03-10T00:00:00.000Z'))).toBe('expired');
    expect(tokenStatus(state.tokens.get('bbbb2222')!, new Date('2026-03-20T00:00:00.000Z'))).toBe('revoked');
    expect(tokenStatus(state.tokens.get('bbbb2222')!, new Date('2026-03-05T00:00:00.000Z'))).toBe('revoked');
  });
});

describe('token secrets', () => {
  it('are a2rl_ + 43 base64url characters, named by their first 8, stored only as sha256, matched in constant time', () => {
    const { secret, tokenId, sha256 } = newSecret();
    expect(secret).toMatch(/^a2rl_[A-Za-z0-9_-]{43}$/);
    expect(tokenId).toBe(secret.slice(5, 13));
    expect(tokenId).toMatch(/^[A-Za-z0-9]/);
    expect(sha256).toBe(secretHash(secret));
    expect(sha256).not.toContain(secret.slice(5));
    expect(secretMatches(secret, sha256)).toBe(true);
    expect(secretMatches(`${secret.slice(0, -1)}${secret.endsWith('A') ? 'B' : 'A'}`, sha256)).toBe(false);
    expect(secretMatches(secret, 'short')).toBe(false);
  });

  it('draw again when the id is taken', () => {
    const first = newSecret();
    let calls = 0;
    const second = newSecret((id) => ++calls === 1 || id === first.tokenId);
    expect(calls).toBeGreaterThanOrEqual(2);
    expect(second.secret).not.toBe(first.secret);
  });

  it('reject anything not shaped like a token', () => {
    for (const text of ['', 'a2rl_', 'a2rl_short', `A2RL_${'a'.repeat(43)}`, `a2rl_${'a'.repeat(44)}`, `a2rl_${'a'.repeat(42)}!`]) expect(tokenIdOf(text)).toBeNull();
  });

  it('expire after a duration or at an ISO time, never in the past or beyond 10 years', () => {
    const now = new Date('2026-03-01T00:00:00.000Z');
    expect(parseExpiry(undefined, now)).toBeNull();
    expect(parseExpiry('30d', now)).toBe('2026-03-31T00:00:00.000Z');
    expect(parseExpiry('12h', now)).toBe('2026-03-01T12:00:00.000Z');
    expect(parseExpiry('2w', now)).toBe('2026-03-15T00:00:00.000Z');
    expect(parseExpiry('2026-06-01T00:00:00Z', now)).toBe('2026-06-01T00:00:00.000Z');
    for (const bad of ['30', 'soon', '2026-02-01T00:00:00Z', '0d', '4000d', '30 days']) expect(() => parseExpiry(bad, now)).toThrow(/^--expires: /);
  });
});
