import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';

// The dashboard's single-page app: built by `npm run build` into <repo>/dist/dashboard-web/, which the
// API server serves at `/`. Preact through Vite's own JSX transform (oxc); no plugin needed.
const here = fileURLToPath(new URL('.', import.meta.url));
const outDir = fileURLToPath(new URL('../../../dist/dashboard-web', import.meta.url));

export default defineConfig({
  root: here,
  base: '/',
  // public/: copied as is (favicon.svg, which the server serves at /favicon.svg).
  publicDir: 'public',
  logLevel: 'warn',
  oxc: { jsx: { runtime: 'automatic', importSource: 'preact' } },
  build: {
    outDir,
    emptyOutDir: true,
    target: 'es2022',
    sourcemap: false,
    // One small bundle: no lazy chunks to wait for on a slow link.
    modulePreload: false,
    reportCompressedSize: false,
  },
});
