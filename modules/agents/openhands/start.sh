#!/usr/bin/env bash
# OpenHands adapter (the V1 CLI: `uv tool install openhands --python 3.12`, package `openhands` 1.x on
# PyPI, github.com/OpenHands/OpenHands-CLI). Not tested by a2rl: its Python package (Python 3.12)
# cannot be installed on the machines a2rl is built and tested on.
# The prompt is the task description plus the instructions, as in the paper.
#
# Where each setting comes from (agent.json's `llm` section gives the environment):
# - `--headless -t TASK`: runs without the terminal UI, auto-approves every action (the harness already
#   sandboxes the agent) and exits when the conversation finishes (docs.openhands.dev/openhands/usage/cli/headless).
# - `--override-with-envs`: without it the CLI ignores LLM_API_KEY / LLM_BASE_URL / LLM_MODEL and, having
#   no ~/.openhands/agent_settings.json, refuses to start headless (openhands_cli/stores/agent_store.py).
# - LLM_MODEL is a LiteLLM model name: `openai/<model>` sends OpenAI-style requests to LLM_BASE_URL
#   (`{gateway}/openai/v1`: chat/completions, or responses for the GPT-5 family) with LLM_API_KEY, the
#   gateway token, as its bearer key. The harness gives LLM_MODEL as the bare driver name, so the
#   prefix is added here (not declared in agent.json, where it would collide with the harness's
#   variable). LiteLLM removes it again before the request, so a driver that is itself prefixed, such
#   as OpenRouter's `openai/gpt-4o`, reaches the upstream whole.
# - The agent runs on the local machine, in the working directory (OPENHANDS_WORK_DIR defaults to it):
#   the V1 CLI needs no Docker runtime. Its state goes to ~/.openhands (HOME is the agent home).
# - OPENHANDS_SUPPRESS_BANNER hides the SDK's banner; LITELLM_LOCAL_MODEL_COST_MAP keeps LiteLLM from
#   fetching its price list from GitHub at start (the sandbox has no network).
set -euo pipefail
prompt="$(bash "$A2RL_AGENT_DIR/../lib/prompt.sh")"
cd "$WORKSPACE"
export LLM_MODEL="openai/$LLM_MODEL"
exec openhands --headless --override-with-envs -t "$prompt"
