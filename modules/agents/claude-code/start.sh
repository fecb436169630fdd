#!/usr/bin/env bash
# Claude Code adapter: the prompt is the task description plus the instructions, as in the paper,
# whose wrapper runs `claude --print --verbose --output-format stream-json --dangerously-skip-permissions`.
#
# agent.json's llm.env, which the harness puts in this script's environment (nothing else reaches it):
#   ANTHROPIC_BASE_URL, ANTHROPIC_API_KEY   the run's LLM gateway and its per-run token (sent as x-api-key;
#                                           in -p mode an API key is used without asking)
#   IS_SANDBOX=1                            lets --dangerously-skip-permissions run when the uid is 0
#                                           (the sandbox's agent user is not root; harmless then)
#   CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1, DISABLE_AUTOUPDATER=1, DISABLE_TELEMETRY=1,
#   DISABLE_ERROR_REPORTING=1               no update checks, telemetry, error reports or the
#                                           HEAD /api/hello probe: the gateway is its only network
#   CLAUDE_CODE_MAX_RETRIES=3               a failing gateway or upstream ends the CLI in seconds
#                                           (default 10 retries with back-off: about 3 minutes)
#   API_TIMEOUT_MS=900000                   waits longer than the gateway's 10-min upstream timeout, so a
#                                           silent upstream ends as the gateway's 504 (upstream_timeout),
#                                           not as the CLI hanging up first (default 600000)
#   BASH_MAX_TIMEOUT_MS=36000000            the paper's limit: a training command may run 10 h
#                                           (Claude Code's own cap is 10 min)
# No config file is needed: -p skips onboarding and the workspace trust dialog.
#
# Flags: -p runs one prompt headless and exits when the agent ends its turn; the harness already
# sandboxes the agent, so --dangerously-skip-permissions turns off the CLI's approval prompts (no
# one could answer them); --output-format stream-json (with --verbose, which it requires) prints
# each message and tool result as a JSON line, as the paper's agent.jsonl.
#
# Its session survives a resume (docs/agents.md, "Resuming a run"): the first launch names it
# `--session-id $A2RL_SESSION_ID` (fixed for the run by the harness); Claude Code keeps its transcript
# in ~/.claude/projects/<workspace path>/<id>.jsonl, written as the conversation goes, in the agent
# home the harness archives. On resume (A2RL_RESUMED=1) `--resume <id>` continues that conversation
# with the harness's note as the next user message; a run lost before the transcript was written
# starts afresh with the prompt followed by the note.
set -euo pipefail
lib="$A2RL_AGENT_DIR/../lib"
flags=(--dangerously-skip-permissions --model "$LLM_MODEL" --output-format stream-json --verbose)
cd "$WORKSPACE"
session="${A2RL_SESSION_ID:-}"
if [ -n "$session" ] && [ "${A2RL_RESUMED:-}" = 1 ] && compgen -G "$HOME/.claude/projects/*/$session.jsonl" >/dev/null; then
  exec claude -p "$(bash "$lib/resume-note.sh")" --resume "$session" "${flags[@]}"
fi
exec claude -p "$(bash "$lib/prompt.sh")" ${session:+--session-id "$session"} "${flags[@]}"
