import { useMemo, useState } from 'preact/hooks';
import { api, type Page } from '../api';
import { fmtUsd } from '../format';
import { useAsync, usePagedList, type Async } from '../hooks';
import type { AdminKey, KeyAudit, OrgLimits } from '../types';
import { ConfirmDialog } from '../ui/Dialog';
import { LimitsDialog, LimitsFacts, limitsText } from '../ui/LimitsEditor';
import { ListFooter } from '../ui/ListFooter';
import { ErrorBox, Loaded } from '../ui/states';
import { Table, type Column } from '../ui/Table';
import { Time } from '../ui/Time';

const PERMISSIONS = ['read', 'write', 'admin'] as const;

/**
 * Keys of the signed-in organisation (docs/api.md "Admin API", keys and limits): never a secret
 * except the new key's, once, right after it is created. Each key's controls and the
 * organisation's, with this month's spend, as the API returns them; edited through its PATCH
 * routes (keys and organisations from gateway.yaml change only there).
 */
export function Keys() {
  const [revoked, setRevoked] = useState('');
  const [created, setCreated] = useState<(AdminKey & { key: string }) | null>(null);
  const [revoking, setRevoking] = useState<AdminKey | null>(null);
  const [auditOf, setAuditOf] = useState<string | null>(null);
  const [limitsOf, setLimitsOf] = useState<AdminKey | null>(null);
  const org = useAsync((signal) => api<OrgLimits>('GET', '/v1/admin/limits', { signal }), []);
  const list = usePagedList<AdminKey>((cursor, signal) => api<Page<AdminKey>>('GET', '/v1/admin/keys', { query: { revoked, cursor }, signal }), [revoked]);
  const columns = useMemo<Column<AdminKey>[]>(
    () => [
      { id: 'id', label: 'Key id', sort: (k) => k.id, render: (k) => <code>{k.id}</code> },
      { id: 'prefix', label: 'Starts with', sort: (k) => k.prefix, render: (k) => <code>{k.prefix}…</code> },
      { id: 'permissions', label: 'Permissions', sort: (k) => k.permissions.join(','), render: (k) => k.permissions.join(', ') },
      { id: 'source', label: 'Source', sort: (k) => k.source, render: (k) => (k.config_managed ? 'gateway.yaml' : k.source) },
      { id: 'created', label: 'Created', sort: (k) => k.created_at, render: (k) => <Time iso={k.created_at} short /> },
      { id: 'last_used', label: 'Last used', sort: (k) => k.last_used_at, render: (k) => <Time iso={k.last_used_at} short /> },
      {
        id: 'state',
        label: 'State',
        sort: (k) => (k.revoked ? 1 : 0),
        render: (k) =>
          k.revoked ? (
            <span class="badge status-rolled_back">
              revoked <Time iso={k.revoked_at} short />
            </span>
          ) : (
            <span class="badge status-active">active</span>
          ),
      },
      { id: 'limits', label: 'Limits and budgets', sort: (k) => limitsText(k.limits), render: (k) => limitsText(k.limits) },
      {
        id: 'spend',
        label: 'Spend this month',
        numeric: true,
        sort: (k) => org.data?.usage.keys[k.id] ?? 0,
        render: (k) => (org.data ? fmtUsd(org.data.usage.keys[k.id] ?? 0) : '…'),
      },
      {
        id: 'actions',
        label: 'Actions',
        render: (k) => (
          <span class="actions-cell">
            <button type="button" onClick={() => setAuditOf(k.id)} data-testid="key-audit">
              Audit
            </button>
            <button
              type="button"
              disabled={k.revoked || k.config_managed}
              title={k.config_managed ? 'Keys from gateway.yaml change only there' : undefined}
              onClick={() => setLimitsOf(k)}
              data-testid="key-limits"
            >
              Limits…
            </button>
            <button
              type="button"
              class="danger"
              disabled={k.revoked || k.config_managed}
              title={k.config_managed ? 'Keys from gateway.yaml change only there' : undefined}
              onClick={() => setRevoking(k)}
              data-testid="key-revoke"
            >
              Revoke…
            </button>
          </span>
        ),
      },
    ],
    [org.data],
  );
  return (
    <>
      <h1>API keys</h1>
      <OrgLimitsCard state={org} />
      <CreateKey
        onCreated={(k) => {
          setCreated(k);
          list.reload();
        }}
      />
      {created ? <NewKey k={created} onDone={() => setCreated(null)} /> : null}
      <section aria-labelledby="keys-list">
        <div class="section-head">
          <h2 id="keys-list">Keys of this organisation</h2>
          <label class="inline">
            Show
            <select value={revoked} onChange={(e) => setRevoked((e.target as HTMLSelectElement).value)}>
              <option value="">all</option>
              <option value="false">active</option>
              <option value="true">revoked</option>
            </select>
          </label>
        </div>
        {list.rows.length || !list.loading ? <Table rows={list.rows} columns={columns} rowKey={(k) => k.id} label="API keys" testId="keys-table" empty="No keys." selected={auditOf} /> : null}
        <ListFooter list={list} what="keys" />
      </section>
      {auditOf ? <Audit id={auditOf} onClose={() => setAuditOf(null)} /> : null}
      {limitsOf ? (
        <LimitsDialog
          key={limitsOf.id}
          open
          title={`Limits of key ${limitsOf.id}`}
          current={limitsOf.limits}
          withExpiry
          testId="key-limits-dialog"
          onClose={() => setLimitsOf(null)}
          onSave={async (patch) => {
            await api<AdminKey>('PATCH', `/v1/admin/keys/${encodeURIComponent(limitsOf.id)}`, { body: { limits: patch } });
            setLimitsOf(null);
            list.reload();
          }}
        />
      ) : null}
      <RevokeDialog
        k={revoking}
        onClose={() => setRevoking(null)}
        onRevoked={() => {
          setRevoking(null);
          list.reload();
        }}
      />
    </>
  );
}

