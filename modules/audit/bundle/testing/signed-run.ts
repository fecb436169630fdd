import type { A2rlEvent, EventData, EventType } from '../../../ledger/events/catalog.js';
import { buildEvent, encodeEvent } from '../../../ledger/events/envelope.js';
import { streamName } from '../../../ledger/events/ids.js';
import type { EventStore } from '../../../ledger/event-store.port.js';
import { leafHash, MerkleAccumulator } from '../../../ledger/merkle.js';
import { signTreeHead, type SigningKey } from '../../../ledger/tree-head.js';

/**
 * Test and benchmark helper: writes a run the way a signing harness does, a TreeHeadSigned after
 * every `headEvery` other events and one when sealed, each head covering every event before it.
 * Appends are batched; occurredAt advances one second per seq from `start`.
 */
export class SignedRunWriter {
  private readonly tree = new MerkleAccumulator();
  private readonly pending: A2rlEvent[] = [];
  private sinceHead = 0;
  private appended = -1;

  constructor(
    private readonly store: EventStore,
    readonly runId: string,
    private readonly key: SigningKey,
    private readonly opts: { headEvery: number; start?: Date; batch?: number },
  ) {}

  get size(): number {
    return this.tree.size;
  }

  async add<T extends EventType>(type: T, data: EventData<T>): Promise<A2rlEvent> {
    const event = this.push(type, data);
    if (++this.sinceHead >= this.opts.headEvery) this.head();
    if (this.pending.length >= (this.opts.batch ?? 1000)) await this.flush();
    return event;
  }

  /** Signs the final head (unless the last event already is one) and writes everything. */
  async seal(): Promise<void> {
    if (this.sinceHead > 0) this.head();
    await this.flush();
  }

  private head(): void {
    const head = { runId: this.runId, treeSize: this.tree.size, rootHash: this.tree.root().toString('hex') };
    this.push('TreeHeadSigned', { treeSize: head.treeSize, rootHash: head.rootHash, signature: signTreeHead(head, this.key), keyId: this.key.keyId });
    this.sinceHead = 0;
  }

  private push<T extends EventType>(type: T, data: EventData<T>): A2rlEvent {
    const seq = this.tree.size;
    const start = (this.opts.start ?? new Date('2026-01-01T00:00:00.000Z')).getTime();
    const event = buildEvent(type, this.runId, seq, new Date(start + seq * 1000), data);
    this.tree.push(leafHash(encodeEvent(event)));
    this.pending.push(event);
    return event;
  }

  private async flush(): Promise<void> {
    if (!this.pending.length) return;
    const batch = this.pending.splice(0);
    await this.store.append(streamName(this.runId), batch, this.appended < 0 ? 'no_stream' : BigInt(this.appended));
    this.appended += batch.length;
  }
}
