import { dayOfPartition, dayPartitionName, midnightLiteral, overlapsDay, parsePartitionBound, utcDayStart } from './partition-days';

describe('decision-trace partition days', () => {
  const day = Date.UTC(2026, 10, 25);

  it('names a UTC day, and reads the day back from the name', () => {
    expect(dayPartitionName(day)).toBe('decision_traces_p20261125');
    expect(dayPartitionName(day + 86_400_000 - 1)).toBe('decision_traces_p20261125');
    expect(dayOfPartition('decision_traces_p20261125')).toBe(day);
    expect(dayOfPartition('decision_traces_default')).toBeNull();
    expect(dayOfPartition('decision_traces_before_20261127')).toBeNull();
  });

  it('bounds a day at 00:00 UTC, with the offset written out', () => {
    expect(utcDayStart(day + 86_400_000 - 1)).toBe(day);
    expect(utcDayStart(day)).toBe(day);
    expect(midnightLiteral(day)).toBe("timestamptz '2026-11-25 00:00:00+00'");
  });

  it('reads the bounds Postgres prints in UTC', () => {
    expect(parsePartitionBound("FOR VALUES FROM ('2026-11-25 00:00:00+00') TO ('2026-11-26 00:00:00+00')")).toEqual({
      kind: 'range',
      from: day,
      to: day + 86_400_000,
    });
    expect(parsePartitionBound("FOR VALUES FROM (MINVALUE) TO ('2026-11-27 00:00:00+00')")).toEqual({ kind: 'range', from: null, to: day + 2 * 86_400_000 });
    expect(parsePartitionBound("FOR VALUES FROM ('2026-11-25 06:30:00.5+00') TO (MAXVALUE)")).toEqual({ kind: 'range', from: day + 6.5 * 3_600_000 + 500, to: null });
    expect(parsePartitionBound('DEFAULT')).toEqual({ kind: 'default' });
    expect(parsePartitionBound("FOR VALUES IN ('a')")).toBeNull();
  });

  it('tells whether a range covers part of a day', () => {
    const next = day + 86_400_000;
    expect(overlapsDay({ from: day, to: next }, day)).toBe(true);
    expect(overlapsDay({ from: null, to: next }, day)).toBe(true);
    expect(overlapsDay({ from: null, to: day }, day)).toBe(false);
    expect(overlapsDay({ from: next, to: null }, day)).toBe(false);
    expect(overlapsDay({ from: day - 1, to: day + 1 }, day)).toBe(true);
  });
});
