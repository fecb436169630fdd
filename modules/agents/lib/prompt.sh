#!/usr/bin/env bash
# Builds the task prompt for LLM coding agents the way the benchmark's paper does: the task
# description followed by the general instructions, both written into the workspace by the harness.
# On a resumed run (A2RL_RESUMED=1) whose agent starts afresh, the harness's note of what was restored
# and what budget is left follows them (lib/resume-note.sh).
set -euo pipefail
here="$(dirname "${BASH_SOURCE[0]}")"
cat "$WORKSPACE/description.md"
printf '\n\n'
cat "$WORKSPACE/instructions.md"
if [ "${A2RL_RESUMED:-}" = 1 ]; then
  printf '\n\n'
  bash "$here/resume-note.sh"
fi
