/** Agent-facing texts of ref-household: the task description and data/README.md (the env and policy spec). */

export function taskDescription(p: { maxSteps: number; evalLayouts: number; format: string }): string {
  return `# ref-household — train a household agent (L3, interactive)

A text household in the spirit of ALFWorld. Each episode is one room (countertops, cabinets,
drawers, a fridge, a microwave, a sinkbasin, …) with objects in and on the receptacles, and one goal:

- put some X in Y (pick and place)
- clean some X and put it in Y (clean it with the sinkbasin first)
- heat some X and put it in Y (heat it with the microwave first)
- cool some X and put it in Y (cool it with the fridge first)

Each step the environment lists the admissible actions; the reward is 1 when the goal is achieved and
0 otherwise; an episode ends after ${p.maxSteps} steps.

**Model.** The model is a small linear action-scoring policy: a checkpoint directory with
\`manifest.json\` (\`{"format": "${p.format}"}\`) and \`policy.json\` (\`{"weights": {"<feature>": <number>}}\`).
The base checkpoint in \`models/\` barely knows what to do. \`data/README.md\` specifies the features,
the environment API and the expert demonstrations in \`data/demos.jsonl\`.

**Training environment.** Roll out episodes on training layouts through the grading API:
\`POST $GRADING_SERVER_URL/env/reset\` and \`POST $GRADING_SERVER_URL/env/step\` (see \`data/README.md\`).

**Score.** Your checkpoint is run greedily on ${p.evalLayouts} held-out layouts you never see; the score is
the success rate × 100 (0–100), with the success rate per goal kind in the details. Submit a checkpoint
with \`POST $GRADING_SERVER_URL/submit {"model_path": "<dir>"}\`.
`;
}

export function dataReadme(p: { maxSteps: number; demos: number; trainSeedLimit: number; format: string }): string {
  return `# ref-household training data

## Environment API (through the grading API; every rollout is recorded)

- \`POST $GRADING_SERVER_URL/env/reset\` with \`{"seed": <int>}\` (optional; training layouts are seeds
  0 ≤ seed < ${p.trainSeedLimit}; held-out layouts are not reachable) →
  \`{"session_id", "observation", "admissible_actions"}\`
- \`POST $GRADING_SERVER_URL/env/step\` with \`{"session_id", "action"}\` →
  \`{"observation", "reward", "done", "admissible_actions"}\`

Bodies are JSON (\`content-type: application/json\`). An action that is not admissible costs a step and
observes "Nothing happens.". The reward is 1 on the step that achieves the goal, else 0; the episode
ends (\`done\`) on success or after ${p.maxSteps} steps.

The first observation lists the receptacles and ends with the goal line, one of:
\`Your task is to: put some <obj> in <receptacle>.\` or
\`Your task is to: <clean|heat|cool> some <obj> and put it in <receptacle>.\`
Objects and receptacles are named \`<type> <n>\` (\`mug 2\`, \`cabinet 3\`); any instance of the goal
type counts. Actions: \`go to <r>\`, \`open <r>\`, \`close <r>\`, \`take <o> from <r>\`, \`put <o> in/on <r>\`,
\`clean <o> with sinkbasin 1\`, \`heat <o> with microwave 1\`, \`cool <o> with fridge 1\`, \`look\`,
\`inventory\`. You carry at most one object; closed receptacles must be opened to see or use their inside.

## demos.jsonl

${p.demos} expert episodes on training layouts (seeds 0..${p.demos - 1}), one JSON object a line:
\`{"seed", "goal_kind", "steps": [{"observation", "admissible_actions", "action"}], "final_observation", "reward"}\`.
\`steps[i].observation\` is what the expert saw before choosing \`steps[i].action\`. The expert knows
where everything is, so it never searches.

## Checkpoint format (what the evaluator loads)

A directory with \`manifest.json\` \`{"format": "${p.format}"}\` and \`policy.json\`
\`{"weights": {"<feature>": <number>}}\` (at most 20000 finite weights; absent features weigh 0).
An action's score is the sum of the weights of its active features; the evaluator takes the
highest-scoring admissible action each step (exact ties are broken in a fixed pseudo-random order
that changes every step).

Features are computed from what the agent has seen. Track through the episode:
- the goal (\`kind\` pick|clean|heat|cool, \`object\` type, \`target\` receptacle) from the first observation;
- \`visited\`: receptacles X for which \`go to X\` was answered "You arrive at …";
- \`holding\`: the object O after \`take O from …\` answered "You pick up …"; nothing after a \`put\` answered "You put …";
- \`treated\`: objects that got the goal's treatment (\`<kind> O with …\` answered "You <kind> the …");
  heating removes a cool treatment and cooling a hot one.

\`phase\` is \`find\` (holding nothing), \`wrong\` (holding a non-goal type), \`treat\` (holding the goal
type, treatment needed and not done) or \`place\`. For action \`a\` with verb \`v\` (\`go\` for \`go to\`,
otherwise its first word), object \`o\` and receptacle \`r\` where the action names them, the active features are:
- \`<phase>:<v>\`
- \`<phase>:<v>:obj=goal\` or \`…:obj=other\` (does o's type equal the goal object?)
- \`<phase>:<v>:rec=target\`, \`…:rec=appliance\` (the goal's sinkbasin 1/microwave 1/fridge 1) or \`…:rec=other\`
- for \`go\`: \`<phase>:go:visited\` or \`<phase>:go:new\`, and in phase find also \`find:go:<goal object>@<type of r>\`
`;
}
