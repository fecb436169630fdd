import type { A2rlEvent, EventData } from './events/catalog.js';
import { encodeEvent } from './events/envelope.js';
import { leafHash, MerkleAccumulator } from './merkle.js';
import { signTreeHead, type SigningKey } from './tree-head.js';

// A head costs a signature and an event; a run that prints logs records thousands of events a
// minute, so heads are bounded by time as well as by count (A2RL_TREE_HEAD_EVERY overrides both).
export const DEFAULT_HEAD_EVERY_EVENTS = 10_000;
export const DEFAULT_HEAD_EVERY_MS = 10_000;

export interface TreeHeadSignerOptions {
  runId: string;
  key: SigningKey;
  /** Appends the head as the run's next event (the ledger); resolves with the stored event. */
  append: (data: EventData<'TreeHeadSigned'>) => Promise<A2rlEvent>;
  /** Sign once this many events arrived since the last head (default 10,000). */
  everyEvents?: number;
  /** Sign at most this long after the first event not yet covered (default 10 s). */
  everyMs?: number;
}

/** The signer could not produce a head that covers exactly the events before it. */
export class TreeHeadSignerError extends Error {
  override readonly name = 'TreeHeadSignerError';
}

/**
 * Signs a run's tree heads as the run is recorded. Every append of the run goes through `record`,
 * so the signer sees each stored event (fed to the RFC 6962 accumulator in seq order, whatever order
 * the appends resolve in) and can hold new appends back while it signs: a head is appended only
 * when nothing else is in flight, so it lands at seq == treeSize and covers exactly the events
 * before it. Heads are signed after `everyEvents` events, `everyMs` after the first uncovered
 * event, and on `seal()`; one at a time.
 */
export class TreeHeadSigner {
  private readonly tree = new MerkleAccumulator();
  /** Stored events whose predecessors have not been seen yet, by seq. */
  private readonly ahead = new Map<number, A2rlEvent>();
  private readonly inFlight = new Set<Promise<void>>();
  private readonly everyEvents: number;
  private readonly everyMs: number;
  /** Events in the tree that no head covers yet. */
  private uncovered = 0;
  private signing: Promise<void> | null = null;
  private timer: NodeJS.Timeout | undefined;
  private failure: unknown;

  constructor(private readonly options: TreeHeadSignerOptions) {
    this.everyEvents = options.everyEvents ?? DEFAULT_HEAD_EVERY_EVENTS;
    this.everyMs = options.everyMs ?? DEFAULT_HEAD_EVERY_MS;
    if (!Number.isSafeInteger(this.everyEvents) || this.everyEvents < 1) throw new RangeError(`everyEvents must be a positive integer, got ${this.everyEvents}`);
    if (!(this.everyMs > 0)) throw new RangeError(`everyMs must be positive, got ${this.everyMs}`);
  }

  /**
   * A signer for a run whose events are already stored (all of them, in seq order), e.g. to seal
   * an interrupted run: the accumulator is rebuilt from the stream without signing on the way. The
   * leaves are the stored bytes (an event written at an older schema version hashes as written).
   */
  static resume(options: TreeHeadSignerOptions, stored: Iterable<{ event: A2rlEvent; bytes: Buffer }>): TreeHeadSigner {
    const signer = new TreeHeadSigner(options);
    for (const { event, bytes } of stored) {
      if (event.seq !== signer.tree.size) throw new TreeHeadSignerError(`run ${options.runId}: stored event seq ${event.seq} where ${signer.tree.size} was expected`);
      signer.tree.push(leafHash(bytes));
      signer.uncovered = event.type === 'TreeHeadSigned' ? 0 : signer.uncovered + 1;
    }
    return signer;
  }

  /** Events in the tree so far (== the seq of the next event when nothing is in flight). */
  get treeSize(): number {
    return this.tree.size;
  }

  /** Runs one append of the run (after any head being signed) and feeds the stored event(s) to the tree. */
  async record<E extends A2rlEvent | A2rlEvent[]>(append: () => Promise<E>): Promise<E> {
    while (this.signing) await this.signing;
    const op = append().then((stored) => {
      for (const event of Array.isArray(stored) ? stored : [stored]) this.observe(event);
      return stored;
    });
    const settled = op.then(
      () => undefined,
      () => undefined,
    );
    this.inFlight.add(settled);
    void settled.then(() => this.inFlight.delete(settled));
    return op;
  }

  /**
   * Signs a head covering every event recorded so far (unless the last head already does) and stops
   * the timer. Throws the first signing failure of the run, if any, so it is not lost.
   */
  async seal(): Promise<void> {
    while (this.signing) await this.signing;
    await this.sign();
    if (this.failure) throw this.failure;
  }

  private observe(event: A2rlEvent): void {
    if (event.runId !== this.options.runId || event.seq < this.tree.size) {
      this.failure ??= new TreeHeadSignerError(`run ${this.options.runId}: unexpected event ${event.runId}/${event.seq} (tree has ${this.tree.size} events)`);
      return;
    }
    this.ahead.set(event.seq, event);
    for (let next = this.ahead.get(this.tree.size); next; next = this.ahead.get(this.tree.size)) {
      this.ahead.delete(next.seq);
      this.tree.push(leafHash(encodeEvent(next)));
      this.uncovered = next.type === 'TreeHeadSigned' ? 0 : this.uncovered + 1;
    }
    if (this.uncovered >= this.everyEvents) void this.sign();
    else if (this.uncovered > 0 && !this.timer && !this.signing) {
      this.timer = setTimeout(() => void this.sign(), this.everyMs);
      this.timer.unref();
    }
  }

  /** Waits until no append is in flight, then appends the head; new appends wait meanwhile. */
  private sign(): Promise<void> {
    if (this.signing) return this.signing;
    clearTimeout(this.timer);
    this.timer = undefined;
    this.signing = (async () => {
      while (this.inFlight.size) await Promise.all([...this.inFlight]);
      if (this.uncovered === 0) return;
      if (this.ahead.size) {
        const first = Math.min(...this.ahead.keys());
        throw new TreeHeadSignerError(`run ${this.options.runId}: event ${first} was stored but seq ${this.tree.size} never was; no head can cover the gap`);
      }
      const { runId, key } = this.options;
      const head = { runId, treeSize: this.tree.size, rootHash: this.tree.root().toString('hex') };
      const stored = await this.options.append({ treeSize: head.treeSize, rootHash: head.rootHash, signature: signTreeHead(head, key), keyId: key.keyId });
      if (stored.seq !== head.treeSize) throw new TreeHeadSignerError(`run ${runId}: the head over ${head.treeSize} events was stored at seq ${stored.seq}`);
      this.observe(stored);
    })()
      .catch((error: unknown) => {
        this.failure ??= error;
      })
      .finally(() => {
        this.signing = null;
      });
    return this.signing;
  }
}
