import { useState } from 'preact/hooks';
import { fmtInt, fmtUsd } from '../format';
import type { Limits } from '../types';
import { ConfirmDialog } from './Dialog';
import { Time } from './Time';

type Field = 'requests_per_minute' | 'tokens_per_minute' | 'monthly_budget_usd' | 'models' | 'expires_at';

/** The controls as one line: what the API returned, nothing computed. */
export function limitsText(limits: Limits | null): string {
  if (limits === null || Object.keys(limits).length === 0) return 'none (gateway defaults)';
  const parts: string[] = [];
  if (limits.requests_per_minute !== undefined) parts.push(`${fmtInt(limits.requests_per_minute)} req/min`);
  if (limits.tokens_per_minute !== undefined) parts.push(`${fmtInt(limits.tokens_per_minute)} tokens/min`);
  if (limits.monthly_budget_usd !== undefined) parts.push(`${fmtUsd(limits.monthly_budget_usd)}/month`);
  if (limits.models !== undefined) parts.push(`models: ${limits.models.join(', ')}`);
  if (limits.expires_at !== undefined) parts.push(`expires ${new Date(limits.expires_at).toLocaleString()}`);
  return parts.join(' · ');
}

export function LimitsFacts({ limits }: { limits: Limits | null }) {
  return (
    <dl class="facts" data-testid="limits-facts">
      <div>
        <dt>Requests per minute</dt>
        <dd data-control="requests_per_minute">{limits?.requests_per_minute !== undefined ? fmtInt(limits.requests_per_minute) : 'no limit'}</dd>
      </div>
      <div>
        <dt>Tokens per minute</dt>
        <dd data-control="tokens_per_minute">{limits?.tokens_per_minute !== undefined ? fmtInt(limits.tokens_per_minute) : 'no limit'}</dd>
      </div>
      <div>
        <dt>Monthly budget</dt>
        <dd data-control="monthly_budget_usd">{limits?.monthly_budget_usd !== undefined ? fmtUsd(limits.monthly_budget_usd) : 'no budget'}</dd>
      </div>
      <div>
        <dt>Models allowed</dt>
        <dd data-control="models">{limits?.models ? limits.models.join(', ') : 'all'}</dd>
      </div>
      {limits?.expires_at !== undefined ? (
        <div>
          <dt>Expires</dt>
          <dd data-control="expires_at">
            <Time iso={limits.expires_at} />
          </dd>
        </div>
      ) : null}
    </dl>
  );
}

const toText = (l: Limits | null, f: Field): string => {
  const v = l?.[f];
  return v === undefined ? '' : Array.isArray(v) ? v.join(', ') : String(v);
};

/**
 * The controls as the API takes them (docs/api.md "Admin API", limits): a merge patch where an
 * emptied field is sent as null (that control removed) and the others as typed; the API checks
 * every value and names the field it refuses.
 */
function patchOf(text: Record<Field, string>, fields: readonly Field[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const f of fields) {
    const v = text[f].trim();
    if (v === '') out[f] = null;
    else if (f === 'models') out[f] = v.split(',').map((s) => s.trim()).filter(Boolean);
    else if (f === 'expires_at') out[f] = v;
    else out[f] = Number(v);
  }
  return out;
}

export interface LimitsDialogProps {
  title: string;
  current: Limits | null;
  withExpiry: boolean;
  open: boolean;
  onSave: (patch: Record<string, unknown>) => Promise<void>;
  onClose: () => void;
  testId: string;
}

/** Edits a key's or the organisation's controls in a dialog; nothing is sent before Save. */
export function LimitsDialog({ title, current, withExpiry, open, onSave, onClose, testId }: LimitsDialogProps) {
  const fields: Field[] = ['requests_per_minute', 'tokens_per_minute', 'monthly_budget_usd', 'models', ...(withExpiry ? (['expires_at'] as const) : [])];
  const [text, setText] = useState<Record<Field, string>>(() => Object.fromEntries(fields.map((f) => [f, toText(current, f)])) as Record<Field, string>);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const set = (f: Field) => (e: Event) => setText({ ...text, [f]: (e.target as HTMLInputElement).value });
  const save = async () => {
    setBusy(true);
    setError(null);
    try {
      await onSave(patchOf(text, fields));
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return (
    <ConfirmDialog open={open} title={title} confirmLabel="Save limits" busy={busy} error={error} onConfirm={save} onCancel={onClose} testId={testId}>
      <div class="grid-form">
        <label>
          Requests per minute
          <input name="requests_per_minute" type="number" min={0} step={1} inputMode="numeric" value={text.requests_per_minute} onInput={set('requests_per_minute')} placeholder="no limit" />
        </label>
        <label>
          Tokens per minute
          <input name="tokens_per_minute" type="number" min={0} step={1} inputMode="numeric" value={text.tokens_per_minute} onInput={set('tokens_per_minute')} placeholder="no limit" />
        </label>
        <label>
          Monthly budget (USD)
          <input name="monthly_budget_usd" type="number" min={0} step="any" inputMode="decimal" value={text.monthly_budget_usd} onInput={set('monthly_budget_usd')} placeholder="no budget" />
        </label>
        <label>
          Models allowed (comma-separated)
          <input name="models" value={text.models} onInput={set('models')} placeholder="all" spellcheck={false} />
        </label>
        {withExpiry ? (
          <label>
            Expires at (ISO 8601 with a zone)
            <input name="expires_at" value={text.expires_at} onInput={set('expires_at')} placeholder="e.g. 2027-01-31T00:00:00Z" spellcheck={false} />
          </label>
        ) : null}
      </div>
      <p class="muted small">An empty field removes that control.</p>
    </ConfirmDialog>
  );
}
