#!/usr/bin/env node
'use strict';
/**
 * Builds the operator console (docs/architecture.md "Console") into console/dist, which the gateway
 * serves at /console: type-checks console/ (Vite strips types without checking them), bundles it
 * with Vite, then writes a .br and a .gz beside every text file so the gateway serves compressed
 * bytes without compressing per request. Prints the first load's size (gzip of the JavaScript and
 * CSS the page loads), which test/console.e2e-spec.ts holds under its budget.
 * Run by `npm run build`, `npm start` (prestart) and `npm test`.
 */
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const zlib = require('node:zlib');

const ROOT = path.join(__dirname, '..');
const CONSOLE = path.join(ROOT, 'console');
const DIST = path.join(CONSOLE, 'dist');
const COMPRESSIBLE = /\.(html|js|css|svg|json|txt)$/;

/** The JavaScript and CSS files index.html loads, as paths under console/dist. */
function firstLoadFiles(dist = DIST) {
  const html = fs.readFileSync(path.join(dist, 'index.html'), 'utf8');
  const refs = [...html.matchAll(/(?:src|href)="\/console\/([^"]+\.(?:js|css))"/g)].map((m) => m[1]);
  return [...new Set(refs)];
}

function walk(dir) {
  return fs.readdirSync(dir).flatMap((name) => {
    const full = path.join(dir, name);
    return fs.statSync(full).isDirectory() ? walk(full) : [full];
  });
}

function precompress() {
  for (const file of walk(DIST)) {
    if (!COMPRESSIBLE.test(file)) continue;
    const raw = fs.readFileSync(file);
    const gz = zlib.gzipSync(raw, { level: 9 });
    const br = zlib.brotliCompressSync(raw, {
      params: { [zlib.constants.BROTLI_PARAM_QUALITY]: 11, [zlib.constants.BROTLI_PARAM_SIZE_HINT]: raw.length },
    });
    // A variant no smaller than the file is of no use to anyone.
    if (gz.length < raw.length) fs.writeFileSync(`${file}.gz`, gz);
    if (br.length < raw.length) fs.writeFileSync(`${file}.br`, br);
  }
}

async function main() {
  const tsc = spawnSync(process.execPath, [require.resolve('typescript/bin/tsc'), '-p', path.join(CONSOLE, 'tsconfig.json')], { stdio: 'inherit' });
  if (tsc.status !== 0) throw new Error('console type check failed');
  const { build } = await import('vite');
  await build({ root: CONSOLE, configFile: path.join(CONSOLE, 'vite.config.mjs'), logLevel: 'warn' });
  precompress();
  const files = firstLoadFiles();
  const gzip = files.reduce((n, f) => n + zlib.gzipSync(fs.readFileSync(path.join(DIST, f)), { level: 9 }).length, 0);
  console.log(`console: built into console/dist; first load ${(gzip / 1024).toFixed(1)} KiB gzip (${files.join(', ')})`);
}

module.exports = { firstLoadFiles, DIST };

if (require.main === module) {
  main().catch((err) => {
    console.error(`console build failed: ${err.message}`);
    process.exit(1);
  });
}
