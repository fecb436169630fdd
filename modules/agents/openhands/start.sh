#!/usr/bin/env bash
# OpenHands adapter: the OpenHands CLI (PyPI `openhands` 1.16.0, on the OpenHands SDK 1.21.0), run
# unmodified and headless. a2rl installs it pinned in infra/python-agents/openhands (a venv of its own
# on the portable Python 3.13: the CLI declares Python 3.12 only — docs/agents.md says why it runs on
# 3.13). The prompt is the task description plus the instructions, as for every CLI agent.
#
# Where each setting comes from (agent.json's `llm` section gives the environment):
# - `--headless -t TASK`: no terminal UI, every action auto-approved (the harness already sandboxes the
#   agent); the CLI exits when the agent finishes. `--json` prints each conversation event as a JSON
#   line, as the paper's CLI wrappers keep agent.jsonl.
# - `--override-with-envs`: without it the CLI ignores LLM_API_KEY / LLM_BASE_URL / LLM_MODEL and, having
#   no ~/.openhands/agent_settings.json, refuses to start headless.
# - LLM_MODEL is a LiteLLM model name: `openai/<model>` sends OpenAI requests to LLM_BASE_URL
#   (`{gateway}/openai/v1`; Responses for the GPT-5 family, Chat Completions otherwise) with
#   LLM_API_KEY, the gateway token, as its bearer key. The harness gives LLM_MODEL as the bare driver,
#   so the prefix is added here; LiteLLM strips it again before the request.
# - The tools run on this machine, in the working directory (OPENHANDS_WORK_DIR defaults to it): the CLI
#   needs no Docker runtime. Its default agent has no browser (terminal, file editor, task tracker,
#   think, finish). Its conversation state goes to ~/.openhands (HOME is the agent home, archived).
# - OPENHANDS_SUPPRESS_BANNER hides the SDK's banner; LITELLM_LOCAL_MODEL_COST_MAP keeps LiteLLM from
#   fetching its price list from GitHub at start. The CLI also tries to clone its public skills from
#   GitHub at start; the sandbox has no network, so that fails in a second and it goes on without them.
# - Its conversation survives a resume (docs/agents.md, "Resuming a run"): it is kept as it goes in
#   ~/.openhands/conversations/<id>/, in the agent home the harness archives. It cannot be given an id at
#   launch, but the home is the run's own: on resume (A2RL_RESUMED=1) `--resume --last` continues the
#   newest conversation with the harness's note as the next message (`-t`, which headless mode needs);
#   a run lost before any conversation was written starts afresh with the prompt followed by the note.
set -euo pipefail
lib="$A2RL_AGENT_DIR/../lib"
cd "$WORKSPACE"
export LLM_MODEL="openai/$LLM_MODEL"
if [ "${A2RL_RESUMED:-}" = 1 ] && compgen -G "$HOME/.openhands/conversations/*" >/dev/null; then
  exec openhands --headless --json --override-with-envs --resume --last -t "$(bash "$lib/resume-note.sh")"
fi
exec openhands --headless --json --override-with-envs -t "$(bash "$lib/prompt.sh")"
