import type { ComponentChildren } from 'preact';
import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import { qs, useJson } from '../api.js';
import { HunkView, UnifiedDiff } from '../components/diff-view.js';
import { link, setQuery, useLocation } from '../router.js';
import type { Hunk, LedgerEvent, Page, RunAnalysis } from '../types.js';

// Replay: a scrubber over the run's events; at the chosen event, the workspace's files as the harness
// recorded them (GET /runs/:id/replay/tree) and one file's content with its diff to the revision
// before (GET /runs/:id/replay/file). The point and the file live in the hash (`?seq=&path=`), so a
// view can be linked to.

interface ReplayFileEntry {
  path: string;
  size: number;
  sha256: string;
  /** The event that last wrote it. */
  seq: number;
}

interface ReplayTree {
  at: { seq: number; time: string };
  files: ReplayFileEntry[];
}

/** The line diff of modules/replay (projections/run-analysis/line-diff.ts). */
interface LineDiff {
  linesAdded: number;
  linesRemoved: number;
  hunks: Hunk[];
  omittedHunks: number;
  note: string | null;
}

interface ReplayFile {
  path: string;
  at: { seq: number };
  /** The event that wrote this revision. */
  seq?: number;
  size: number;
  sha256: string;
  binary: boolean;
  content: string | null;
  /** Only the first MiB is in `content`. */
  truncated?: boolean;
  previous: { seq: number } | null;
  /** To the previous revision: hunks, or unified diff text. */
  diff: LineDiff | string | null;
}

// Layout of this page only (the shared look is styles.css): files beside the content, long text scrolled in place.
const PANES = { display: 'grid', gridTemplateColumns: 'minmax(14rem, 22rem) minmax(0, 1fr)', gap: '1.5rem', alignItems: 'start' };
const TREE = { maxHeight: '80vh', overflow: 'auto', position: 'sticky', top: '0.5rem' };
const TREE_LIST = { listStyle: 'none', paddingLeft: '1rem', margin: '0.1rem 0' };
const FILE_BUTTON = { background: 'none', border: 'none', padding: 0, font: 'inherit', color: 'var(--accent)', textDecoration: 'underline', cursor: 'pointer' };
const SCRUBBER = { display: 'flex', flexWrap: 'wrap', gap: '0.5rem 1rem', alignItems: 'center', border: '1px solid var(--line)', borderRadius: '4px' };
const RANGE = { width: 'min(40rem, 70vw)', verticalAlign: 'middle', marginLeft: '0.5rem' };
const SEQ_FIELD = { width: '6rem', marginLeft: '0.5rem' };
const CONTENT = { maxHeight: '60vh', overflow: 'auto', border: '1px solid var(--line)', borderRadius: '4px', background: 'var(--panel)', padding: '0.5rem', margin: '0.4rem 0' };

/** How long the scrubber rests before the tree and file are fetched for its value. */
const SCRUB_DEBOUNCE_MS = 200;

export function ReplayPage({ runId }: { runId: string }) {
  const location = useLocation();
  const base = `/runs/${encodeURIComponent(runId)}`;
  const run = useJson<RunAnalysis>(base);
  const lastSeq = run.data?.lastSeq ?? null;
  const querySeq = parseSeq(location.query.get('seq'));
  const seq = lastSeq === null ? null : clamp(querySeq ?? lastSeq, 0, lastSeq);
  const path = location.query.get('path');

  if (run.error) return <Shell runId={runId}><p role="alert">Cannot load the run: {run.error}</p></Shell>;
  if (lastSeq === null || seq === null) return <Shell runId={runId}><p aria-busy="true">Loading the run…</p></Shell>;
  return (
    <Shell runId={runId}>
      <Scrubber runId={runId} seq={seq} lastSeq={lastSeq} />
      <div class="replay-panes" style={PANES}>
        <FileTree base={base} seq={seq} selected={path} />
        <FileView base={base} seq={seq} path={path} />
      </div>
    </Shell>
  );
}

function Shell({ runId, children }: { runId: string; children: ComponentChildren }) {
  return (
    <section class="replay" aria-labelledby="replay-title">
      <h1 id="replay-title">Replay of {runId}</h1>
      <p>
        <a href={link(`/runs/${runId}`)}>Back to the run</a>
      </p>
      {children}
    </section>
  );
}

/**
 * The range input, one-step buttons and a number field. The range moves at once under the pointer or
 * keys; the chosen point (and so the fetches) follows it after a short rest.
 */
