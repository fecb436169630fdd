#!/usr/bin/env bash
# Codex CLI adapter: the prompt is the task description plus the instructions, as in the paper.
# The harness already sandboxes the agent (bwrap), so the CLI's own approval prompts are turned off.
# Its model provider (the run's LLM gateway) is in $CODEX_HOME/config.toml, written from agent.json.
# stdin is closed: `codex exec` appends piped stdin to the prompt and would wait for it to end.
set -euo pipefail
prompt="$(bash "$A2RL_AGENT_DIR/../lib/prompt.sh")"
cd "$WORKSPACE"
exec codex exec --skip-git-repo-check --dangerously-bypass-approvals-and-sandbox ${LLM_MODEL:+--model "$LLM_MODEL"} "$prompt" </dev/null
