import { pathToFileURL } from 'node:url';
import { parentPort, workerData } from 'node:worker_threads';
import { checkDefinition, rowCells } from './definition.js';

// The thread a user projection runs in (user-projection-host.ts): it loads the module, folds the
// events it is sent, and answers its rows. Whatever the module does wrong is reported as one message;
// a module that never returns is stopped by the host (worker.terminate()).

type Msg = { kind: 'state'; state: unknown } | { kind: 'events'; events: { runId: string; seq: number }[] } | { kind: 'rows' };

const port = parentPort!;
const fail = (message: string) => port.postMessage({ kind: 'error', message: message.split('\n')[0] });

try {
  const mod = (await import(pathToFileURL((workerData as { file: string }).file).href)) as Record<string, unknown>;
  const def = checkDefinition(mod);
  let state = def.initial();
  port.postMessage({ kind: 'ready', meta: { name: def.name, version: def.version, columns: def.columns } });
  port.on('message', (msg: Msg) => {
    try {
      if (msg.kind === 'state') {
        state = msg.state;
        port.postMessage({ kind: 'done' });
      } else if (msg.kind === 'events') {
        for (const event of msg.events) {
          try {
            state = def.evolve(state, event);
          } catch (err) {
            throw new Error(`evolve threw at run ${event.runId} seq ${event.seq}: ${(err as Error)?.message ?? String(err)}`);
          }
          if (state === undefined) throw new Error(`evolve returned undefined at run ${event.runId} seq ${event.seq} (return the state)`);
        }
        port.postMessage({ kind: 'done' });
      } else {
        let out: unknown;
        try {
          out = def.rows(state);
        } catch (err) {
          throw new Error(`rows threw: ${(err as Error)?.message ?? String(err)}`);
        }
        if (!Array.isArray(out)) throw new Error('rows must return an array of row objects');
        const meta = { name: def.name, version: def.version, columns: def.columns };
        const cells = out.map((row, i) => rowCells(meta, row, i));
        // The state is kept for the next catch-up: it must survive JSON (no functions, Maps, cycles).
        let json: string;
        try {
          json = JSON.stringify(state);
        } catch (err) {
          throw new Error(`the state is not JSON: ${(err as Error).message}`);
        }
        port.postMessage({ kind: 'rows', rows: cells, state: JSON.parse(json) as unknown });
      }
    } catch (err) {
      fail((err as Error).message);
    }
  });
} catch (err) {
  fail(`cannot load the projection: ${(err as Error)?.message ?? String(err)}`);
}
