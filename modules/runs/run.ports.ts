import { randomBytes } from 'node:crypto';
import type { TaskPack } from '../../tasks/task-pack.js';
import type { AgentHandle, LaunchOptions } from './agent-process.js';
import type { SandboxPlan } from '../sandbox/capabilities.js';

/** The task packs a run can name (the registry in tasks/, or a fake in tests). */
export type TaskCatalog = (taskId: string) => TaskPack;

/** Where new run ids and run tokens come from (random in production, fixed in tests). */
export interface RunIds {
  /** `<task>-<UTC yyyymmddHHMMSS>-<6 hex>`: sortable by start, unique, safe as a path and stream name. */
  runId(taskId: string, now: Date): string;
  /** A fresh capability token for a run's grading API. */
  token(): string;
}

/** Starts the agent process tree (spawn behind a port, so the run service is testable without one). */
export interface AgentLauncher {
  launch(opts: LaunchOptions): Promise<AgentHandle>;
  /** Kills what is left of a dead harness's unsandboxed agent (its process group file). */
  killLeftovers(pidFile: string): Promise<unknown>;
  /** Whether the process is alive (a lock's owner). */
  alive(pid: number): boolean;
}

/** How this machine sandboxes agents (probed once: sandbox/capabilities.ts; fixed in tests). */
export type SandboxPlanner = () => SandboxPlan;

export const RUN_IDS = Symbol('RUN_IDS');
export const SANDBOX_PLANNER = Symbol('SANDBOX_PLANNER');
export const AGENT_LAUNCHER = Symbol('AGENT_LAUNCHER');
export const TASK_CATALOG = Symbol('TASK_CATALOG');

export const randomRunIds: RunIds = {
  runId: (taskId, now) => `${taskId}-${now.toISOString().replace(/[-:T]/g, '').slice(0, 14)}-${randomBytes(3).toString('hex')}`,
  token: () => randomBytes(24).toString('base64url'),
};

/** The harness's environment as the run pipeline reads it (credentials to redact, upstream keys, PATH, the agent's pass-through variables). */
export type Environment = Readonly<Record<string, string | undefined>>;

/** Where the run pipeline says what a person should know (unsandboxed, a key created, a check that could not run): stderr in production. */
export interface Diagnostics {
  warn(message: string): void;
}

export const ENVIRONMENT = Symbol('ENVIRONMENT');
export const DIAGNOSTICS = Symbol('DIAGNOSTICS');
