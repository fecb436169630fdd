import { describe, expect, it } from '@jest/globals';
import { MemoryEventStore } from '../../infra/eventstore/memory-event-store.js';
import { AccessLedger } from './access-ledger.js';
import { cliActor, recordCliAccess } from './cli-access.js';

const clock = () => new Date('2026-03-01T12:00:00.000Z');

describe('CLI actions in the access stream', () => {
  it('records a verify with a cli actor, and the audit page reads it as the last verification', async () => {
    const store = new MemoryEventStore();
    await recordCliAccess(store, { action: 'verify', target: { runId: 'run-1' }, done: true, verified: false, detail: 'x'.repeat(2000) }, clock);
    const [event] = await new AccessLedger(store, clock).events();
    expect(event).toMatchObject({ type: 'AccessRecorded', data: { action: 'verify', actor: { kind: 'cli' }, target: { runId: 'run-1' }, outcome: 'ok', verified: false } });
    expect((event.data as { detail: string }).detail).toHaveLength(1000);
    expect(await new AccessLedger(store, clock).lastVerified('run-1')).toEqual({ time: '2026-03-01T12:00:00.000Z', ok: false, actor: { kind: 'cli', name: cliActor().name } });
  });

  it('records what was not done as refused, with why', async () => {
    const store = new MemoryEventStore();
    await recordCliAccess(store, { action: 'cancel', target: { campaignId: 'cmp-1' }, done: false, detail: 'campaign cmp-1 is already completed' }, clock);
    const [event] = await new AccessLedger(store, clock).events();
    expect(event.data).toEqual({ action: 'cancel', actor: cliActor(), target: { campaignId: 'cmp-1' }, outcome: 'refused', detail: 'campaign cmp-1 is already completed' });
  });

  it('names the OS user, kept to what an actor holds', () => {
    expect(cliActor('alice')).toEqual({ kind: 'cli', id: 'alice', name: 'alice' });
    expect(cliActor('u'.repeat(300)).name).toHaveLength(200);
  });
});