function CreateKey({ onCreated }: { onCreated: (k: AdminKey & { key: string }) => void }) {
  const [perms, setPerms] = useState<Set<string>>(new Set(['read', 'write']));
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      onCreated(await api<AdminKey & { key: string }>('POST', '/v1/admin/keys', { body: { permissions: PERMISSIONS.filter((p) => perms.has(p)) } }));
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return (
    <form class="card" onSubmit={submit} data-testid="key-form" aria-labelledby="key-create">
      <h2 id="key-create">New key</h2>
      <fieldset class="checks">
        <legend>Permissions</legend>
        {PERMISSIONS.map((p) => (
          <label key={p} class="check">
            <input
              type="checkbox"
              name={p}
              checked={perms.has(p)}
              onChange={(e) => {
                const next = new Set(perms);
                if ((e.target as HTMLInputElement).checked) next.add(p);
                else next.delete(p);
                setPerms(next);
              }}
            />
            {p}
          </label>
        ))}
      </fieldset>
      {error ? <ErrorBox error={error} /> : null}
      <button type="submit" class="primary" disabled={busy}>
        {busy ? 'Creating…' : 'Create key'}
      </button>
    </form>
  );
}

/** The new key, shown this once: the gateway keeps only its hash. */
function NewKey({ k, onDone }: { k: AdminKey & { key: string }; onDone: () => void }) {
  const [copied, setCopied] = useState<string | null>(null);
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(k.key);
      setCopied('Copied.');
    } catch {
      // No clipboard (a page not served over HTTPS or localhost): select it for a manual copy.
      (document.getElementById('new-key') as HTMLInputElement | null)?.select();
      setCopied('Selected: press Ctrl+C (⌘C) to copy.');
    }
  };
  return (
    <section class="card notice-card" aria-labelledby="new-key-title" data-testid="new-key" data-id={k.id}>
      <h2 id="new-key-title">Key {k.id} created</h2>
      <p>Copy it now: it is not shown again.</p>
      <div class="row">
        <input id="new-key" class="secret" readOnly value={k.key} aria-label="The new key" data-testid="new-key-secret" onFocus={(e) => (e.target as HTMLInputElement).select()} />
        <button type="button" onClick={copy} data-testid="copy-key">
          Copy
        </button>
        <button type="button" onClick={onDone}>
          Done
        </button>
      </div>
      {copied ? (
        <p role="status" class="muted">
          {copied}
        </p>
      ) : null}
    </section>
  );
}

