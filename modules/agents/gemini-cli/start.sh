#!/usr/bin/env bash
# Gemini CLI adapter: the prompt is the task description plus the instructions, as in the paper.
# The harness already sandboxes the agent (bwrap), so the CLI's own approval prompts are turned off
# (`--approval-mode=yolo`, the non-deprecated spelling of the paper's `--yolo`). The model is reached
# through the run's LLM gateway: GOOGLE_GEMINI_BASE_URL, GEMINI_API_KEY (the gateway token) and
# $HOME/.gemini/settings.json (API-key auth, no folder trust prompt, no update checks, no usage
# statistics, 3 attempts per request) come from agent.json's `llm` section.
set -euo pipefail
prompt="$(bash "$A2RL_AGENT_DIR/../lib/prompt.sh")"
cd "$WORKSPACE"
exec gemini --approval-mode=yolo --model "$LLM_MODEL" -p "$prompt"
