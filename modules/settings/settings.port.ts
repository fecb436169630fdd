/**
 * The settings port: what modules may know of the configuration. The values are read and checked
 * by the app shell (src/config) and provided under SETTINGS by the composition root; modules never
 * import src/ or read the environment for these themselves.
 */
export interface Settings {
  home: string;
  ledgerUrl: string;
  artifactsUrl: string;
  readModelUrl: string;
  /** Where run workspaces are created (default `$A2RL_HOME/workspaces`). */
  workspacesDir: string;
  httpPort: number;
  httpHost: string;
  /** How often a run signs a tree head (A2RL_TREE_HEAD_EVERY): after `ms` or `events`, whichever first. Absent: the signer's defaults. */
  treeHeadEvery?: { ms: number; events: number };
}

/** Injection token of the Settings (interfaces have no runtime identity in TypeScript). */
export const SETTINGS = Symbol('A2RL_SETTINGS');

/** A configuration value is wrong; the message names the variable. */
export class ConfigError extends Error {
  override readonly name = 'ConfigError';
  constructor(readonly variable: string, message: string) {
    super(`${variable}: ${message}`);
  }
}
