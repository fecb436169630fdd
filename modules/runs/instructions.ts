/** What the agent is told to do with its budget (RunScheduled.mode). */
export type RunMode = 'free' | 'sft-only' | 'rl-oriented';

/** Text per operating mode; `free` adds nothing, so its instructions are those of earlier runs. */
const MODE_TEXT: Record<Exclude<RunMode, 'free'>, string[]> = {
  'sft-only': [
    `## Method: supervised fine-tuning only`,
    ``,
    `This run studies supervised post-training. Train only with supervised objectives (e.g. SFT on the training data or on`,
    `examples you generate and filter yourself). Do not use reinforcement learning: no PPO, GRPO, REINFORCE or other`,
    `policy-gradient updates from rewards, and no online RL loops.`,
  ],
  'rl-oriented': [
    `## Method: online reinforcement learning expected`,
    ``,
    `This run studies reinforcement learning. Your main training method is expected to be online RL (e.g. GRPO or PPO):`,
    `sample from the current policy, score the samples with a reward you build from the training data, and update on them.`,
    `Supervised fine-tuning is fine as a warm-up before RL, not as a replacement for it.`,
  ],
};

/**
 * The general instructions every agent gets as `instructions.md` (the task specifics are in
 * `description.md`). Modelled on the benchmark paper's agent prompt: what is where, how to submit,
 * how the budget works, and that only the best submission counts.
 */
export function agentInstructions(options: { task: string; baseModel: string; budgetSeconds: number; interactive: boolean; mode?: RunMode }): string {
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
      `Python training code can use the environment packages as usual: \`$PYTHONPATH\` puts a2rl's clients first, with ALFWorld's and`,
      `WebShop's import paths and API (\`alfworld.agents.environment\`, \`web_agent_site.envs.WebAgentTextEnv\`), playing through this API.`,
    );
  }
  if (options.mode && options.mode !== 'free') lines.push(``, ...MODE_TEXT[options.mode]);
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
