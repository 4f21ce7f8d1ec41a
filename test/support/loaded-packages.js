'use strict';
/**
 * A preload (`node -r`) for process tests: when the main thread exits, writes the names of the npm
 * packages it loaded (sorted, as JSON) to LOADED_PACKAGES_OUT. Worker threads inherit the preload and
 * write nothing: the question is what the gateway's own thread holds.
 */
const { isMainThread } = require('node:worker_threads');

if (isMainThread && process.env.LOADED_PACKAGES_OUT) {
  const out = process.env.LOADED_PACKAGES_OUT;
  process.on('exit', () => {
    const names = new Set();
    for (const file of Object.keys(require.cache)) {
      const m = /node_modules[\\/]((?:@[^\\/]+[\\/])?[^\\/]+)/.exec(file);
      if (m) names.add(m[1].replace(/\\/g, '/'));
    }
    require('node:fs').writeFileSync(out, JSON.stringify([...names].sort()));
  });
}
