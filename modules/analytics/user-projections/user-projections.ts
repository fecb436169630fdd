import { createHash } from 'node:crypto';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { canonicalJson } from '../../ledger/events/canonical-json.js';
import type { EventStore } from '../../ledger/event-store.port.js';
import type { TableData } from '../table-schemas.js';
import type { UserProjectionMeta } from './definition.js';
import { ProjectionHost, UserProjectionError } from './projection-host.js';

// The user projections of a ledger (docs/analysis.md "User projections"), under
// $A2RL_HOME/projections/: `registry.json` (what is registered), each module's copy
// (`<name>-<sha256>.mjs`, so a later edit of the operator's file changes nothing until it is added
// again), and each table (`<name>.table.json`: canonical JSON of the rows, the fold's state and the
// ledger position it has read to). Nothing here touches the built-in read models: a projection that
// fails leaves its last good table, and every other table, as they were.

export interface RegistryEntry {
  name: string;
  version: number;
  sha256: string;
  module: string;
}

interface TableFile extends UserProjectionMeta {
  sha256: string;
  /** All-stream position of the last event folded (null: none yet). */
  position: string | null;
  events: number;
  state: unknown;
  rows: (string | number | boolean | null)[][];
}

export interface BuildOutcome {
  name: string;
  ok: boolean;
  rows: number;
  events: number;
  /** One line, when it failed. */
  error?: string;
}

/** Events are sent to the thread in batches of this many. */
const BATCH = 500;

export class UserProjections {
  constructor(
    readonly dir: string,
    private readonly store: EventStore,
    /** Each build's time limit (loading, folding every event, rows). */
    private readonly timeoutMs = 120_000,
  ) {}

  registry(): RegistryEntry[] {
    try {
      return (JSON.parse(readFileSync(path.join(this.dir, 'registry.json'), 'utf8')) as { projections: RegistryEntry[] }).projections;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw new Error(`${path.join(this.dir, 'registry.json')}: ${(err as Error).message}`);
    }
  }

  /**
   * Registers a module: loads it from a private copy in a thread, builds its table from the whole
   * ledger within the time limit, and only then writes the copy, the table and the registry. A
   * module that does not load, whose definition is wrong, that throws, returns bad rows or runs
   * past its limit is refused in one line, and nothing is written.
   */
  async add(file: string): Promise<BuildOutcome & { version: number; replaced: boolean }> {
    let bytes: Buffer;
    try {
      bytes = readFileSync(file);
    } catch (err) {
      throw new UserProjectionError(`cannot read ${file}: ${(err as Error).message}`);
    }
    const sha256 = createHash('sha256').update(bytes).digest('hex');
    const staging = mkdtempSync(path.join(os.tmpdir(), 'a2rl-projection-'));
    try {
      const staged = path.join(staging, `staged-${sha256}.mjs`);
      writeFileSync(staged, bytes);
      const built = await this.build(staged, path.basename(file), sha256, null);
      const { meta } = built;
      const registry = this.registry();
      const replaced = registry.some((e) => e.name === meta.name);
      mkdirSync(this.dir, { recursive: true });
      const module = `${meta.name}-${sha256}.mjs`;
      copyFileSync(staged, path.join(this.dir, module));
      this.writeTable(built.table);
      const entry: RegistryEntry = { name: meta.name, version: meta.version, sha256, module };
      this.writeRegistry([...registry.filter((e) => e.name !== meta.name), entry].sort((a, b) => (a.name < b.name ? -1 : 1)));
      this.sweep();
      return { name: meta.name, version: meta.version, ok: true, rows: built.table.rows.length, events: built.table.events, replaced };
    } finally {
      rmSync(staging, { recursive: true, force: true });
    }
  }

  /** Unregisters a projection and deletes its table and module copy. */
  remove(name: string): boolean {
    const registry = this.registry();
    if (!registry.some((e) => e.name === name)) return false;
    this.writeRegistry(registry.filter((e) => e.name !== name));
    rmSync(this.tablePath(name), { force: true });
    this.sweep();
    return true;
  }

