#!/usr/bin/env bash
# Gemini CLI adapter: the prompt is the task description plus the instructions, as in the paper.
# The harness already sandboxes the agent (bwrap), so the CLI's own approval prompts are turned off
# (`--approval-mode=yolo`, the non-deprecated spelling of the paper's `--yolo`). The model is reached
# through the run's LLM gateway: GOOGLE_GEMINI_BASE_URL, GEMINI_API_KEY (the gateway token) and
# $HOME/.gemini/settings.json (API-key auth, no folder trust prompt, no update checks, no usage
# statistics, 3 attempts per request) come from agent.json's `llm` section.
#
# Its session survives a resume (docs/agents.md, "Resuming a run"): the first launch names it
# `--session-id $A2RL_SESSION_ID`; Gemini CLI records it as it goes in
# ~/.gemini/tmp/<project>/chats/session-<time>-<first 8 hex of the id>.jsonl, in the agent home the
# harness archives (<project> stands for the working directory). On resume (A2RL_RESUMED=1) the
# newest session of the home continues with the harness's note as the next prompt: `--resume <id>`
# when it is the run's own; `--session-file` (an import under a new id) when `--resume` cannot find it
# from here (exit 42: the workspace is at another path, as on another machine) or it was itself an
# import. A run lost before any session was written starts afresh with the prompt followed by the note.
set -euo pipefail
lib="$A2RL_AGENT_DIR/../lib"
flags=(--approval-mode=yolo --model "$LLM_MODEL")
cd "$WORKSPACE"
session="${A2RL_SESSION_ID:-}"
newest="$(ls -t "$HOME"/.gemini/tmp/*/chats/session-*.json* 2>/dev/null | head -n 1 || true)"
if [ "${A2RL_RESUMED:-}" = 1 ] && [ -n "$newest" ]; then
  note="$(bash "$lib/resume-note.sh")"
  case "$newest" in
    *-"${session:0:8}".json*)
      status=0
      gemini "${flags[@]}" --resume "$session" -p "$note" || status=$?
      [ "$status" = 42 ] || exit "$status"
      ;;
  esac
  exec gemini "${flags[@]}" --session-file "$newest" -p "$note"
fi
exec gemini "${flags[@]}" ${session:+--session-id "$session"} -p "$(bash "$lib/prompt.sh")"