function RevokeDialog({ k, onClose, onRevoked }: { k: AdminKey | null; onClose: () => void; onRevoked: () => void }) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const confirm = async () => {
    if (!k) return;
    setBusy(true);
    setError(null);
    try {
      await api<AdminKey>('DELETE', `/v1/admin/keys/${encodeURIComponent(k.id)}`);
      onRevoked();
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return (
    <ConfirmDialog
      open={k !== null}
      title={`Revoke key ${k?.id ?? ''}?`}
      confirmLabel="Revoke key"
      danger
      busy={busy}
      error={error}
      testId="confirm-revoke"
      onConfirm={confirm}
      onCancel={() => (setError(null), onClose())}
    >
      <p>Requests with this key are refused (401) from now on, on every replica. This cannot be undone.</p>
    </ConfirmDialog>
  );
}

function Audit({ id, onClose }: { id: string; onClose: () => void }) {
  const list = usePagedList<KeyAudit>((cursor, signal) => api<Page<KeyAudit>>('GET', `/v1/admin/keys/${encodeURIComponent(id)}/audit`, { query: { cursor }, signal }), [id]);
  return (
    <section class="card" aria-labelledby="audit-title" data-testid="key-audit-panel">
      <div class="section-head">
        <h2 id="audit-title">
          Audit of <code>{id}</code>
        </h2>
        <button type="button" onClick={onClose}>
          Close
        </button>
      </div>
      {list.rows.length || !list.loading ? (
        <Table
          rows={list.rows}
          rowKey={(a) => a.id}
          label="Key audit"
          empty="No changes recorded."
          columns={[
            { id: 'time', label: 'When', sort: (a) => a.created_at, render: (a) => <Time iso={a.created_at} /> },
            { id: 'action', label: 'Action', sort: (a) => a.action, render: (a) => a.action },
            { id: 'actor', label: 'By', sort: (a) => a.actor, render: (a) => (a.actor_key_id ? `${a.actor} (key ${a.actor_key_id})` : a.actor) },
            { id: 'detail', label: 'Detail', render: (a) => (a.detail ? JSON.stringify(a.detail) : '') },
          ]}
        />
      ) : null}
      <ListFooter list={list} what="audit rows" />
    </section>
  );
}

/** The organisation's controls and this month's spend (docs/api.md "Admin API", limits). */
function OrgLimitsCard({ state }: { state: Async<OrgLimits> }) {
  const [editing, setEditing] = useState(false);
  return (
    <section class="card" aria-labelledby="org-limits" data-testid="org-limits">
      <div class="section-head">
        <h2 id="org-limits">Organisation limits and budgets</h2>
        {state.data && !state.data.config_managed ? (
          <button type="button" onClick={() => setEditing(true)} data-testid="org-limits-edit">
            Edit…
          </button>
        ) : null}
      </div>
      <Loaded state={state} what="Loading limits">
        {(o) => (
          <>
            <LimitsFacts limits={o.limits} />
            <p data-testid="org-spend" data-value={o.usage.spend_usd}>
              Spent in {o.usage.month}: <strong>{fmtUsd(o.usage.spend_usd)}</strong>
              {o.limits?.monthly_budget_usd !== undefined ? ` of ${fmtUsd(o.limits.monthly_budget_usd)}` : ''}; the budgets start again{' '}
              <Time iso={o.usage.reset_at} />.
            </p>
            {o.config_managed ? <p class="muted small">These come from gateway.yaml and change only there.</p> : null}
            {editing ? (
              <LimitsDialog
                open
                title="Organisation limits"
                current={o.limits}
                withExpiry={false}
                testId="org-limits-dialog"
                onClose={() => setEditing(false)}
                onSave={async (patch) => {
                  await api<OrgLimits>('PATCH', '/v1/admin/limits', { body: { limits: patch } });
                  setEditing(false);
                  state.reload();
                }}
              />
            ) : null}
          </>
        )}
      </Loaded>
    </section>
  );
}
