import { parentPort, workerData } from 'node:worker_threads';
import { SqliteWriter, toWireError, type WireBatch, type WireResult } from './sqlite-writer.js';

// The SQLite ledger's writer thread: commits (and fsyncs) off the harness's main thread, one batch
// at a time, in the order the store sends them. Messages: a WireBatch in, a WireResult out; `null`
// in closes the connection and ends the thread.

const port = parentPort!;
const { file } = workerData as { file: string };
let writer: SqliteWriter | undefined;

port.on('message', (batch: WireBatch | null) => {
  if (batch === null) {
    writer?.close();
    port.close();
    return;
  }
  let result: WireResult;
  try {
    writer ??= new SqliteWriter(file);
    result = writer.write(batch);
  } catch (error) {
    result = { unavailable: toWireError(error) }; // the connection could not be opened
  }
  port.postMessage(result);
});
