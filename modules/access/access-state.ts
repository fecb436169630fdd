import type { A2rlEvent, AccessRole } from '../ledger/events/catalog.js';

/** A token as the access stream tells it: never its secret, only the secret's sha256. */
export interface TokenInfo {
  tokenId: string;
  name: string;
  role: AccessRole;
  sha256: string;
  createdAt: string;
  expiresAt: string | null;
  revokedAt: string | null;
}

export type TokenStatus = 'active' | 'expired' | 'revoked';

/** The access stream folded: its tokens, and the revision an append must expect next. */
export interface AccessState {
  /** Seq of the last event folded (-1: the stream does not exist yet). */
  revision: number;
  tokens: ReadonlyMap<string, TokenInfo>;
}

export const emptyAccess: AccessState = { revision: -1, tokens: new Map() };

/** Pure: the state after `event` (access records do not change tokens; other streams' events are not folded here). */
export function evolveAccess(state: AccessState, event: A2rlEvent): AccessState {
  const revision = Math.max(state.revision, event.seq);
  switch (event.type) {
    case 'TokenCreated': {
      const { tokenId, name, role, sha256, expiresAt } = event.data;
      const tokens = new Map(state.tokens);
      tokens.set(tokenId, { tokenId, name, role, sha256, createdAt: event.occurredAt, expiresAt, revokedAt: null });
      return { revision, tokens };
    }
    case 'TokenRevoked': {
      const token = state.tokens.get(event.data.tokenId);
      if (!token || token.revokedAt !== null) return { ...state, revision };
      const tokens = new Map(state.tokens);
      tokens.set(token.tokenId, { ...token, revokedAt: event.occurredAt });
      return { revision, tokens };
    }
    default:
      return { ...state, revision };
  }
}

export function foldAccess(events: Iterable<A2rlEvent>, from: AccessState = emptyAccess): AccessState {
  let state = from;
  for (const event of events) state = evolveAccess(state, event);
  return state;
}

/** Revoked wins over expired; a token expires at `expiresAt` exactly. */
export function tokenStatus(token: TokenInfo, now: Date): TokenStatus {
  if (token.revokedAt !== null) return 'revoked';
  if (token.expiresAt !== null && Date.parse(token.expiresAt) <= now.getTime()) return 'expired';
  return 'active';
}

/** A token's hash stays in the ledger: listings (GET /access, `a2rl access`) show everything else. */
export function withoutHash(event: A2rlEvent): A2rlEvent {
  if (event.type !== 'TokenCreated') return event;
  const { sha256: _hash, ...data } = event.data;
  return { ...event, data } as unknown as A2rlEvent;
}
