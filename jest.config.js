/** Unit specs live next to the code (src/**\/*.spec.ts); e2e and store suites in test/. */
const swc = JSON.parse(require('fs').readFileSync(__dirname + '/.swcrc', 'utf8'));
// ESM-only or dynamic-import packages that swc must transform to CommonJS under Jest.
const esm = ['@electric-sql', 'eventsource-parser'];
module.exports = {
  testEnvironment: 'node',
  rootDir: '.',
  testMatch: ['<rootDir>/src/**/*.spec.ts', '<rootDir>/test/**/*.e2e-spec.ts', '<rootDir>/test/**/*.spec.ts'],
  transform: { '^.+\\.(t|j|mj|cj)s$': ['@swc/jest', { ...swc, module: { type: 'commonjs', ignoreDynamic: false }, swcrc: false }] },
  transformIgnorePatterns: [`/node_modules/(?!(${esm.join('|')})/)`],
  moduleFileExtensions: ['ts', 'js', 'mjs', 'cjs', 'json'],
  testTimeout: 30000,
};
