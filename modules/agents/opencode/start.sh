#!/usr/bin/env bash
# OpenCode adapter: the prompt is the task description plus the instructions, as in the paper.
# The harness already sandboxes the agent (bwrap), so the CLI's permissions all allow (opencode.json).
# Its provider `a2rl` (the run's LLM gateway) is in ~/.config/opencode/opencode.json, written from
# agent.json; OpenCode names a model `<provider>/<model>`.
#
# Its session survives a resume (docs/agents.md, "Resuming a run"): OpenCode keeps its sessions in
# its database, ~/.local/share/opencode/opencode.db, in the agent home the harness archives. It cannot
# be given a session id at launch, but the home is the run's own: on resume (A2RL_RESUMED=1) the
# newest top-level session of the home (asked of that database through `opencode db`) continues with
# `--session <id>` and the harness's note as the next message. A session belongs to the directory it
# ran in, so its directory is set to the workspace's path now (another one when the run is resumed on
# another machine). A run lost before any session was written starts afresh with the prompt followed
# by the note.
set -euo pipefail
lib="$A2RL_AGENT_DIR/../lib"
flags=(${LLM_MODEL:+--model "a2rl/$LLM_MODEL"})
cd "$WORKSPACE"
session=""
if [ "${A2RL_RESUMED:-}" = 1 ] && [ -f "$HOME/.local/share/opencode/opencode.db" ]; then
  session="$(opencode db "select id from session where parent_id is null order by time_updated desc limit 1" --format tsv </dev/null 2>/dev/null | sed -n 2p || true)"
fi
if [[ "$session" =~ ^ses_[A-Za-z0-9]+$ ]]; then
  q="'"
  opencode db "update session set directory = '${PWD//$q/$q$q}' where id = '$session'" </dev/null >/dev/null
  exec opencode run --session "$session" "${flags[@]}" "$(bash "$lib/resume-note.sh")" </dev/null
fi
exec opencode run "${flags[@]}" "$(bash "$lib/prompt.sh")" </dev/null
