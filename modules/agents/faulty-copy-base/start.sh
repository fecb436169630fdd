#!/usr/bin/env bash
set -euo pipefail
cp -r "$MODEL_PATH" "$OUTPUT_DIR/copy-of-base"
node "$A2RL_AGENT_DIR/../lib/submit.mjs" "$OUTPUT_DIR/copy-of-base"
