#!/usr/bin/env bash
# OpenCode adapter: the prompt is the task description plus the instructions, as in the paper.
# The harness already sandboxes the agent (bwrap), so the CLI's permissions all allow (opencode.json).
# Its provider `a2rl` (the run's LLM gateway) is in ~/.config/opencode/opencode.json, written from
# agent.json; OpenCode names a model `<provider>/<model>`.
set -euo pipefail
prompt="$(bash "$A2RL_AGENT_DIR/../lib/prompt.sh")"
cd "$WORKSPACE"
exec opencode run ${LLM_MODEL:+--model "a2rl/$LLM_MODEL"} "$prompt" </dev/null
