import { killLeftoverProcessGroup, launchAgent } from './agent-process.js';
import type { AgentLauncher } from './run.ports.js';

/** The real launcher: the agent's process tree on this machine (agent-process.ts). */
export const processLauncher: AgentLauncher = {
  launch: launchAgent,
  killLeftovers: killLeftoverProcessGroup,
  alive(pid: number): boolean {
    try {
      process.kill(pid, 0);
      return true;
    } catch (err) {
      return (err as NodeJS.ErrnoException).code === 'EPERM';
    }
  },
};
