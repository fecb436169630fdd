#!/usr/bin/env node
// Package bin: the compiled CLI lives in dist/ (built by `npm run build`, run by `npm install` via `prepare`).
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const entry = new URL('../../dist/src/cli.js', import.meta.url);
if (!existsSync(fileURLToPath(entry))) {
  console.error('a2rl: not built yet — run `npm run build` in the a2rl checkout first');
  process.exit(2);
}
await import(entry.href);
