#!/usr/bin/env bash
# Reference TRL agent: per-task code lives in $A2RL_AGENT_DIR/<task>/; agent.py writes it into code/,
# launches each step as its own process and submits what it trained.
set -euo pipefail
exec python3 "$A2RL_AGENT_DIR/agent.py"
