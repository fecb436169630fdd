#!/usr/bin/env bash
# Reference agent: per-task code lives in $A2RL_AGENT_DIR/<task>/agent.mjs.
set -euo pipefail
entry="$A2RL_AGENT_DIR/$TASK/agent.mjs"
if [ ! -f "$entry" ]; then
  echo "reference agent: no strategy for task $TASK" >&2
  exit 2
fi
exec node "$entry"
