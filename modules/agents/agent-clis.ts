import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { packageRoot } from '../settings/package-root.js';

/**
 * The agent CLIs a2rl is tested with (Claude Code, Codex CLI, Gemini CLI, OpenCode), pinned in
 * infra/agent-clis/package.json and its package-lock.json and installed into its node_modules — the
 * project's own copy, found before any on PATH (agent-registry.ts resolveCommand). `npm test` installs
 * them when they are missing or the lock changed; `a2rl agents install` does it for an operator.
 */
export function agentClisDir(): string {
  return path.join(packageRoot(), 'infra', 'agent-clis');
}

/** True when node_modules matches the lock file (npm writes its own copy of the lock there). */
export function agentClisInstalled(dir = agentClisDir()): boolean {
  const installed = path.join(dir, 'node_modules', '.package-lock.json');
  if (!existsSync(installed)) return false;
  const want = readLock(path.join(dir, 'package-lock.json'));
  const have = readLock(installed);
  // Optional packages are other platforms' binaries: absent here by design.
  return Object.entries(want).every(([key, pkg]) => key === '' || have[key]?.version === pkg.version || (pkg.optional === true && !have[key]));
}

function readLock(file: string): Record<string, { version?: string; optional?: boolean }> {
  return (JSON.parse(readFileSync(file, 'utf8')) as { packages: Record<string, { version?: string; optional?: boolean }> }).packages;
}

/** Installs infra/agent-clis at its lock's versions unless already there. */
export function installAgentClis(opts: { log?: (line: string) => void; force?: boolean } = {}): void {
  const dir = agentClisDir();
  if (!opts.force && agentClisInstalled(dir)) {
    opts.log?.(`agent CLIs already installed in ${dir}/node_modules`);
    return;
  }
  opts.log?.(`installing the agent CLIs pinned in ${dir}/package-lock.json …`);
  // `npm install` at the locked versions rather than `npm ci`: the CLIs' other-platform binaries are
  // optional packages a registry mirror may not carry, which `npm ci` refuses and `npm install` skips.
  // Claude Code's and OpenCode's postinstall put their native binary in place (allowScripts in package.json names them).
  execFileSync('npm', ['install', '--no-audit', '--no-fund'], { cwd: dir, stdio: ['ignore', 'inherit', 'inherit'] });
}
