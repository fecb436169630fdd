#!/usr/bin/env bash
# Codex CLI adapter: the prompt is the task description plus the instructions, as in the paper.
# The harness already sandboxes the agent (bwrap), so the CLI's own approval prompts are turned off.
set -euo pipefail
prompt="$(bash "$A2RL_AGENT_DIR/../lib/prompt.sh")"
cd "$WORKSPACE"
exec codex exec --skip-git-repo-check --dangerously-bypass-approvals-and-sandbox ${LLM_MODEL:+--model "$LLM_MODEL"} "$prompt"
