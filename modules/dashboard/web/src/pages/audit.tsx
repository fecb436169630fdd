import { useState } from 'preact/hooks';
import { ApiError, postJson, toSignIn, useJson } from '../api.js';
import { link } from '../router.js';

// Audit: is the run's ledger intact (signed tree heads, the last one checked, the last full
// verification), which key signed it, and its self-contained bundle for offline verification.

interface SignedHead {
  seq: number;
  size?: number;
  root?: string;
  time?: string;
  occurredAt?: string;
  valid?: boolean;
}

/** GET /runs/:id/audit. `signedHeads` is the heads themselves or their count. */
interface AuditView {
  signedHeads: SignedHead[] | number;
  lastHead: { seq: number; time: string; valid: boolean; treeSize?: number; keyId?: string } | null;
  keyId?: string | null;
  /** `sha256:<hex>` of the public key. */
  keyFingerprint: string | null;
  lastVerified: { time: string; ok: boolean; actor: string | { name?: string; kind?: string } | null } | null;
}

/** POST /runs/:id/verify: the checks of `a2rl verify` (modules/access/run-check.ts). */
interface VerifyOutcome {
  ok: boolean;
  /** Blobs checked (null for a run still open). */
  artifacts?: number | null;
  events?: number;
  treeHeads?: number;
  sealed?: boolean;
  failureCount?: number;
  failures?: (string | { message?: string; check?: string; seq?: number })[];
}

/** A long run signs many heads; the latest ones are listed. */
const MAX_HEADS_LISTED = 20;

type Status = { kind: 'idle' } | { kind: 'busy'; text: string } | { kind: 'ok'; text: string } | { kind: 'error'; text: string };

export function AuditPage({ runId }: { runId: string }) {
  const base = `/runs/${encodeURIComponent(runId)}`;
  const audit = useJson<AuditView>(`${base}/audit`);
  const [verify, setVerify] = useState<Status>({ kind: 'idle' });
  const [exported, setExported] = useState<Status>({ kind: 'idle' });

  const runVerify = async () => {
    setVerify({ kind: 'busy', text: 'Verifying: every event, signed head, blob and projection…' });
    try {
      const outcome = await postJson<VerifyOutcome>(`${base}/verify`);
      if (outcome && outcome.ok === false) setVerify({ kind: 'error', text: `Verification failed: ${failureText(outcome)}` });
      else setVerify({ kind: 'ok', text: verifiedText(outcome) });
      audit.reload();
    } catch (err) {
      setVerify({ kind: 'error', text: `Could not verify: ${message(err)}` });
    }
  };

  const runExport = async () => {
    setExported({ kind: 'busy', text: 'Preparing the bundle…' });
    try {
      const name = await downloadBundle(base, runId);
      setExported({ kind: 'ok', text: `Downloaded ${name}. Check it offline with: a2rl verify-bundle ${name}` });
    } catch (err) {
      setExported({ kind: 'error', text: message(err) });
    }
  };

  return (
    <section class="audit" aria-labelledby="audit-title">
      <h1 id="audit-title">Audit of {runId}</h1>
      <p>
        <a href={link(`/runs/${runId}`)}>Back to the run</a> · <a href={link(`/runs/${runId}/replay`)}>Replay</a>
      </p>
      {audit.error && <p role="alert">Cannot load the audit view: {audit.error}</p>}
      {!audit.data && !audit.error && <p aria-busy="true">Loading…</p>}
      {audit.data && <Facts view={audit.data} />}

      <h2>Verification</h2>
      <p data-testid="audit-status" role="status" aria-live="polite" class={`status-${verify.kind === 'idle' ? lastVerifiedKind(audit.data) : verify.kind}`}>
        {verify.kind === 'idle' ? lastVerifiedText(audit.data) : verify.text}
      </p>
      <div class="actions">
        <button type="button" data-testid="audit-verify" onClick={runVerify} disabled={verify.kind === 'busy'}>
          Verify now
        </button>{' '}
        <button type="button" data-testid="audit-export" onClick={runExport} disabled={exported.kind === 'busy'}>
          Export bundle
        </button>
      </div>
      <p data-testid="audit-export-status" role={exported.kind === 'error' ? 'alert' : 'status'} class={`status-${exported.kind}`}>
        {exported.kind === 'idle' ? 'The bundle (.tar.gz) holds the events, signed heads with proofs, the public key, artifacts and reports; exporting is recorded.' : exported.text}
      </p>
    </section>
  );
}