function Scrubber({ runId, seq, lastSeq }: { runId: string; seq: number; lastSeq: number }) {
  const [pending, setPending] = useState(seq);
  const timer = useRef<ReturnType<typeof setTimeout> | undefined>(undefined);
  useEffect(() => setPending(seq), [seq]);
  useEffect(() => () => clearTimeout(timer.current), []);

  const commit = (next: number) => {
    clearTimeout(timer.current);
    const value = clamp(next, 0, lastSeq);
    setPending(value);
    if (value !== seq) setQuery({ seq: value });
  };
  const scrub = (next: number) => {
    setPending(next);
    clearTimeout(timer.current);
    timer.current = setTimeout(() => commit(next), SCRUB_DEBOUNCE_MS);
  };

  return (
    <fieldset class="replay-scrubber" style={SCRUBBER}>
      <legend>Point in the run</legend>
      <label class="replay-range">
        <span>Event</span>
        <input
          type="range"
          style={RANGE}
          data-testid="replay-scrubber"
          min={0}
          max={lastSeq}
          step={1}
          value={pending}
          aria-valuetext={`event ${pending} of ${lastSeq}`}
          onInput={(e) => scrub(Number((e.currentTarget as HTMLInputElement).value))}
        />
      </label>
      <button type="button" onClick={() => commit(pending - 1)} disabled={pending <= 0} aria-label="Previous event">
        ◀ Prev
      </button>
      <button type="button" onClick={() => commit(pending + 1)} disabled={pending >= lastSeq} aria-label="Next event">
        Next ▶
      </button>
      <label class="replay-seq">
        <span>Seq</span>
        <input
          type="number"
          style={SEQ_FIELD}
          min={0}
          max={lastSeq}
          step={1}
          value={pending}
          onChange={(e) => {
            const value = parseSeq((e.currentTarget as HTMLInputElement).value);
            if (value !== null) commit(value);
          }}
        />
      </label>
      <span> of {lastSeq}</span>
      <EventAt runId={runId} seq={seq} />
    </fieldset>
  );
}

/** The event the view stands at: its type and time, linked to the run page's event list. */
function EventAt({ runId, seq }: { runId: string; seq: number }) {
  const page = useJson<LedgerEvent[] | Page<LedgerEvent>>(`/runs/${encodeURIComponent(runId)}/events${qs({ after_seq: seq - 1, limit: 1, format: 'json' })}`);
  const events = Array.isArray(page.data) ? page.data : page.data?.items ?? [];
  const event = events[0];
  return (
    <p class="replay-at" aria-live="polite" style={{ flexBasis: '100%', margin: 0 }}>
      {event ? (
        <>
          At event <a href={link(`/runs/${runId}`, { seq })}>#{seq} {event.type}</a> · <time dateTime={event.occurredAt}>{event.occurredAt}</time>
        </>
      ) : (
        <>At event #{seq}</>
      )}
    </p>
  );
}

interface TreeNode {
  name: string;
  path: string;
  file: ReplayFileEntry | null;
  children: TreeNode[];
}

/** Paths into folders, folders first, each level sorted by name. */
function buildTree(files: ReplayFileEntry[]): TreeNode[] {
  const root: TreeNode = { name: '', path: '', file: null, children: [] };
  for (const file of files) {
    let node = root;
    const parts = file.path.split('/');
    parts.forEach((name, i) => {
      const path = parts.slice(0, i + 1).join('/');
      let child = node.children.find((c) => c.name === name && (c.file === null) === (i < parts.length - 1));
      if (!child) {
        child = { name, path, file: i === parts.length - 1 ? file : null, children: [] };
        node.children.push(child);
      }
      node = child;
    });
  }
  const sort = (nodes: TreeNode[]): TreeNode[] =>
    nodes
      .sort((a, b) => Number(a.file !== null) - Number(b.file !== null) || a.name.localeCompare(b.name))
      .map((n) => ({ ...n, children: sort(n.children) }));
  return sort(root.children);
}

