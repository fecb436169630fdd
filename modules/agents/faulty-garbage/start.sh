#!/usr/bin/env bash
set -euo pipefail
ckpt="$OUTPUT_DIR/garbage"
mkdir -p "$ckpt"
printf 'this is not a manifest {' > "$ckpt/manifest.json"
printf '\x00\x01\x02 not weights \xff' > "$ckpt/weights.json"
node "$A2RL_AGENT_DIR/../lib/submit.mjs" "$ckpt"