function Facts({ view }: { view: AuditView }) {
  const heads = Array.isArray(view.signedHeads) ? view.signedHeads : null;
  const count = heads ? heads.length : view.signedHeads;
  return (
    <dl class="audit-facts">
      <dt>Signing key{view.keyId ? ` (key id ${view.keyId})` : ''}: fingerprint</dt>
      <dd>
        <code data-testid="audit-fingerprint" class="fingerprint">
          {view.keyFingerprint ?? 'no signing key'}
        </code>
      </dd>
      <dt>Signed tree heads</dt>
      <dd>
        {count}
        {heads && heads.length > 0 && (
          <>
            {' '}
            at events {heads.length > MAX_HEADS_LISTED && '… '}
            {heads.slice(-MAX_HEADS_LISTED).map((h, i) => (
              <span key={h.seq}>
                {i > 0 && ', '}#{h.seq}
              </span>
            ))}
          </>
        )}
      </dd>
      <dt>Last signed head</dt>
      <dd>
        {view.lastHead ? (
          <>
            event #{view.lastHead.seq}{view.lastHead.treeSize !== undefined ? `, covering ${view.lastHead.treeSize} events,` : ''} at <time dateTime={view.lastHead.time}>{view.lastHead.time}</time>:{' '}
            <strong>{view.lastHead.valid ? 'signature and root valid' : 'INVALID (root or signature does not match)'}</strong>
          </>
        ) : (
          'none yet'
        )}
      </dd>
    </dl>
  );
}

function lastVerifiedText(view: AuditView | null): string {
  if (!view) return 'Not checked in this view yet.';
  const last = view.lastVerified;
  if (!last) return 'Never verified end to end. Verify now checks every event, signed head and blob, as a2rl verify does.';
  const who = typeof last.actor === 'string' ? last.actor : last.actor?.name ?? last.actor?.kind ?? 'someone';
  return `${last.ok ? 'Last verified' : 'Last verification FAILED'} at ${last.time} by ${who}.`;
}

function lastVerifiedKind(view: AuditView | null): string {
  if (!view?.lastVerified) return 'idle';
  return view.lastVerified.ok ? 'ok' : 'error';
}

function verifiedText(outcome: VerifyOutcome | null): string {
  if (!outcome || outcome.events === undefined) return 'Verified just now: the chain is intact.';
  const open = outcome.sealed === false ? ' The run is still open: events after its last signed head are checked once it is signed.' : '';
  return `Verified just now: ${outcome.events} events and ${outcome.treeHeads ?? 0} signed head${outcome.treeHeads === 1 ? '' : 's'}, every root and signature intact${typeof outcome.artifacts === 'number' ? `, ${outcome.artifacts} blob${outcome.artifacts === 1 ? '' : 's'} matching their sha256, data/ and models/ unchanged` : ''}.${open} (Projections rebuilt from zero: a2rl verify --rebuild.)`;
}

function failureText(outcome: VerifyOutcome): string {
  const failures = (outcome.failures ?? []).map((f) => (typeof f === 'string' ? f : `${f.seq !== undefined ? `event ${f.seq}: ` : ''}${f.message ?? f.check ?? JSON.stringify(f)}`));
  const more = (outcome.failureCount ?? failures.length) - failures.length;
  return failures.length ? `${failures.join('; ')}${more > 0 ? `; and ${more} more` : ''}` : 'see `a2rl verify` for details';
}

/** POSTs the export and hands the gzip to the browser as a download; refusals become one line. */
async function downloadBundle(base: string, runId: string): Promise<string> {
  const res = await fetch(`${base}/export`, { method: 'POST', credentials: 'same-origin', headers: { Accept: 'application/gzip' } });
  if (res.status === 401) {
    toSignIn();
    throw new ApiError(401, 'Sign in to export.');
  }
  if (res.status === 403) throw new ApiError(403, 'Export refused: your role cannot export (it needs an operator token).');
  if (!res.ok) throw new ApiError(res.status, `Export failed: ${await errorLine(res)}`);
  const blob = await res.blob();
  const name = fileName(res.headers.get('Content-Disposition')) ?? `${runId}.tar.gz`;
  const url = URL.createObjectURL(blob);
  try {
    const a = document.createElement('a');
    a.href = url;
    a.download = name;
    a.hidden = true;
    document.body.append(a);
    a.click();
    a.remove();
  } finally {
    setTimeout(() => URL.revokeObjectURL(url), 60_000);
  }
  return name;
}

async function errorLine(res: Response): Promise<string> {
  try {
    const body = (await res.json()) as { message?: unknown };
    if (typeof body.message === 'string') return body.message.split('\n')[0]!;
  } catch {
    // not JSON
  }
  return `${res.status} ${res.statusText}`.trim();
}

function fileName(disposition: string | null): string | null {
  const match = disposition ? /filename="?([^";]+)"?/i.exec(disposition) : null;
  return match ? match[1]!.replace(/[/\\]/g, '_') : null;
}

function message(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
