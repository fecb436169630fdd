import type { EventType } from '../ledger/events/catalog.js';
import { TranscriptBuilder, type TranscriptEntry } from '../../projections/transcript/transcript.js';
import type { RunSource } from './run-source.js';

/** One page of a run's transcript: the model calls with seq > afterSeq, at most `limit`. */
export interface TranscriptPage {
  runId: string;
  afterSeq: number;
  entries: TranscriptEntry[];
  /** The after_seq of the next page: the last entry's seq (afterSeq when the page is empty). */
  lastSeq: number;
  /** Whether the page is full, so that another page may follow. */
  more: boolean;
}

const CALLS: ReadonlySet<EventType> = new Set<EventType>(['LlmCallRecorded']);
/** Calls read per store read while counting the turns before a page. */
const COUNT_CHUNK = 1000;
/** Remembered "turns up to seq" marks (a page's end is the next page's start). */
const MAX_MARKS = 10_000;

/**
 * Pages the transcript from the store (by stream revision, LlmCallRecorded only), never the whole
 * run. Turn numbers count the turns before the page too: they are taken from the mark the previous
 * page left (events are immutable, so a mark never goes stale), else counted once from the start.
 */
export class TranscriptPager {
  private readonly marks = new Map<string, number>();

  constructor(private readonly source: RunSource) {}

  /** The page, or null for an unknown run. */
  async page(runId: string, afterSeq: number, limit: number): Promise<TranscriptPage | null> {
    const calls = await this.source.page(runId, { afterSeq, limit, types: CALLS });
    if (calls === null) return null;
    const before = await this.turnsUpTo(runId, afterSeq);
    const builder = new TranscriptBuilder();
    const entries: TranscriptEntry[] = [];
    let turns = before;
    for (const event of calls) {
      const entry = builder.add(event);
      if (!entry) continue;
      if (entry.turn !== null) entry.turn = ++turns;
      entries.push(entry);
    }
    const lastSeq = entries.at(-1)?.seq ?? afterSeq;
    this.mark(runId, lastSeq, turns);
    return { runId, afterSeq, entries, lastSeq, more: calls.length === limit };
  }

  /** Turns among the run's calls with seq ≤ `seq`. */
  private async turnsUpTo(runId: string, seq: number): Promise<number> {
    if (seq < 0) return 0;
    const known = this.marks.get(`${runId}/${seq}`);
    if (known !== undefined) return known;
    const builder = new TranscriptBuilder();
    let turns = 0;
    for (let after = -1; ; ) {
      const chunk = (await this.source.page(runId, { afterSeq: after, limit: COUNT_CHUNK, types: CALLS })) ?? [];
      for (const event of chunk) {
        if (event.seq > seq) return this.mark(runId, seq, turns);
        if (builder.add(event)?.turn != null) turns += 1;
      }
      if (chunk.length < COUNT_CHUNK) return this.mark(runId, seq, turns);
      after = chunk[chunk.length - 1].seq;
    }
  }

  private mark(runId: string, seq: number, turns: number): number {
    if (this.marks.size >= MAX_MARKS) this.marks.delete(this.marks.keys().next().value!);
    this.marks.set(`${runId}/${seq}`, turns);
    return turns;
  }
}
