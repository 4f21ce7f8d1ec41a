import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadDir, negotiate } from './console-assets';

describe('console assets', () => {
  const both = { bodies: new Map([['identity', Buffer.alloc(1)], ['br', Buffer.alloc(1)], ['gzip', Buffer.alloc(1)]]) };
  const gzipOnly = { bodies: new Map([['identity', Buffer.alloc(1)], ['gzip', Buffer.alloc(1)]]) };

  it.each([
    [undefined, 'identity', both],
    ['', 'identity', both],
    ['gzip, deflate, br', 'br', both],
    ['br;q=0, gzip', 'gzip', both],
    ['BR;Q=0.1', 'br', both],
    ['gzip;q=0', 'identity', both],
    ['*', 'br', both],
    ['*;q=0, gzip', 'gzip', both],
    ['br', 'identity', gzipOnly],
    ['br, gzip;q=0.2', 'gzip', gzipOnly],
    ['gzip;q=nonsense', 'identity', both],
  ])('Accept-Encoding %p → %s', (accept, expected, file) => {
    expect(negotiate(accept, file)).toBe(expected);
  });

  it('reads a build with its precompressed twins; hashed assets under assets/ are immutable; unknown types are left out', () => {
    const dir = mkdtempSync(join(tmpdir(), 'console-dist-'));
    try {
      mkdirSync(join(dir, 'assets'));
      writeFileSync(join(dir, 'index.html'), '<!doctype html>');
      writeFileSync(join(dir, 'index.html.gz'), 'gz');
      writeFileSync(join(dir, 'assets', 'index-abc.js'), 'js');
      writeFileSync(join(dir, 'assets', 'index-abc.js.br'), 'br');
      writeFileSync(join(dir, 'notes.bin'), 'x');
      const files = loadDir(dir);
      expect([...files.keys()].sort()).toEqual(['assets/index-abc.js', 'index.html']);
      expect([...files.get('index.html')!.bodies.keys()]).toEqual(['identity', 'gzip']);
      expect(files.get('index.html')!.immutable).toBe(false);
      expect([...files.get('assets/index-abc.js')!.bodies.keys()]).toEqual(['identity', 'br']);
      expect(files.get('assets/index-abc.js')!.immutable).toBe(true);
      expect(files.get('assets/index-abc.js')!.type).toBe('text/javascript; charset=utf-8');
      expect(loadDir(join(dir, 'missing')).size).toBe(0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