  /**
   * Brings every registered table up to date: from its saved state and position, or from zero when
   * the module or its version changed, or with `rebuild`. Each projection fails on its own.
   */
  async catchUp(options: { rebuild?: boolean } = {}): Promise<BuildOutcome[]> {
    const outcomes: BuildOutcome[] = [];
    for (const entry of this.registry()) {
      try {
        const saved = options.rebuild ? null : this.readTable(entry.name);
        const from = saved && saved.sha256 === entry.sha256 && saved.version === entry.version ? saved : null;
        const built = await this.build(path.join(this.dir, entry.module), entry.name, entry.sha256, from);
        if (built.meta.name !== entry.name) throw new UserProjectionError(`${entry.name}: the module now names itself "${built.meta.name}"; add it again`);
        if (!from || built.table.position !== from.position || canonicalJson(built.table.rows) !== canonicalJson(from.rows)) this.writeTable(built.table);
        outcomes.push({ name: entry.name, ok: true, rows: built.table.rows.length, events: built.table.events });
      } catch (err) {
        outcomes.push({ name: entry.name, ok: false, rows: 0, events: 0, error: (err as Error).message.split('\n')[0] });
      }
    }
    return outcomes;
  }

  /** The registered projections' tables as last built (a projection never built successfully has none). */
  tables(): TableData[] {
    const out: TableData[] = [];
    for (const entry of this.registry()) {
      const t = this.readTable(entry.name);
      if (!t) continue;
      out.push({ spec: { name: t.name, columns: t.columns }, rows: t.rows });
    }
    return out;
  }

  tablePath(name: string): string {
    return path.join(this.dir, `${name}.table.json`);
  }

  private async build(file: string, label: string, sha256: string, from: TableFile | null): Promise<{ meta: UserProjectionMeta; table: TableFile }> {
    const { host, meta } = await ProjectionHost.open(file, `projection ${label}`, this.timeoutMs);
    try {
      let position = from?.position ?? null;
      let events = from?.events ?? 0;
      if (from) await host.setState(from.state);
      let batch: unknown[] = [];
      for await (const recorded of this.store.readAll({ after: position, category: 'run' })) {
        batch.push(recorded.event);
        position = recorded.position;
        events++;
        if (batch.length >= BATCH) {
          await host.feed(batch);
          batch = [];
        }
      }
      if (batch.length) await host.feed(batch);
      const { rows, state } = await host.rows();
      return { meta, table: { ...meta, sha256, position, events, state, rows } };
    } finally {
      await host.close();
    }
  }

  private readTable(name: string): TableFile | null {
    try {
      return JSON.parse(readFileSync(this.tablePath(name), 'utf8')) as TableFile;
    } catch {
      return null;
    }
  }

  /** Canonical JSON, written to a temporary file and renamed: a reader sees the old table or the new one. */
  private writeTable(table: TableFile): void {
    const file = this.tablePath(table.name);
    writeFileSync(`${file}.tmp`, canonicalJson(table));
    renameSync(`${file}.tmp`, file);
  }

  private writeRegistry(entries: RegistryEntry[]): void {
    const file = path.join(this.dir, 'registry.json');
    writeFileSync(`${file}.tmp`, `${JSON.stringify({ projections: entries }, null, 2)}\n`);
    renameSync(`${file}.tmp`, file);
  }

  /** Module copies no entry names any more. */
  private sweep(): void {
    if (!existsSync(this.dir)) return;
    const keep = new Set(this.registry().map((e) => e.module));
    for (const f of readdirSync(this.dir)) if (f.endsWith('.mjs') && !keep.has(f)) rmSync(path.join(this.dir, f), { force: true });
  }
}

export function userProjectionsDir(home: string): string {
  return path.join(home, 'projections');
}
