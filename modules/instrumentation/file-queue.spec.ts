import { PathQueue, type Hint } from './file-queue.js';

const event: Hint = { force: true, notified: true };
const walk: Hint = { force: false, notified: false };

/** A work function whose calls stay open until released, so tests decide every interleaving. */
function gatedWork() {
  const calls: Array<{ path: string; hint: Hint; release: () => void }> = [];
  const work = (path: string, hint: Hint) => new Promise<void>((release) => calls.push({ path, hint: { ...hint }, release }));
  const releaseAll = async () => {
    while (calls.some((c) => c.release)) {
      for (const c of calls.splice(0)) c.release();
      await new Promise((r) => setImmediate(r));
    }
  };
  return { calls, work, releaseAll };
}

const tick = () => new Promise((r) => setImmediate(r));
let unexpectedErrors: unknown[] = [];
const unexpected = (err: unknown) => void unexpectedErrors.push(err);

describe('PathQueue', () => {
  afterEach(() => {
    expect(unexpectedErrors).toEqual([]);
    unexpectedErrors = [];
  });

  it('never runs a path twice at once: notified while in flight, it runs once more afterwards', async () => {
    const { calls, work } = gatedWork();
    const q = new PathQueue({ concurrency: 4, maxPending: 100, minIntervalMs: 0, work, onError: unexpected });
    q.offer('a', event);
    await tick();
    q.offer('a', event);
    q.offer('a', event);
    await tick();
    expect(calls.map((c) => c.path)).toEqual(['a']);
    calls[0].release();
    await tick();
    await tick();
    expect(calls.map((c) => c.path)).toEqual(['a', 'a']);
  });

  it('merges notifications of a waiting path and runs at most `concurrency` paths at once', async () => {
    const { calls, work } = gatedWork();
    const q = new PathQueue({ concurrency: 2, maxPending: 100, minIntervalMs: 0, work, onError: unexpected });
    for (const p of ['a', 'b', 'c', 'c', 'd']) q.offer(p, walk);
    q.offer('c', event);
    await tick();
    expect(calls.map((c) => c.path)).toEqual(['a', 'b']);
    calls[0].release();
    calls[1].release();
    await tick();
    await tick();
    expect(calls.map((c) => c.path)).toEqual(['a', 'b', 'c', 'd']);
    expect(calls[2].hint).toEqual({ force: true, notified: true }); // the merged hint is the strongest
  });

  it('resolves a barrier once the work announced before it is done, even while new work keeps coming', async () => {
    const { calls, work } = gatedWork();
    const q = new PathQueue({ concurrency: 1, maxPending: 100, minIntervalMs: 0, work, onError: unexpected });
    q.offer('a', event);
    q.offer('b', event);
    let done = false;
    const barrier = q.barrier().then(() => (done = true));
    q.offer('c', event); // after the barrier: not waited for
    await tick();
    calls[0].release();
    await tick();
    await tick();
    expect(done).toBe(false);
    calls[1].release();
    await barrier;
    await tick();
    expect(calls.map((c) => c.path)).toEqual(['a', 'b', 'c']);
    expect(calls[2].release).toBeDefined(); // c still running: the barrier did not wait for it
  });

  it('waits in a barrier for units held outside the queue', async () => {
    const { work } = gatedWork();
    const q = new PathQueue({ concurrency: 1, maxPending: 100, minIntervalMs: 0, work, onError: unexpected });
    const release = q.hold();
    let done = false;
    const barrier = q.barrier().then(() => (done = true));
    await tick();
    expect(done).toBe(false);
    release();
    await barrier;
  });

  it('defers a path notified again right after it was processed, unless a barrier or a walk asks for it', async () => {
    const { calls, work } = gatedWork();
    const q = new PathQueue({ concurrency: 4, maxPending: 100, minIntervalMs: 60_000, work, onError: unexpected });
    q.offer('log', event);
    await tick();
    calls[0].release();
    await tick();
    q.offer('log', event);
    q.offer('log', event);
    await tick();
    expect(calls).toHaveLength(1); // deferred for a minute
    const barrier = q.barrier();
    await tick();
    expect(calls).toHaveLength(2); // the barrier takes it now
    calls[1].release();
    await barrier;
    q.offer('log', event);
    await tick();
    expect(calls).toHaveLength(2);
    q.offer('log', walk);
    await tick();
    expect(calls).toHaveLength(3);
    q.close();
  });

  it('refuses new paths beyond maxPending from offer, but lets walks wait for room', async () => {
    const { calls, work, releaseAll } = gatedWork();
    const q = new PathQueue({ concurrency: 1, maxPending: 4, minIntervalMs: 0, work, onError: unexpected });
    const accepted = ['a', 'b', 'c', 'd', 'e', 'f'].map((p) => q.offer(p, event));
    expect(accepted).toEqual([true, true, true, true, true, false]); // a runs, b–e wait
    expect(q.offer('b', event)).toBe(true); // merging into a waiting path is always possible
    let added = false;
    const adding = q.add('g', walk, q.ticket()).then(() => (added = true));
    await tick();
    expect(added).toBe(false);
    await releaseAll();
    await adding;
    await releaseAll();
    await q.barrier();
    expect(calls).toEqual([]);
  });

  it('hands work errors to onError and goes on', async () => {
    const errors: unknown[] = [];
    const done: string[] = [];
    const q = new PathQueue({
      concurrency: 2,
      maxPending: 10,
      minIntervalMs: 0,
      work: async (path) => {
        if (path === 'bad') throw new Error('boom');
        done.push(path);
      },
      onError: (err) => errors.push(err),
    });
    q.offer('bad', event);
    q.offer('good', event);
    await q.barrier();
    expect(done).toEqual(['good']);
    expect(errors).toEqual([new Error('boom')]);
  });
});
