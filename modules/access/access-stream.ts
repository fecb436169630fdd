import { WrongExpectedRevisionError } from '../ledger/errors.js';
import type { A2rlEvent, AccessRole, EventData } from '../ledger/events/catalog.js';
import { buildEvent } from '../ledger/events/envelope.js';
import { ACCESS_LOG_ID, accessStreamName } from '../ledger/events/ids.js';
import type { EventStore } from '../ledger/event-store.port.js';
import type { Clock } from '../ledger/tokens.js';
import { emptyAccess, evolveAccess, tokenStatus, type AccessState, type TokenInfo } from './access-state.js';
import { newSecret, secretMatches, tokenIdOf } from './token-secret.js';

/** Appends retried after losing a race with another writer (a CLI, another server process). */
const MAX_CONFLICTS = 50;

type AccessEventType = 'TokenCreated' | 'TokenRevoked' | 'AccessRecorded';
type Decided = { [T in AccessEventType]: { type: T; data: EventData<T> } }[AccessEventType];

export interface CreatedToken {
  secret: string;
  token: TokenInfo;
}

/** Why a presented secret is not a credential (one line, safe to show its holder). */
export type SecretCheck = { token: TokenInfo } | { refused: string; tokenId: string | null };

/**
 * The access stream `access-log`: tokens and access records. Read incrementally (each read folds
 * only what was appended since, by anyone: revocations by the CLI count at once) and written like a
 * campaign stream: decide on the latest state, append with the exact expected revision, and on a
 * lost race read again and decide again. Without Nest (the CLI records its actions with it);
 * access.module.ts provides it to the app as AccessLedger.
 */
export class AccessStreamLedger {
  private state: AccessState = emptyAccess;
  private reading: Promise<AccessState> | null = null;

  constructor(
    private readonly store: EventStore,
    private readonly clock: Clock,
  ) {}

  /** The state with everything appended so far; concurrent callers share one read. */
  read(): Promise<AccessState> {
    this.reading ??= this.catchUp().finally(() => (this.reading = null));
    return this.reading;
  }

  /** Every event of the stream (for `a2rl access` and GET /access), after `afterSeq`, at most `limit`. */
  async events(afterSeq = -1, limit = Infinity): Promise<A2rlEvent[]> {
    const out: A2rlEvent[] = [];
    const options = { fromRevision: BigInt(afterSeq + 1), ...(Number.isFinite(limit) ? { maxCount: limit } : {}) };
    for await (const recorded of this.store.readStream(accessStreamName(), options)) out.push(recorded.event);
    return out;
  }

  /** The last verification of a run from any source (POST /runs/:id/verify, the dashboard's Verify now, `a2rl verify`): the audit page's "last verified". */
  async lastVerified(runId: string): Promise<{ time: string; ok: boolean; actor: { kind: string; name: string } } | null> {
    let last: { time: string; ok: boolean; actor: { kind: string; name: string } } | null = null;
    for await (const { event: e } of this.store.readStream(accessStreamName())) {
      if (e.type === 'AccessRecorded' && e.data.action === 'verify' && e.data.verified !== undefined && e.data.target?.runId === runId) {
        last = { time: e.occurredAt, ok: e.data.verified, actor: { kind: e.data.actor.kind, name: e.data.actor.name } };
      }
    }
    return last;
  }

  async createToken(opts: { role: AccessRole; name: string; expiresAt: string | null }): Promise<CreatedToken> {
    let secret = '';
    const state = await this.execute((s) => {
      const fresh = newSecret((id) => s.tokens.has(id));
      secret = fresh.secret;
      return [{ type: 'TokenCreated', data: { tokenId: fresh.tokenId, name: opts.name, role: opts.role, sha256: fresh.sha256, expiresAt: opts.expiresAt } }];
    });
    return { secret, token: state.tokens.get(tokenIdOf(secret)!)! };
  }

  /** Revokes a token; throws one line for an unknown one. Revoking twice records nothing the second time. */
  async revokeToken(tokenId: string): Promise<{ token: TokenInfo; already: boolean }> {
    let already = false;
    const state = await this.execute((s) => {
      const token = s.tokens.get(tokenId);
      if (!token) throw new Error(`no token "${tokenId}" (a2rl tokens list shows them)`);
      already = token.revokedAt !== null;
      return already ? [] : [{ type: 'TokenRevoked', data: { tokenId } }];
    });
    return { token: state.tokens.get(tokenId)!, already };
  }

  async record(data: EventData<'AccessRecorded'>): Promise<void> {
    await this.execute(() => [{ type: 'AccessRecorded', data }]);
  }

  /** The token a presented secret is, if it is one that may be used now. */
  async check(secret: string): Promise<SecretCheck> {
    const tokenId = tokenIdOf(secret);
    if (tokenId === null) return { refused: 'not an a2rl API token', tokenId: null };
    const token = (await this.read()).tokens.get(tokenId);
    if (!token || !secretMatches(secret, token.sha256)) return { refused: 'unknown token', tokenId: null };
    const status = tokenStatus(token, this.clock());
    return status === 'active' ? { token } : { refused: `token ${tokenId} is ${status}`, tokenId };
  }

  private async execute(decide: (state: AccessState) => Decided[]): Promise<AccessState> {
    for (let conflicts = 0; ; conflicts++) {
      const state = await this.read();
      const decided = decide(state);
      if (!decided.length) return state;
      const at = this.clock();
      const events = decided.map((e, i) => buildEvent(e.type, ACCESS_LOG_ID, state.revision + 1 + i, at, e.data as never));
      try {
        await this.store.append(accessStreamName(), events, state.revision < 0 ? 'no_stream' : BigInt(state.revision));
      } catch (err) {
        if (err instanceof WrongExpectedRevisionError && conflicts < MAX_CONFLICTS) continue;
        throw err;
      }
      // A concurrent read may have folded these already; fold only what it has not.
      if (this.state.revision < events[events.length - 1].seq) this.state = events.filter((e) => e.seq > this.state.revision).reduce(evolveAccess, this.state);
      return this.state;
    }
  }

  private async catchUp(): Promise<AccessState> {
    let state = this.state;
    for await (const recorded of this.store.readStream(accessStreamName(), { fromRevision: BigInt(state.revision + 1) })) {
      state = evolveAccess(state, recorded.event);
    }
    // An append that finished meanwhile may have folded further than this read saw.
    if (state.revision >= this.state.revision) this.state = state;
    return this.state;
  }
}