function FileTree({ base, seq, selected }: { base: string; seq: number; selected: string | null }) {
  const tree = useJson<ReplayTree>(`${base}/replay/tree${qs({ at: seq })}`);
  const nodes = useMemo(() => (tree.data ? buildTree(tree.data.files) : []), [tree.data]);
  return (
    <nav class="replay-tree" aria-label="Workspace files" data-testid="replay-tree" aria-busy={tree.loading} style={TREE}>
      <h2>Files at event {tree.data?.at.seq ?? seq}</h2>
      {tree.error && <p role="alert">Cannot load the files: {tree.error}</p>}
      {tree.data && tree.data.files.length === 0 && <p>The workspace held no recorded files yet.</p>}
      <TreeLevel nodes={nodes} selected={selected} />
    </nav>
  );
}

function TreeLevel({ nodes, selected }: { nodes: TreeNode[]; selected: string | null }) {
  if (nodes.length === 0) return null;
  return (
    <ul style={TREE_LIST}>
      {nodes.map((node) =>
        node.file ? (
          <li key={node.path}>
            <button
              type="button"
              class="replay-file-button"
              style={node.path === selected ? { ...FILE_BUTTON, fontWeight: 'bold', textDecoration: 'none', color: 'var(--fg)' } : FILE_BUTTON}
              aria-label={node.path}
              aria-pressed={node.path === selected}
              title={`${node.path} · ${node.file.size} bytes · last written at event ${node.file.seq}`}
              onClick={() => setQuery({ path: node.path })}
            >
              {node.name}
            </button>{' '}
            <small>{formatBytes(node.file.size)}</small>
          </li>
        ) : (
          <li key={`${node.path}/`}>
            <span class="replay-dir">{node.name}/</span>
            <TreeLevel nodes={node.children} selected={selected} />
          </li>
        ),
      )}
    </ul>
  );
}

function FileView({ base, seq, path }: { base: string; seq: number; path: string | null }) {
  const file = useJson<ReplayFile>(path === null ? null : `${base}/replay/file${qs({ at: seq, path })}`);
  if (path === null) {
    return (
      <div class="replay-file-pane">
        <p>Choose a file to see its content at this event and what changed since its previous revision.</p>
      </div>
    );
  }
  const data = file.data && file.data.path === path ? file.data : null;
  return (
    <div class="replay-file-pane" aria-busy={file.loading}>
      <h2>
        <code>{path}</code>
      </h2>
      {file.error && <p role="alert">{file.error}</p>}
      {data && (
        <>
          <p>
            {formatBytes(data.size)} · sha256 <code title={data.sha256}>{data.sha256.slice(0, 16)}…</code>
            {data.seq !== undefined && <> · written at event {data.seq}</>}
            {data.previous ? <> · previous revision at event {data.previous.seq}</> : <> · first revision</>}
          </p>
          <h3>Content{data.truncated ? ' (the first MiB)' : ''}</h3>
          {data.binary || data.content === null ? (
            <p data-testid="replay-file">{data.binary ? 'Binary file: content not shown.' : 'Content not recorded.'}</p>
          ) : (
            <pre class="replay-content" data-testid="replay-file" style={CONTENT} tabIndex={0} aria-label={`Content of ${path}`}>
              {data.content}
            </pre>
          )}
          <h3>Diff to the previous revision</h3>
          <div data-testid="replay-diff">
            <DiffView diff={data.diff} path={path} created={data.previous === null} />
          </div>
        </>
      )}
    </div>
  );
}

function DiffView({ diff, path, created }: { diff: LineDiff | string | null; path: string; created: boolean }) {
  if (diff === null) return <p>{created ? 'No previous revision: the file was created here.' : 'No diff recorded.'}</p>;
  if (typeof diff === 'string') return <UnifiedDiff text={diff.replace(/\n$/, '')} />;
  return (
    <>
      <p>
        <span class="added">+{diff.linesAdded}</span> <span class="removed">−{diff.linesRemoved}</span>
        {diff.note ? <span class="muted"> · {diff.note}</span> : null}
      </p>
      {diff.hunks.length > 0 && (
        <pre class="diff" tabIndex={0} aria-label={`diff of ${path}`}>
          {diff.hunks.map((hunk, i) => (
            <HunkView key={i} hunk={hunk} />
          ))}
        </pre>
      )}
      {diff.omittedHunks > 0 && <p class="muted">{diff.omittedHunks} more hunks not shown.</p>}
    </>
  );
}

function parseSeq(text: string | null): number | null {
  if (text === null || !/^\d+$/.test(text.trim())) return null;
  return Number(text);
}

function clamp(value: number, min: number, max: number): number {
  return Math.min(Math.max(value, min), max);
}

function formatBytes(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / 1024 / 1024).toFixed(1)} MiB`;
}
