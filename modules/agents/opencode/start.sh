#!/usr/bin/env bash
# OpenCode adapter: the prompt is the task description plus the instructions, as in the paper.
# The harness already sandboxes the agent (bwrap), so the CLI's own approval prompts are turned off.
set -euo pipefail
prompt="$(bash "$A2RL_AGENT_DIR/../lib/prompt.sh")"
cd "$WORKSPACE"
exec opencode run ${LLM_MODEL:+--model "$LLM_MODEL"} "$prompt"
