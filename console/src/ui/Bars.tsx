import type { ComponentChildren } from 'preact';

export interface Bar {
  key: string;
  label: ComponentChildren;
  value: number;
  text: string;
  tone?: 'selected' | 'muted' | 'warn';
  note?: ComponentChildren;
}

/** Horizontal bars (explain's candidates by score): widths relative to `max`, the value written beside. */
export function Bars({ bars, max, label, testId }: { bars: readonly Bar[]; max: number; label: string; testId?: string }) {
  const top = max > 0 ? max : 1;
  return (
    <ul class="bars" aria-label={label} data-testid={testId}>
      {bars.map((b) => (
        <li key={b.key} class={b.tone} data-key={b.key} data-value={b.value}>
          <span class="bar-label">{b.label}</span>
          <span class="bar-track" aria-hidden="true">
            <span class="bar-fill" style={{ width: `${Math.max(0, Math.min(100, (b.value / top) * 100))}%` }} />
          </span>
          <span class="bar-value">{b.text}</span>
          {b.note ? <span class="bar-note">{b.note}</span> : null}
        </li>
      ))}
    </ul>
  );
}

/** Progress toward a target (samples against min_n): a native <progress> with its numbers. */
export function Progress({ value, max, label, testId }: { value: number; max: number; label: string; testId?: string }) {
  return (
    <div class="progress" data-testid={testId} data-value={value} data-max={max}>
      <progress value={Math.min(value, max)} max={max} aria-label={label} />
      <span>
        {value.toLocaleString()} / {max.toLocaleString()}
      </span>
    </div>
  );
}
