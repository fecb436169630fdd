#!/usr/bin/env bash
# Writes a training script that raises at start-up, runs it, and gives up when it fails.
set -uo pipefail
mkdir -p "$WORKSPACE/code"
cat > "$WORKSPACE/code/train_sft.mjs" <<'JS'
import { readFileSync } from 'node:fs';
const rows = readFileSync(`${process.env.DATA_PATH}/train.jsonl`, 'utf8').split('\n');
console.log(`loaded ${rows.length} rows`);
const model = undefined;
model.fit(rows); // TypeError: the bug this agent never fixes
JS
node "$WORKSPACE/code/train_sft.mjs"
status=$?
echo "faulty-crash: training failed with exit code $status; giving up"
exit "$status"
