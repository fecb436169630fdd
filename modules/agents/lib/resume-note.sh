#!/usr/bin/env bash
# The harness's note for a resumed run (A2RL_RESUME_NOTE: what was restored, the budget left): the
# next user message of an agent that continues its session, the prompt's last part for one that
# restarts. A generic line stands in when the harness gave none.
set -euo pipefail
printf '%s\n' "${A2RL_RESUME_NOTE:-The run was interrupted and has been resumed: your workspace is as it was. Continue the task within the remaining time.}"
