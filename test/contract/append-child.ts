// Writer process for the crash test of the event-store contract: appends 3-event batches to four
// runs concurrently, forever, printing `ack <runId> <lastSeq>` after each append is acknowledged.
// The parent SIGKILLs it mid-stream and checks that every acknowledged event survived untorn.
import { randomUUID } from 'node:crypto';
import { openEventStore } from '../../infra/eventstore/open-event-store.js';
import { buildEvent } from '../../modules/ledger/events/envelope.js';
import { streamName } from '../../modules/ledger/events/ids.js';

const url = process.argv[2];
const store = await openEventStore(url);
const payload = 'p'.repeat(2000);

async function writeRun(runId: string): Promise<never> {
  for (let seq = 0; ; seq += 3) {
    const events = [0, 1, 2].map((i) =>
      buildEvent('AgentStarted', runId, seq + i, '2026-01-01T00:00:00.000Z', { command: `${payload} ${seq + i}` }),
    );
    await store.append(streamName(runId), events, seq === 0 ? 'no_stream' : BigInt(seq - 1));
    process.stdout.write(`ack ${runId} ${seq + 2}\n`);
  }
}

await Promise.all([0, 1, 2, 3].map(() => writeRun(`crash-${randomUUID()}`)));
