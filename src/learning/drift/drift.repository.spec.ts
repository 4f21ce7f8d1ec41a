import { txidRanges } from './drift.repository';

describe('txidRanges (the request stream read in pieces)', () => {
  const counts = (...ns: Array<[number, number]>) => ns.map(([txid, n]) => ({ txid: String(txid), n }));

  it('cuts between transactions once a range holds the size, and covers [from, to) contiguously', () => {
    expect(txidRanges(counts([10, 3], [12, 3], [15, 1], [20, 5], [21, 1]), '10', '30', 4)).toEqual([
      ['10', '15'],
      ['15', '21'],
      ['21', '30'],
    ]);
  });

  it('never splits a transaction, however many traces it wrote', () => {
    expect(txidRanges(counts([5, 50_000], [6, 1]), '1', '9', 10)).toEqual([
      ['1', '6'],
      ['6', '9'],
    ]);
  });

  it('orders the transactions by their number, not their text (a range crossing a power of ten)', () => {
    expect(txidRanges(counts([1000, 4], [998, 4], [1001, 4], [999, 4]), '990', '1010', 4)).toEqual([
      ['990', '999'],
      ['999', '1000'],
      ['1000', '1001'],
      ['1001', '1010'],
    ]);
  });

  it('is one range when everything fits, or when no trace is in it', () => {
    expect(txidRanges(counts([5, 2], [6, 2]), '1', '9', 10)).toEqual([['1', '9']]);
    expect(txidRanges([], '1', '9', 10)).toEqual([['1', '9']]);
  });
});
