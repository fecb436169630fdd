import { v5 as uuidv5 } from 'uuid';

/**
 * The agent's own session across a resume (docs/agents.md, "Resuming a run"). The harness gives
 * every launch of an agent's start.sh:
 * - `A2RL_SESSION_ID`: a UUID fixed for the run, the same on every launch, so a CLI that can name its
 *   session (Claude Code `--session-id`, Gemini CLI `--session-id`) starts it under that id and finds
 *   it again on resume;
 * - on resume only, `A2RL_RESUMED=1` and `A2RL_RESUME_NOTE`: the harness's note of what was restored
 *   and what budget is left, which the agent is given as its next user message (a CLI that cannot
 *   continue its session restarts with the paper's prompt followed by the note: lib/prompt.sh).
 */

/** Fixed namespace of agent session ids: changing it would change the session id of every run. */
const AGENT_SESSION_NAMESPACE = 'a7d3c1e2-5b84-4f0e-9c6a-3e2b1d0f8a47';

/** The agent's session id for a run: a UUIDv5 of the run id, so every launch of the run derives the same one. */
export function agentSessionId(runId: string): string {
  return uuidv5(`agent-session/${runId}`, AGENT_SESSION_NAMESPACE);
}

/** Longest note handed to the agent: it travels as a command-line argument and a user message. */
export const RESUME_NOTE_MAX_CHARS = 4000;

/**
 * The session variables of one launch of start.sh: the run's session id, and on resume the marker
 * and the note (control characters other than newlines and tabs dropped, cut to RESUME_NOTE_MAX_CHARS).
 */
export function agentSessionEnv(runId: string, resume?: { note: string }): Record<string, string> {
  const env: Record<string, string> = { A2RL_SESSION_ID: agentSessionId(runId) };
  if (!resume) return env;
  const note = resume.note.replace(/[\u0000-\u0008\u000b-\u001f\u007f]/g, '').slice(0, RESUME_NOTE_MAX_CHARS);
  return { ...env, A2RL_RESUMED: '1', A2RL_RESUME_NOTE: note };
}

/** How an agent's session survives a resume (agent.json `session`). */
export type AgentSessionKind = 'resumable' | 'restart';
export const AGENT_SESSION_KINDS: readonly AgentSessionKind[] = ['resumable', 'restart'];
