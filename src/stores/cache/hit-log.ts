/**
 * The hits of one sliding window of the embedded cache store, oldest first: each hit's time, cost
 * and sequence number (its member id, `m<seq>`, as the Lua scripts' sorted-set members), in flat
 * typed arrays from `head` on. Dropping the hits that left the window moves `head`, so it is O(1)
 * however many hits the window holds, and a hit allocates nothing. (An array of hit objects paid
 * `splice(0, n)`, every hit moved left, on each request: O(n) with tens of thousands of hits in a
 * busy key's minute, plus an object per hit for the garbage collector to trace for that minute.)
 */
export class HitLog {
  private at: Float64Array;
  private cost: Float64Array;
  private seq: Float64Array;
  private head = 0;
  private tail = 0;

  constructor(capacity = 8) {
    this.at = new Float64Array(capacity);
    this.cost = new Float64Array(capacity);
    this.seq = new Float64Array(capacity);
  }

  get length(): number {
    return this.tail - this.head;
  }

  /** The time of the i-th hit, oldest first. */
  timeAt(i: number): number {
    return this.at[this.head + i];
  }

  costAt(i: number): number {
    return this.cost[this.head + i];
  }

  /** The time of the newest hit (the log must not be empty). */
  newest(): number {
    return this.at[this.tail - 1];
  }

  /** Drops the hits at or before `boundary` (they left the window) and returns the sum of their costs. */
  dropUntil(boundary: number): number {
    let freed = 0;
    while (this.head < this.tail && this.at[this.head] <= boundary) freed += this.cost[this.head++];
    if (this.head === this.tail) this.head = this.tail = 0;
    return freed;
  }

  /**
   * Adds a hit in time order: at the end, unless the clock stepped back, then before the later ones
   * (the slide relies on oldest-first order).
   */
  add(at: number, cost: number, seq = 0): void {
    if (this.tail === this.at.length) this.makeRoom();
    let i = this.tail;
    while (i > this.head && this.at[i - 1] > at) i--;
    if (i < this.tail) {
      this.at.copyWithin(i + 1, i, this.tail);
      this.cost.copyWithin(i + 1, i, this.tail);
      this.seq.copyWithin(i + 1, i, this.tail);
    }
    this.at[i] = at;
    this.cost[i] = cost;
    this.seq[i] = seq;
    this.tail++;
  }

  /** The index (oldest first) of the hit with this sequence number and cost, or -1. */
  find(seq: number, cost: number): number {
    for (let i = this.head; i < this.tail; i++) if (this.seq[i] === seq && this.cost[i] === cost) return i - this.head;
    return -1;
  }

  setCost(i: number, cost: number): void {
    this.cost[this.head + i] = cost;
  }

  /** Full at the end: slides the live hits to the front when at least half is free, else doubles. */
  private makeRoom(): void {
    const n = this.tail - this.head;
    if (this.head > 0 && this.head >= n) {
      this.at.copyWithin(0, this.head, this.tail);
      this.cost.copyWithin(0, this.head, this.tail);
      this.seq.copyWithin(0, this.head, this.tail);
    } else {
      const capacity = Math.max(8, this.at.length * 2);
      const grow = (a: Float64Array) => {
        const b = new Float64Array(capacity);
        b.set(a.subarray(this.head, this.tail));
        return b;
      };
      this.at = grow(this.at);
      this.cost = grow(this.cost);
      this.seq = grow(this.seq);
    }
    this.head = 0;
    this.tail = n;
  }
}
