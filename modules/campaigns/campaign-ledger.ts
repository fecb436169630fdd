import { setTimeout as sleep } from 'node:timers/promises';
import { Inject, Injectable } from '@nestjs/common';
import { acceptedRuns, emptyCampaign, evolveCampaign, type CampaignProgress } from '../../projections/campaign-progress/campaign-progress.js';
import { WrongExpectedRevisionError } from '../ledger/errors.js';
import type { A2rlEvent } from '../ledger/events/catalog.js';
import { buildEvent } from '../ledger/events/envelope.js';
import { campaignStreamName } from '../ledger/events/ids.js';
import type { EventStore } from '../ledger/event-store.port.js';
import { CLOCK, EVENT_STORE, type Clock } from '../ledger/tokens.js';
import { decideCampaign, type CampaignCommand } from './campaign.js';

/** How often `follow` re-reads a campaign's stream (other processes append to it too). */
const FOLLOW_POLL_MS = 500;
/** Appends retried after losing a race with another writer of the same campaign. */
const MAX_CONFLICTS = 50;

/**
 * A campaign's stream: read and fold it, decide a step on the folded state and append the result
 * with the exact expected revision. Schedulers and any number of workers write the same stream; a
 * writer that lost the race re-reads and decides again, so every step is judged on the latest state.
 */
@Injectable()
export class CampaignLedger {
  /** The last state read per campaign: a read folds only the events appended since (by anyone). */
  private readonly known = new Map<string, CampaignProgress>();

  constructor(
    @Inject(EVENT_STORE) private readonly store: EventStore,
    @Inject(CLOCK) private readonly clock: Clock,
  ) {}

  async read(campaignId: string): Promise<CampaignProgress> {
    let state = this.known.get(campaignId) ?? emptyCampaign(campaignId);
    for await (const recorded of this.store.readStream(campaignStreamName(campaignId), { fromRevision: BigInt(state.revision + 1) })) {
      state = evolveCampaign(state, recorded.event);
    }
    this.known.set(campaignId, state);
    return state;
  }

  /** The runs the campaign accepted (one per completed cell × seed), or null for an unknown campaign. */
  async acceptedRunIds(campaignId: string): Promise<ReadonlySet<string> | null> {
    const progress = await this.read(campaignId);
    return progress.scheduled ? new Set(acceptedRuns(progress)) : null;
  }

  async events(campaignId: string): Promise<A2rlEvent[]> {
    const events: A2rlEvent[] = [];
    for await (const recorded of this.store.readStream(campaignStreamName(campaignId))) events.push(recorded.event);
    return events;
  }

  /** Decides `command` on the campaign's latest state and appends what it yields; returns the new state. */
  async execute(campaignId: string, command: CampaignCommand): Promise<CampaignProgress> {
    for (let conflicts = 0; ; conflicts++) {
      const state = await this.read(campaignId);
      const decided = decideCampaign(state, command);
      const at = this.clock();
      const events = decided.map((e, i) => buildEvent(e.type, campaignId, state.revision + 1 + i, at, e.data));
      try {
        await this.store.append(campaignStreamName(campaignId), events, state.revision < 0 ? 'no_stream' : BigInt(state.revision));
      } catch (err) {
        if (err instanceof WrongExpectedRevisionError && conflicts < MAX_CONFLICTS) continue;
        throw err;
      }
      const next = events.reduce(evolveCampaign, state);
      this.known.set(campaignId, next);
      return next;
    }
  }

  /** Every campaign, in the order they were scheduled. */
  async list(): Promise<CampaignProgress[]> {
    const byId = new Map<string, CampaignProgress>();
    for await (const recorded of this.store.readAll({ category: 'campaign' })) {
      const id = recorded.event.runId;
      byId.set(id, evolveCampaign(byId.get(id) ?? emptyCampaign(id), recorded.event));
    }
    return [...byId.values()];
  }

  /**
   * Calls `onChange` with the campaign's state now and after each new event, until it has completed
   * or been cancelled (or `signal` aborts); resolves with the last state.
   */
  async follow(campaignId: string, onChange: (progress: CampaignProgress, event: A2rlEvent | null) => void, signal?: AbortSignal): Promise<CampaignProgress> {
    let state = await this.read(campaignId);
    onChange(state, null);
    while (!ended(state) && !signal?.aborted) {
      await sleep(FOLLOW_POLL_MS, undefined, { signal }).catch(() => undefined);
      for await (const recorded of this.store.readStream(campaignStreamName(campaignId), { fromRevision: BigInt(state.revision + 1) })) {
        state = evolveCampaign(state, recorded.event);
        onChange(state, recorded.event);
      }
    }
    return state;
  }
}

const ended = (p: CampaignProgress) => p.scheduled === null || p.status === 'completed' || p.status === 'cancelled';
