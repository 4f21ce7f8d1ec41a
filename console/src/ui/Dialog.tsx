import type { ComponentChildren } from 'preact';
import { useEffect, useRef } from 'preact/hooks';
import { ErrorBox } from './states';

export interface ConfirmProps {
  open: boolean;
  title: string;
  children: ComponentChildren;
  confirmLabel: string;
  danger?: boolean;
  busy?: boolean;
  error?: unknown;
  onConfirm: () => void;
  onCancel: () => void;
  testId?: string;
}

/**
 * A modal confirmation (the browser's <dialog>: focus moves into it, Escape cancels, the page
 * behind cannot be reached). Nothing is sent until its confirm button is pressed.
 */
export function ConfirmDialog({ open, title, children, confirmLabel, danger, busy, error, onConfirm, onCancel, testId }: ConfirmProps) {
  const ref = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    const d = ref.current;
    if (!d) return;
    if (open && !d.open) d.showModal();
    if (!open && d.open) d.close();
  }, [open]);
  const titleId = `${testId ?? 'dialog'}-title`;
  return (
    <dialog
      ref={ref}
      aria-labelledby={titleId}
      data-testid={testId}
      onCancel={(e) => {
        e.preventDefault();
        if (!busy) onCancel();
      }}
    >
      <h2 id={titleId}>{title}</h2>
      <div class="dialog-body">{children}</div>
      {error ? <ErrorBox error={error} /> : null}
      <div class="actions">
        <button type="button" onClick={onCancel} disabled={busy}>
          Cancel
        </button>
        <button type="button" class={danger ? 'danger' : 'primary'} onClick={onConfirm} disabled={busy} data-testid={testId ? `${testId}-confirm` : undefined}>
          {busy ? 'Working…' : confirmLabel}
        </button>
      </div>
    </dialog>
  );
}
