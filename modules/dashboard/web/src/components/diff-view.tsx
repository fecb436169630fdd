import { Fragment } from 'preact';
import type { FileChangeReport, Hunk } from '../types.js';
import { EventLink } from './event-link.js';

function lineClass(line: string): string {
  if (line.startsWith('+')) return 'add';
  if (line.startsWith('-')) return 'del';
  return 'ctx';
}

export function HunkView({ hunk }: { hunk: Hunk }) {
  return (
    <div class="hunk">
      <div class="hunk-header">{hunk.header}</div>
      {hunk.lines.map((line, i) => (
        <div key={i} class={`diff-line ${lineClass(line)}`}>
          {line || ' '}
        </div>
      ))}
      {hunk.truncatedLines > 0 ? <div class="diff-line note">… {hunk.truncatedLines} more lines not shown</div> : null}
    </div>
  );
}

/** A unified diff given as text (the replay API's `diff`), coloured the same way. */
export function UnifiedDiff({ text }: { text: string }) {
  return (
    <pre class="diff" tabIndex={0} aria-label="diff">
      {text.split('\n').map((line, i) => (
        <div key={i} class={`diff-line ${line.startsWith('@@') ? 'hunk-header' : line.startsWith('+++') || line.startsWith('---') ? 'ctx' : lineClass(line)}`}>
          {line || ' '}
        </div>
      ))}
    </pre>
  );
}

/** One file's change: collapsed to its path and line counts, open to its hunks. */
export function FileDiff({ file, runId, open = false }: { file: FileChangeReport; runId: string; open?: boolean }) {
  return (
    <details class="file-diff" open={open}>
      <summary>
        <code>{file.path}</code> <span class="muted">{file.op}</span> <span class="added">+{file.linesAdded}</span> <span class="removed">−{file.linesRemoved}</span>
      </summary>
      <p class="evidence">
        Changed in{' '}
        {file.evidence.map((seq, i) => (
          <Fragment key={seq}>
            {i ? ', ' : ''}
            <EventLink runId={runId} seq={seq} />
          </Fragment>
        ))}
        {file.note ? <span class="muted"> · {file.note}</span> : null}
      </p>
      {file.hunks.length ? (
        <pre class="diff" tabIndex={0} aria-label={`diff of ${file.path}`}>
          {file.hunks.map((h, i) => (
            <HunkView key={i} hunk={h} />
          ))}
        </pre>
      ) : null}
      {file.omittedHunks > 0 ? <p class="muted">{file.omittedHunks} more hunks not shown.</p> : null}
    </details>
  );
}

/** A submission's code changes since the previous one, collapsed by default. */
export function SubmissionDiff({ files, runId, index, linesAdded, linesRemoved }: { files: FileChangeReport[]; runId: string; index: number; linesAdded: number; linesRemoved: number }) {
  return (
    <details class="submission-diff" data-testid="submission-diff">
      <summary>
        Code changes before submission {index}: {files.length} file{files.length === 1 ? '' : 's'}, <span class="added">+{linesAdded}</span>{' '}
        <span class="removed">−{linesRemoved}</span>
      </summary>
      {files.length ? files.map((f) => <FileDiff key={f.path} file={f} runId={runId} />) : <p class="muted">No code changes.</p>}
    </details>
  );
}
