import { randomBytes } from 'node:crypto';
import type { BreakerState } from '../../stores/cache/cache-store';
import type { SharedOrLocalCache } from '../shared-or-local-cache';

/** The failure that made a breaker open: the upstream error's kind and status (never its body). */
export interface BreakerCause {
  error: string;
  status: number | null;
}

/** One change of a provider's breaker that a replica's own step made (docs/api.md "Admin API", providers). */
export interface BreakerTransition {
  provider: string;
  /** `open` (opened or re-opened), `half_open` (its open time over, this replica took the probe), `closed` (the probe succeeded). */
  to: BreakerState;
  /** The state it left: `closed` or `half_open` (a failed probe) for an opening, `open` for the probe, `half_open` for a close. */
  from: BreakerState;
  at: string;
  /** For an opening: the failure this replica reported that opened it; null otherwise (or when unknown). */
  cause: BreakerCause | null;
  openUntil: string | null;
  /** Consecutive openings without a successful probe (after this change). */
  openings: number;
  /** Which replica made it: a random id per process. */
  replica: string;
}

export interface BreakerTransitionsOptions {
  /** Transitions this replica keeps in memory, all providers together (oldest out first). */
  capacity: number;
  /** Transitions kept per provider in the cache store. */
  sharedPerProvider: number;
  /** How long the cache store keeps a provider's list after its last change. */
  sharedTtlMs: number;
  now: () => number;
}

export const DEFAULT_TRANSITIONS: Omit<BreakerTransitionsOptions, 'now'> = { capacity: 500, sharedPerProvider: 50, sharedTtlMs: 7 * 86_400_000 };

/** Beside the breaker's own key, under the provider's hash tag. */
export const transitionsKey = (providerId: string): string => `cb:{provider:${providerId}}:transitions`;

const TOPIC = 'cache-store:circuit-breaker-transitions';
const same = (a: BreakerTransition, b: BreakerTransition) => a.replica === b.replica && a.at === b.at && a.to === b.to && a.provider === b.provider;

/**
 * Recent breaker transitions, for operators. Each replica records the changes its own steps make
 * (an opening with the failure that caused it, the probe it took, the probe's success) in a bounded
 * ring in memory, and appends them to a short per-provider list in the cache store, off the request
 * path and best effort: a read-modify-write, so two replicas writing the same provider at the same
 * instant can lose one entry, and with the cache store down only the ring keeps them. A reader gets
 * the shared list merged with its own ring: with Redis, every replica's transitions; without it (or
 * while it is down), this replica's only. Changes other replicas made reach this replica's breaker
 * view through its refresh but are not recorded here a second time.
 */
export class BreakerTransitions {
  readonly replica = randomBytes(6).toString('hex');
  private readonly ring: BreakerTransition[] = [];

  constructor(
    private readonly store: SharedOrLocalCache,
    private readonly o: BreakerTransitionsOptions,
  ) {}

  /** Records a transition; the shared append is not awaited (never delays the step that made it). */
  note(t: Omit<BreakerTransition, 'replica' | 'at'>): void {
    const entry: BreakerTransition = { ...t, at: new Date(this.o.now()).toISOString(), replica: this.replica };
    this.ring.push(entry);
    if (this.ring.length > this.o.capacity) this.ring.splice(0, this.ring.length - this.o.capacity);
    void this.append(entry);
  }

  /** The provider's transitions, newest first: the cache store's list merged with this replica's ring. */
  async recent(providerId: string, limit: number): Promise<BreakerTransition[]> {
    const local = this.ring.filter((t) => t.provider === providerId);
    const shared = (await this.store.tryShared(async (s) => parse(await s.get(transitionsKey(providerId))), TOPIC)) ?? [];
    const merged = [...shared.filter((s) => s.provider === providerId)];
    for (const t of local) if (!merged.some((m) => same(m, t))) merged.push(t);
    return merged.sort((a, b) => (a.at < b.at ? 1 : a.at > b.at ? -1 : 0)).slice(0, limit);
  }

  private async append(t: BreakerTransition): Promise<void> {
    const key = transitionsKey(t.provider);
    await this.store.tryShared(async (s) => {
      const list = [t, ...parse(await s.get(key))].slice(0, this.o.sharedPerProvider);
      await s.set(key, JSON.stringify(list), this.o.sharedTtlMs);
      return true;
    }, TOPIC);
  }
}

/** A stored list, read defensively: anything that is not a list of transitions reads as none. */
function parse(text: string | null): BreakerTransition[] {
  if (!text) return [];
  try {
    const v = JSON.parse(text) as unknown;
    return Array.isArray(v) ? v.filter((x): x is BreakerTransition => x !== null && typeof x === 'object' && typeof x.at === 'string' && typeof x.to === 'string') : [];
  } catch {
    return [];
  }
}
