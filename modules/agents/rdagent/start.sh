#!/usr/bin/env bash
# R&D-Agent adapter: its RL post-training loop, `python -m rdagent.app.rl.loop`, run unmodified as the
# paper's harness runs it (agents/rdagent/start.sh there: --step-n 200 --loop-n 40). a2rl installs
# R&D-Agent 1.0.0 pinned in infra/python-agents/rdagent, a venv of its own on the machine's Python 3.11;
# `rdagent-python` is that venv's interpreter, called by name while PATH keeps the agents' training
# environment first: the loop's runner launches the code it wrote with plain `python`.
#
# Each loop: the model proposes a hypothesis (JSON), writes main.py (a python code block), the runner
# writes it to $WORKSPACE/code/, runs it there and POSTs the newest directory under $OUTPUT_DIR to
# $GRADING_SERVER_URL/submit; the model then judges the result (JSON). The paths, the task and the base
# model come from the run's environment (WORKSPACE, MODEL_PATH, DATA_PATH, OUTPUT_DIR, TASK, BASE_MODEL).
#
# Its model is reached through LiteLLM's OpenAI provider (agent.json): BACKEND names R&D-Agent's LiteLLM
# backend (its default, written out), OPENAI_API_BASE the gateway's OpenAI route and OPENAI_API_KEY the
# run's gateway token; CHAT_MODEL is `openai/<driver>` (set here from LLM_MODEL, as the OpenHands adapter
# does). EMBEDDING_MODEL points embeddings at the same route; the RL loop itself asks for none.
# R&D-Agent writes its logs and caches under the working directory: the agent home's rdagent/, not the
# workspace (the home is archived with the run).
#
# RL_SCEN (R&D-Agent's setting for the scenario class) names a2rl_rl_scenario.Scenario: its released RL
# scenario leaves two abstract methods of its base class unimplemented and cannot be constructed;
# the subclass adds them (a2rl_rl_scenario.py says how) and changes nothing else.
set -euo pipefail
export CHAT_MODEL="openai/$LLM_MODEL"
# R&D-Agent asks at temperature 0.5; OpenAI's reasoning models accept only 1 (LiteLLM refuses the call).
case "$LLM_MODEL" in gpt-5*|o1*|o3*|o4*) export CHAT_TEMPERATURE=1 ;; esac
# As the paper's wrapper: R&D-Agent's resource root is the folder above the models folder.
export RL_FILE_PATH="$(dirname "$(dirname "$MODEL_PATH")")"
export RL_SCEN=a2rl_rl_scenario.Scenario
export PYTHONPATH="$A2RL_AGENT_DIR${PYTHONPATH:+:$PYTHONPATH}"
mkdir -p "$HOME/rdagent"
cd "$HOME/rdagent"
exec rdagent-python -m rdagent.app.rl.loop --base-model "$BASE_MODEL" --benchmark "$TASK" --step-n "$STEP_N" --loop-n "$LOOP_N"
