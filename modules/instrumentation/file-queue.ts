import PQueue from 'p-queue';

/** Why a path is to be looked at. */
export interface Hint {
  /** Re-read even when its stat looks unchanged (a watcher event: mtime has a coarse clock tick, a rewrite can keep it). */
  force: boolean;
  /** Something announced it (a watcher event, or the walk of a directory a watcher event announced); false: only a rescan found it. */
  notified: boolean;
}

export interface PathQueueOptions {
  concurrency: number;
  /** Paths waiting (pending + deferred) beyond which `offer` refuses. */
  maxPending: number;
  /** A path notified again within this time of being processed waits until it has passed. */
  minIntervalMs: number;
  work: (path: string, hint: Hint, ticket: number) => Promise<void>;
  onError: (err: unknown) => void;
}

interface Item {
  hint: Hint;
  /** The units this item settles: usually one; more when a notification with an older ticket merged into it. */
  tickets: number[];
}

interface Waiter {
  ticket: number;
  remaining: number;
  done: Promise<void>;
  resolve: () => void;
}

/**
 * The set of workspace paths still to be processed, worked off by a p-queue of bounded concurrency.
 *
 * - A path is never processed twice at once: notified while in flight, it runs again right after.
 *   Notified while waiting, the notifications merge (the run reads the state at that time anyway).
 * - Rate limit: a path notified again within `minIntervalMs` of its last processing is deferred
 *   until then, so a log appended every few milliseconds is archived about once a second instead of
 *   once per watcher batch. A barrier (flush) takes deferred paths at once.
 * - Barriers: every unit of work carries the ticket (a counter) current when it was announced;
 *   `barrier()` resolves once every unit announced so far is done, however busy the queue stays
 *   afterwards, so a flush under continuous writes still ends.
 * - Bounded: `offer` (from watcher callbacks, which cannot wait) refuses new paths beyond
 *   `maxPending` and the caller falls back to a rescan; `add` (from walks) waits for room instead.
 */
