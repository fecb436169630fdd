/** A HumanEval problem, in the dataset's own JSON Lines format. */
export interface HumanEvalProblem {
  task_id: string;
  prompt: string;
  canonical_solution: string;
  test: string;
  entry_point: string;
}

const FENCE = /```[^\n`]*\n([\s\S]*?)(?:```|$)/;

/**
 * The program tested for a model reply:
 * 1. Code: the content of the first markdown code block (```` ```python ```` or bare ```` ``` ````, an
 *    unterminated block runs to the end); with no block, the whole reply.
 * 2. If the code defines the entry point at top level (`def <entry_point>(` at column 0), it is a full
 *    function: program = prompt (its stub closed with `pass`) + code, so the prompt's imports and
 *    helpers stay and the model's definition replaces the stub. Otherwise the code is the function body: program = prompt + code
 *    (the HumanEval convention, a completion continuing the prompt).
 * Then the problem's `test` and `check(<entry_point>)`.
 */
export function extractCode(reply: string): string {
  const block = FENCE.exec(reply);
  return block ? block[1]! : reply;
}

export function buildProgram(problem: HumanEvalProblem, reply: string): string {
  const code = extractCode(reply);
  const definesEntry = new RegExp(`^def\\s+${problem.entry_point}\\s*\\(`, 'm').test(code);
  const completion = definesEntry ? `${problem.prompt.trimEnd()}\n    pass\n\n${code}` : `${problem.prompt}${code}`;
  return `${completion}\n\n${problem.test}\n\ncheck(${problem.entry_point})\n`;
}

/** The evaluation prompt: one user turn asking for the completed function in a code block. */
export function humanEvalPrompt(problem: HumanEvalProblem): { role: 'user'; content: string }[] {
  return [
    {
      role: 'user',
      content: `Complete the following Python function. Reply with the complete function in a single \`\`\`python code block.\n\n\`\`\`python\n${problem.prompt}\`\`\``,
    },
  ];
}
