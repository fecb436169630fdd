#!/usr/bin/env bash
# Builds the task prompt for LLM coding agents the way the benchmark's paper does: the task
# description followed by the general instructions, both written into the workspace by the harness.
set -euo pipefail
cat "$WORKSPACE/description.md"
printf '\n\n'
cat "$WORKSPACE/instructions.md"
