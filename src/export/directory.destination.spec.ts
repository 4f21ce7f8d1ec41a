import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DirectoryDestination } from './directory.destination';
import { formatPosition, frontier, parsePartName, parsePosition, partName, START } from './export-position';
import { SCHEMAS } from './export-schema';

const row = (id: number, atUs: number): unknown[] => [1, String(id), String(atUs), 'org', 'k', 'a', 'created', null, null];

describe('DirectoryDestination', () => {
  let dir: string;
  const dest = () =>
    new DirectoryDestination({ dir, schema: SCHEMAS.key_audit, format: 'ndjson', rotateBytes: 1 << 20, rotateMs: 3_600_000, cursor: true });
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'gw-export-dir-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('a file is renamed when complete, then the cursor moves to its end', async () => {
    const d = dest();
    expect(await d.start()).toBeNull();
    const to = { lo: 0n, hi: 9n, atUs: 1_000n, id: 2n };
    await d.write([row(1, 500), row(2, 1_000)], START, to);
    expect(readdirSync(dir).filter((f) => f.startsWith('part-'))).toEqual([]);
    expect(readdirSync(dir).filter((f) => f.endsWith('.tmp'))).toHaveLength(1);
    await d.reached(frontier(9n));
    await d.close();
    expect(readdirSync(dir).sort()).toEqual(['.cursor', 'part-0-9.ndjson']);
    expect(JSON.parse(readFileSync(join(dir, '.cursor'), 'utf8'))).toEqual({ kind: 'key_audit', schema_version: 1, position: '9' });
    expect(readFileSync(join(dir, 'part-0-9.ndjson'), 'utf8').trim().split('\n')).toHaveLength(2);
  });

  it('the next file starts where the last one ended, however far empty ranges moved the position', async () => {
    const d = dest();
    await d.start();
    await d.write([row(1, 500)], START, { lo: 0n, hi: 9n, atUs: 500n, id: 1n });
    await d.reached(frontier(9n));
    await d.flush();
    // Steps with nothing of this kind, then a row.
    await d.reached(frontier(15n));
    await d.reached(frontier(20n));
    await d.write([row(2, 900)], frontier(20n), { lo: 20n, hi: 30n, atUs: 900n, id: 2n });
    await d.reached(frontier(30n));
    await d.close();
    expect(readdirSync(dir).filter((f) => f.startsWith('part-')).sort()).toEqual(['part-0-9.ndjson', 'part-9-30.ndjson']);
  });

  it('a crash between the rename and the cursor: the next start takes the end of the last complete file', async () => {
    writeFileSync(join(dir, '.cursor'), JSON.stringify({ kind: 'key_audit', schema_version: 1, position: '5' }));
    writeFileSync(join(dir, 'part-0-5.ndjson'), '');
    writeFileSync(join(dir, 'part-5-5.12.300.4.ndjson'), '');
    writeFileSync(join(dir, '.part-5.12.300.4.ndjson.tmp'), 'half a line');
    const at = await dest().start();
    expect(at && formatPosition(at)).toBe('5.12.300.4');
    // The temporary file of the killed run is gone; the cursor was repaired.
    expect(readdirSync(dir).filter((f) => f.endsWith('.tmp'))).toEqual([]);
    expect(JSON.parse(readFileSync(join(dir, '.cursor'), 'utf8')).position).toBe('5.12.300.4');
  });
});

describe('export positions', () => {
  it('format and parse: a frontier as one number, inside a step four', () => {
    expect(formatPosition(frontier(42n))).toBe('42');
    expect(parsePosition('42')).toEqual(frontier(42n));
    expect(parsePosition('7.42.1764000000000001.9')).toEqual({ lo: 7n, hi: 42n, atUs: 1764000000000001n, id: 9n });
    for (const bad of ['', '1.2', '9.3.0.0', 'x', '1.2.3.4.5', '99999999999999999999']) expect(parsePosition(bad)).toBeNull();
  });

  it('part names carry both ends', () => {
    const from = { lo: 7n, hi: 42n, atUs: 100n, id: 3n };
    expect(partName(from, frontier(42n), 'parquet')).toBe('part-7.42.100.3-42.parquet');
    expect(parsePartName('part-7.42.100.3-42.parquet')).toEqual({ from, to: frontier(42n), ext: 'parquet' });
    expect(parsePartName('.part-7.parquet.tmp')).toBeNull();
  });
});
