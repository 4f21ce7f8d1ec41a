import { useState } from 'preact/hooks';
import { api } from '../api';
import { storeKey } from '../session';
import type { AdminKey } from '../types';
import type { Page } from '../api';
import { ErrorBox } from '../ui/states';

/**
 * Sign-in with an API key holding `admin`: checked with one Admin API read before it is kept
 * (sessionStorage), so a key without the permission is told so with the API's own 403.
 */
export function SignIn({ onSignedIn, notice }: { onSignedIn: () => void; notice?: string }) {
  const [key, setKey] = useState('');
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const submit = async (e: Event) => {
    e.preventDefault();
    const k = key.trim();
    if (!k) return;
    setBusy(true);
    setError(null);
    try {
      await api<Page<AdminKey>>('GET', '/v1/admin/keys', { key: k, query: { limit: 1 } });
      storeKey(k);
      setKey('');
      onSignedIn();
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return (
    <main class="signin">
      <form onSubmit={submit} class="card" aria-labelledby="signin-title" data-testid="signin">
        <h1 id="signin-title">Gateway console</h1>
        <p class="muted">Sign in with an API key that holds the <code>admin</code> permission. It is kept in this tab only and sent to this gateway's API alone.</p>
        {notice ? <p class="notice">{notice}</p> : null}
        <label>
          API key
          <input type="password" name="key" autoComplete="off" spellcheck={false} value={key} onInput={(e) => setKey((e.target as HTMLInputElement).value)} required autoFocus />
        </label>
        {error ? <ErrorBox error={error} /> : null}
        <button type="submit" class="primary" disabled={busy}>
          {busy ? 'Checking…' : 'Sign in'}
        </button>
      </form>
    </main>
  );
}
