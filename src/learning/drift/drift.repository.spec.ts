import { firstRanges, txidRanges } from './drift.repository';

describe('txidRanges (the request stream read in pieces)', () => {
  const counts = (...ns: Array<[number, number]>) => ns.map(([txid, n]) => ({ txid: String(txid), n }));
  const pieces = (...rs: Array<[string, string, number]>) => rs.map(([from, to, traces]) => ({ from, to, traces }));

  it('cuts between transactions once a range holds the size, and covers [from, to) contiguously', () => {
    expect(txidRanges(counts([10, 3], [12, 3], [15, 1], [20, 5], [21, 1]), '10', '30', 4)).toEqual(pieces(['10', '15', 6], ['15', '21', 6], ['21', '30', 1]));
  });

  it('never splits a transaction, however many traces it wrote', () => {
    expect(txidRanges(counts([5, 50_000], [6, 1]), '1', '9', 10)).toEqual(pieces(['1', '6', 50_000], ['6', '9', 1]));
  });

  it('orders the transactions by their number, not their text (a range crossing a power of ten)', () => {
    expect(txidRanges(counts([1000, 4], [998, 4], [1001, 4], [999, 4]), '990', '1010', 4)).toEqual(
      pieces(['990', '999', 4], ['999', '1000', 4], ['1000', '1001', 4], ['1001', '1010', 4]),
    );
  });

  it('is one range when everything fits, or when no trace is in it', () => {
    expect(txidRanges(counts([5, 2], [6, 2]), '1', '9', 10)).toEqual(pieces(['1', '9', 4]));
    expect(txidRanges([], '1', '9', 10)).toEqual(pieces(['1', '9', 0]));
  });
});

describe('firstRanges (a step takes a backlog over several beats)', () => {
  const r = (traces: number, i: number) => ({ from: String(i), to: String(i + 1), traces });

  it('takes ranges in order until they hold the budget', () => {
    const ranges = [4, 4, 4, 4].map(r);
    expect(firstRanges(ranges, 8)).toEqual(ranges.slice(0, 2));
    expect(firstRanges(ranges, 9)).toEqual(ranges.slice(0, 3));
    expect(firstRanges(ranges, 100)).toEqual(ranges);
  });

  it('takes at least one range, however large', () => {
    const ranges = [50_000, 1].map(r);
    expect(firstRanges(ranges, 10)).toEqual(ranges.slice(0, 1));
    expect(firstRanges([], 10)).toEqual([]);
  });
});
