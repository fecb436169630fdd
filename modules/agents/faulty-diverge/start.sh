#!/usr/bin/env bash
set -euo pipefail
exec node "$A2RL_AGENT_DIR/../reference/$TASK/diverge.mjs"
