#!/usr/bin/env bash
# Codex CLI adapter: the prompt is the task description plus the instructions, as in the paper.
# The harness already sandboxes the agent (bwrap), so the CLI's own approval prompts are turned off.
# Its model provider (the run's LLM gateway) is in $CODEX_HOME/config.toml, written from agent.json.
# stdin is closed: `codex exec` appends piped stdin to the prompt and would wait for it to end.
#
# Its session survives a resume (docs/agents.md, "Resuming a run"): Codex records each session as it
# goes in $CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl, in the agent home the harness
# archives. It cannot be given a session id at launch, but the home is the run's own: on resume
# (A2RL_RESUMED=1) `codex exec resume <id>` continues the newest session of the home with the
# harness's note as the next user message. Codex also indexes its sessions by absolute path
# (state_*.sqlite): when the home has moved (restored on another machine) that index points to files
# that are not there and is removed, so Codex finds the session by its rollout file. A run lost before
# any session was written starts afresh with the prompt followed by the note.
set -euo pipefail
lib="$A2RL_AGENT_DIR/../lib"
flags=(--skip-git-repo-check --dangerously-bypass-approvals-and-sandbox ${LLM_MODEL:+--model "$LLM_MODEL"})
cd "$WORKSPACE"
mkdir -p "$CODEX_HOME"
marker="$CODEX_HOME/.a2rl-home-path"
newest="$(ls "$CODEX_HOME"/sessions/*/*/*/rollout-*.jsonl 2>/dev/null | sort | tail -n 1 || true)"
if [ "${A2RL_RESUMED:-}" = 1 ] && [ -n "$newest" ]; then
  id="$(basename "$newest" .jsonl | grep -oE '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$')"
  [ "$(cat "$marker" 2>/dev/null || true)" = "$CODEX_HOME" ] || rm -f "$CODEX_HOME"/state_*.sqlite*
  printf '%s' "$CODEX_HOME" >"$marker"
  exec codex exec resume "${flags[@]}" "$id" "$(bash "$lib/resume-note.sh")" </dev/null
fi
printf '%s' "$CODEX_HOME" >"$marker"
exec codex exec "${flags[@]}" "$(bash "$lib/prompt.sh")" </dev/null
