import { defineConfig } from 'vite';

/**
 * The operator console's build (docs/architecture.md "Console"): served by the gateway under
 * /console, so every URL in the page starts there. No inlined assets (the page's
 * Content-Security-Policy allows files from this origin only), no source maps shipped.
 */
export default defineConfig({
  base: '/console/',
  publicDir: 'public',
  oxc: { jsx: { runtime: 'automatic', importSource: 'preact' } },
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    assetsDir: 'assets',
    assetsInlineLimit: 0,
    sourcemap: false,
    target: 'es2022',
    modulePreload: { polyfill: false },
    reportCompressedSize: false,
  },
});
