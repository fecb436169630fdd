/**
 * The general instructions every agent gets as `instructions.md` (the task specifics are in
 * `description.md`). Modelled on the benchmark paper's agent prompt: what is where, how to submit,
 * how the budget works, and that only the best submission counts.
 */
export function agentInstructions(options: { task: string; baseModel: string; budgetSeconds: number; interactive: boolean }): string {
  const hours = options.budgetSeconds >= 3600 ? `${(options.budgetSeconds / 3600).toFixed(1)} h` : `${Math.round(options.budgetSeconds)} s`;
  const lines = [
    `# Instructions`,
    ``,
    `You are post-training the base model \`${options.baseModel}\` for the task \`${options.task}\` (see description.md).`,
    `You have ${hours} of wall-clock time from when you start. Your score is the best score among the checkpoints you submit.`,
    ``,
    `## Workspace`,
    ``,
    `- \`code/\` — write your training and evaluation code here.`,
    `- \`data/\` — training data (read-only). \`$DATA_PATH\` points here.`,
    `- \`models/${options.baseModel}/\` — the base checkpoint (read-only). \`$MODEL_PATH\` points here.`,
    `- \`output/\` — write checkpoints here (\`$OUTPUT_DIR\`), one directory per checkpoint, then submit it.`,
    `- \`run_meta.json\` — start time, time limit, last submission time.`,
    ``,
    `## Grading API (\`$GRADING_SERVER_URL\`)`,
    ``,
    '```sh',
    `curl -s -X POST "$GRADING_SERVER_URL/submit" -H 'content-type: application/json' -d '{"model_path": "output/my-checkpoint"}'`,
    `curl -s "$GRADING_SERVER_URL/time"     # remaining budget`,
    `curl -s "$GRADING_SERVER_URL/health"`,
    '```',
    ``,
    `\`/submit\` grades the checkpoint on a held-out set you cannot see and returns its score (0–100), the baseline score,`,
    `the improvement, your best so far and the number of submissions. Submit early and often: a run without a valid`,
    `submission scores nothing. Submitting the unchanged base model does not count as an improvement.`,
  ];
  if (options.interactive) {
    lines.push(
      ``,
      `## Environment API (interactive task)`,
      ``,
      `Collect rollouts only through \`POST $GRADING_SERVER_URL/env/reset\` and \`POST $GRADING_SERVER_URL/env/step\` (see data/README.md).`,
    );
  }
  lines.push(
    ``,
    `## Rules`,
    ``,
    `- Work only inside this workspace. The held-out evaluation data is not available to you; do not look for it.`,
    `- Do not modify \`data/\` or \`models/\`. Everything you do is recorded.`,
    ``,
  );
  return lines.join('\n');
}
