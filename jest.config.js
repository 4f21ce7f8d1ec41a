/** Unit specs live next to the code (src/**\/*.spec.ts); e2e and store suites in test/. */
const swc = JSON.parse(require('fs').readFileSync(__dirname + '/.swcrc', 'utf8'));
// ESM-only or dynamic-import packages that swc must transform to CommonJS under Jest. The Vercel AI
// SDK (`ai`, `@ai-sdk/*`, `@workflow/serde`) ships ESM only, and its `zod/v4/locales/en.js` import
// reaches one of zod's ESM files even from CommonJS; the client suites in test/clients load it
// with `await import()`, which swc turns into a `require` of these transformed files. The OTLP
// exporter loads `node:http` with `import()`, which Jest's module sandbox cannot run untransformed.
// The decisions export's Parquet writer (hyparquet-writer, and hyparquet under it) is ESM only.
const esm = ['@electric-sql', 'eventsource-parser', 'ai', '@ai-sdk', '@workflow', 'zod', '@opentelemetry/otlp-exporter-base', 'hyparquet', 'hyparquet-writer'];
module.exports = {
  testEnvironment: 'node',
  rootDir: '.',
  testMatch: ['<rootDir>/src/**/*.spec.ts', '<rootDir>/test/**/*.e2e-spec.ts', '<rootDir>/test/**/*.spec.ts'],
  transform: { '^.+\\.(t|j|mj|cj)s$': ['@swc/jest', { ...swc, module: { type: 'commonjs', ignoreDynamic: false }, swcrc: false }] },
  transformIgnorePatterns: [`/node_modules/(?!(${esm.join('|')})/)`],
  moduleFileExtensions: ['ts', 'js', 'mjs', 'cjs', 'json'],
  testTimeout: 30000,
};