export class PathQueue {
  private readonly queue: PQueue;
  private readonly pending = new Map<string, Item>();
  /**
   * The pending paths in arrival order. Not the Map's own order: taking a Map's first entry after
   * deleting the ones before it walks over their holes, quadratic over a burst of 100k paths.
   */
  private order: string[] = [];
  private head = 0;
  private readonly inflight = new Set<string>();
  private readonly again = new Map<string, Item>();
  private readonly deferred = new Map<string, Item & { due: number }>();
  /** Paths by the time their processing ended, oldest first; only those within minIntervalMs are kept. */
  private readonly recent = new Map<string, number>();
  private tickets = 0;
  private outstanding = 0;
  private waiters: Waiter[] = [];
  private roomWaiters: Array<() => void> = [];
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly opts: PathQueueOptions) {
    this.queue = new PQueue({ concurrency: opts.concurrency });
  }

  /** A new ticket: units announced with it are covered by barriers taken from now on. */
  ticket(): number {
    return ++this.tickets;
  }

  /** Whether the path is being processed right now. */
  busy(path: string): boolean {
    return this.inflight.has(path);
  }

  get waiting(): number {
    return this.pending.size + this.deferred.size;
  }

  /** Adds a path without waiting; false (nothing added) when the pending set is full. */
  offer(path: string, hint: Hint, ticket = this.ticket()): boolean {
    return this.put(path, hint, ticket, true);
  }

  /** Adds a path once there is room (walks: they are back-pressured instead of refused). */
  async add(path: string, hint: Hint, ticket: number): Promise<void> {
    if (this.pending.size >= this.opts.maxPending / 2) await this.room();
    this.put(path, hint, ticket, false);
  }

  /** Resolves once fewer than half of maxPending paths are pending. */
  room(): Promise<void> {
    if (this.pending.size < this.opts.maxPending / 2) return Promise.resolve();
    return new Promise((resolve) => this.roomWaiters.push(resolve));
  }

  /** Registers a unit of work outside the queue (a walk, a rescan) that barriers must wait for; call the result when done. */
  hold(ticket = this.ticket()): () => void {
    this.unitAdded(ticket);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.unitDone(ticket);
    };
  }

  /** Resolves once every unit announced before this call is done; deferred paths are taken at once. */
  barrier(): Promise<void> {
    this.promote(Infinity);
    if (this.outstanding === 0) return Promise.resolve();
    const last = this.waiters.at(-1);
    if (last && last.ticket === this.tickets) return last.done;
    let resolve!: () => void;
    const done = new Promise<void>((r) => (resolve = r));
    this.waiters.push({ ticket: this.tickets, remaining: this.outstanding, done, resolve });
    return done;
  }

  /** Stops the deferral timer (the queue stays usable: a barrier still takes deferred paths). */
  close(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  private put(path: string, hint: Hint, ticket: number, bounded: boolean): boolean {
    if (this.inflight.has(path)) {
      const again = this.again.get(path);
      if (again) this.merge(again, hint, ticket);
      else {
        this.again.set(path, { hint: { ...hint }, tickets: [ticket] });
        this.unitAdded(ticket);
      }
      return true;
    }
    const waiting = this.pending.get(path);
    if (waiting) {
      this.merge(waiting, hint, ticket);
      return true;
    }
    const deferred = this.deferred.get(path);
    if (deferred) {
      this.merge(deferred, hint, ticket);
      // Only watcher events wait out the interval; a walk or a re-check wants the path now.
      if (!hint.force) this.promotePath(path, deferred);
      return true;
    }
    if (bounded && this.waiting >= this.opts.maxPending) return false;
    this.unitAdded(ticket);
    this.enqueue(path, { hint: { ...hint }, tickets: [ticket] });
    return true;
  }

  private merge(into: Item, hint: Hint, ticket: number): void {
    into.hint.force ||= hint.force;
    into.hint.notified ||= hint.notified;
    // A barrier taken between the older and the newer ticket counted only the newer unit: settle both.
    if (ticket < Math.min(...into.tickets)) {
      into.tickets.push(ticket);
      this.unitAdded(ticket);
    }
  }

  /** Pending now, or deferred when it was processed recently and only a watcher event asks for it. */
  private enqueue(path: string, item: Item): void {
    const last = this.recent.get(path);
    const now = Date.now();
    if (item.hint.force && last !== undefined && now - last < this.opts.minIntervalMs) {
      this.deferred.set(path, { ...item, due: last + this.opts.minIntervalMs });
      this.timer ??= setInterval(() => this.tick(), Math.max(10, Math.min(250, this.opts.minIntervalMs / 4))).unref();
      return;
    }
    this.pending.set(path, item);
    this.order.push(path);
    this.pump();
  }

  private tick(): void {
    this.promote(Date.now());
    this.prune(Date.now());
    if (this.deferred.size === 0) this.close();
  }

  private promote(now: number): void {
    for (const [path, item] of this.deferred) if (item.due <= now) this.promotePath(path, item);
  }

  private promotePath(path: string, item: Item): void {
    this.deferred.delete(path);
    this.pending.set(path, { hint: item.hint, tickets: item.tickets });
    this.order.push(path);
    this.pump();
  }

  private prune(now: number): void {
    for (const [path, at] of this.recent) {
      if (now - at < this.opts.minIntervalMs) break;
      this.recent.delete(path);
    }
  }

  /** Feeds p-queue no more than it can run, so that `pending` stays the one place where paths merge. */
  private pump(): void {
    // Counted by our own in-flight set: p-queue still counts a task whose finally block is calling this.
    while (this.pending.size > 0 && this.inflight.size < this.opts.concurrency) {
      const path = this.order[this.head++];
      const item = this.pending.get(path)!; // a path is in `order` exactly while it is pending
      this.pending.delete(path);
      if (this.head > 4096 && this.head * 2 > this.order.length) {
        this.order = this.order.slice(this.head);
        this.head = 0;
      }
      this.inflight.add(path);
      void this.queue.add(() => this.run(path, item));
    }
    if (this.roomWaiters.length > 0 && this.pending.size < this.opts.maxPending / 2) {
      const waiters = this.roomWaiters;
      this.roomWaiters = [];
      for (const resolve of waiters) resolve();
    }
  }

  private async run(path: string, item: Item): Promise<void> {
    try {
      await this.opts.work(path, item.hint, Math.min(...item.tickets));
    } catch (err) {
      this.opts.onError(err);
    } finally {
      this.inflight.delete(path);
      const now = Date.now();
      this.recent.delete(path);
      this.recent.set(path, now);
      this.prune(now);
      const again = this.again.get(path);
      if (again) {
        this.again.delete(path);
        this.enqueue(path, again);
      }
      for (const ticket of item.tickets) this.unitDone(ticket);
      this.pump();
    }
  }

  private unitAdded(ticket: number): void {
    this.outstanding++;
    for (const w of this.waiters) if (ticket <= w.ticket) w.remaining++;
  }

  private unitDone(ticket: number): void {
    this.outstanding--;
    let finished = false;
    for (const w of this.waiters) {
      if (ticket <= w.ticket && --w.remaining === 0) {
        w.resolve();
        finished = true;
      }
    }
    if (finished) this.waiters = this.waiters.filter((w) => w.remaining > 0);
  }
}
