import { KurrentDbEventStore } from '../../infra/eventstore/kurrentdb-event-store.js';
import { startKurrentDbTestServer } from './kurrentdb-test-server.js';
import { buildEvent } from '../../modules/ledger/events/envelope.js';
const agentEvent = (r: string, s: number) => buildEvent('AgentStarted', r, s, '2026-01-01T00:00:00.000Z', { command: 'x' });
const newRunId = () => 'p-' + Math.random().toString(36).slice(2);
import { streamName } from '../../modules/ledger/events/ids.js';
const srv = await startKurrentDbTestServer();
const store = await KurrentDbEventStore.open(srv.url);
const t0 = Date.now();
const run = newRunId();
await store.append(streamName(run), [0, 1, 2].map((s) => agentEvent(run, s)), 'no_stream');
const first = store.subscribeAll();
for await (const e of first) { if (e.event.seq === 1) break; }
await first.close();
console.log('closed', Date.now() - t0);
await store.close();
await srv.stop();
console.log('stopped', Date.now() - t0, process.getActiveResourcesInfo());
process.on('exit', () => console.log('exit', Date.now() - t0));
