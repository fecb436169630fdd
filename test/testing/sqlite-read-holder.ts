import { spawn } from 'node:child_process';
import path from 'node:path';

/**
 * Another process that creates the SQLite file `file` (rollback journal, as a fresh file is), holds a
 * read transaction on it for `ms` and exits: what an opener racing another process for a fresh file
 * meets when it switches the file to WAL. Resolves once the read is held; `ended` once it has exited.
 */
export async function holdSqliteRead(file: string, ms: number): Promise<{ ended: Promise<unknown> }> {
  const holder = spawn(process.execPath, ['-e', `
    const Database = require(${JSON.stringify(path.resolve('node_modules/better-sqlite3'))});
    const db = new Database(${JSON.stringify(file)});
    db.exec('CREATE TABLE held (x)');
    db.exec('BEGIN');
    db.prepare('SELECT count(*) FROM held').get();
    console.log('held');
    setTimeout(() => { db.exec('COMMIT'); db.close(); }, ${ms});`], { stdio: ['ignore', 'pipe', 'inherit'] });
  const ended = new Promise((resolve) => holder.on('close', resolve));
  const held = await Promise.race([new Promise((resolve) => holder.stdout.once('data', () => resolve(true))), ended.then(() => false)]);
  if (!held) throw new Error(`the process meant to hold a read on ${file} exited before it held one`);
  return { ended };
}
