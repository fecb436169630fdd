// Runs the shared EventStore contract against the KurrentDB adapter through the official client.
// By default the server is the in-memory gRPC test server (test/servers/kurrentdb-test-server.ts).
// Set A2RL_TEST_KURRENTDB_URL (e.g. `kurrentdb://127.0.0.1:2113?tls=false`) to run the same suite
// against a real KurrentDB/EventStoreDB instead; every test uses fresh run ids, so a shared
// server is fine, and nothing is deleted afterwards.
import { KurrentDbEventStore } from '../../infra/eventstore/kurrentdb-event-store.js';
import { startKurrentDbTestServer } from '../servers/kurrentdb-test-server.js';
import { eventStoreContract } from './event-store.contract.js';

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
