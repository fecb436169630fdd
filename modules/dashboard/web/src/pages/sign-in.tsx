import { useState } from 'preact/hooks';
import { ApiError, postJson, useJson } from '../api.js';
import { navigate, useLocation } from '../router.js';

// Sign-in: trade an API token (`a2rl tokens create --role viewer|operator`) for an HttpOnly session
// cookie (POST /auth/login), then go back to the page that sent the user here (`?next=`).

interface Me {
  required: boolean;
  identity: { kind: 'token' | 'proxy' | 'anonymous'; name: string; role: 'viewer' | 'operator' } | null;
}

export function SignInPage(_props: {}) {
  const location = useLocation();
  const next = safeNext(location.query.get('next'));
  const me = useJson<Me>('/auth/me');
  const [token, setToken] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);

  const submit = async (e: Event) => {
    e.preventDefault();
    if (!token.trim()) {
      setError('Paste a token first.');
      return;
    }
    setBusy(true);
    setError(null);
    try {
      await postJson('/auth/login', { token: token.trim() });
      setToken('');
      me.reload();
      navigate(next);
    } catch (err) {
      setError(err instanceof ApiError && (err.status === 401 || err.status === 403) ? 'That token was not accepted: it is unknown, expired or revoked.' : `Could not sign in: ${err instanceof Error ? err.message : String(err)}`);
    } finally {
      setBusy(false);
    }
  };

  const signOut = async () => {
    try {
      await postJson('/auth/logout');
    } finally {
      me.reload();
    }
  };

  const identity = me.data?.identity ?? null;
  return (
    <section class="sign-in" aria-labelledby="sign-in-title">
      <h1 id="sign-in-title">Sign in</h1>
      <p data-testid="sign-in-identity" role="status">
        {me.error ? `Cannot tell who you are: ${me.error}` : !me.data ? 'Checking…' : identityText(me.data)}
      </p>
      {identity?.kind === 'token' && (
        <p>
          <button type="button" onClick={signOut}>
            Sign out
          </button>
        </p>
      )}
      <form onSubmit={submit} class="sign-in-form" style={{ display: 'flex', flexWrap: 'wrap', gap: '0.5rem', alignItems: 'center', maxWidth: '48rem' }}>
        <label for="sign-in-token">API token</label>
        <input
          id="sign-in-token"
          style={{ flex: '1 1 18rem', padding: '0.3rem' }}
          name="token"
          type="password"
          autocomplete="off"
          spellcheck={false}
          required
          aria-describedby="sign-in-help"
          aria-invalid={error !== null}
          value={token}
          onInput={(e) => setToken((e.currentTarget as HTMLInputElement).value)}
        />
        <button type="submit" disabled={busy}>
          {busy ? 'Signing in…' : 'Sign in'}
        </button>
        <p id="sign-in-help" class="help" style={{ flexBasis: '100%' }}>
          An operator makes one with <code>a2rl tokens create --name you --role viewer</code>. The token is kept in an HttpOnly cookie for this site, never in the page.
        </p>
        {error && (
          <p role="alert" class="status-error" style={{ flexBasis: '100%' }}>
            {error}
          </p>
        )}
      </form>
    </section>
  );
}

function identityText(me: Me): string {
  const id = me.identity;
  if (!id || id.kind === 'anonymous') return me.required ? 'Not signed in. This server needs a token.' : `Not signed in; this server does not need a token here${id ? ` (you act as ${id.role})` : ''}.`;
  const via = id.kind === 'proxy' ? 'through the reverse proxy' : 'with a token';
  return `Signed in as ${id.name} (${id.role}) ${via}.`;
}

/** Only a path of this dashboard, never another origin or the sign-in page itself. */
function safeNext(next: string | null): string {
  if (!next || !next.startsWith('/') || next.startsWith('//') || next.startsWith('/sign-in')) return '/runs';
  return next;
}
