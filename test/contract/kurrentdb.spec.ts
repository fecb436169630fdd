// Runs the shared EventStore contract against the KurrentDB adapter through the official client.
// By default the server is the in-memory gRPC test server (test/servers/kurrentdb-test-server.ts).
// Set A2RL_TEST_KURRENTDB_URL (e.g. `kurrentdb://127.0.0.1:2113?tls=false`) to run the same suite
// against a real KurrentDB/EventStoreDB instead; every test uses fresh run ids, so a shared
// server is fine, and nothing is deleted afterwards.
import { describe, expect, it } from '@jest/globals';
import { KurrentDbEventStore } from '../../infra/eventstore/kurrentdb-event-store.js';
import { EventStoreUnavailableError } from '../../modules/ledger/errors.js';
import { streamName } from '../../modules/ledger/events/ids.js';
import { startKurrentDbTestServer } from '../servers/kurrentdb-test-server.js';
import { agentEvent, eventStoreContract, newRunId } from './event-store.contract.js';

eventStoreContract('kurrentdb', async () => {
  const external = process.env.A2RL_TEST_KURRENTDB_URL;
  const server = external ? null : await startKurrentDbTestServer();
  const url = external ?? server!.url;
  return {
    url,
    open: () => KurrentDbEventStore.open(url),
    cleanup: async () => server?.stop(),
  };
});

// These need a server they can stop, so they always use the test server.
describe('KurrentDbEventStore specifics', () => {
  it('accepts esdb:// connection strings as well as kurrentdb://', async () => {
    const server = await startKurrentDbTestServer();
    try {
      const store = await KurrentDbEventStore.open(server.url.replace(/^kurrentdb:/, 'esdb:'));
      expect(await store.streamRevision('run-nobody')).toBeNull();
      await store.close();
    } finally {
      await server.stop();
    }
  });

  it('reports EventStoreUnavailableError when the server is down, at open and on append', async () => {
    const server = await startKurrentDbTestServer();
    const store = await KurrentDbEventStore.open(server.url);
    await server.stop();
    const run = newRunId();
    await expect(store.append(streamName(run), [agentEvent(run, 0)], 'no_stream')).rejects.toBeInstanceOf(EventStoreUnavailableError);
    await store.close();
    await expect(KurrentDbEventStore.open(server.url)).rejects.toThrow(/kurrentdb event store unavailable/);
  });
});
