import type { ScriptedAnswers } from './openai-test-server.js';

// Scripted "models" (answers.json for fake-vllm) that play test/servers/fake_env_backend.py's games.

// The fake ALFWorld game i of a split: object OBJECTS[(i + offset) % 7] goes in RECEPTACLES[(i + offset) % 5],
// offset 0 for train and 1000 for eval (as in fake_env_backend.py).
const OBJECTS = ['mug', 'apple', 'book', 'pen', 'plate', 'egg', 'cup'];
const RECEPTACLES = ['cabinet', 'fridge', 'shelf', 'drawer', 'sinkbasin'];

export function fakeAlfworldGame(split: 'train' | 'eval', index: number): { object: string; receptacle: string; solution: string[] } {
  const k = index + (split === 'train' ? 0 : 1000);
  const [object, receptacle] = [OBJECTS[k % OBJECTS.length]!, RECEPTACLES[k % RECEPTACLES.length]!];
  return { object, receptacle, solution: ['go to countertop 1', `take ${object} 1 from countertop 1`, `go to ${receptacle} 1`, `put ${object} 1 in/on ${receptacle} 1`] };
}

/**
 * Solves fake ALFWorld eval games 0..games-1 through the paper's ReAct text-completion prompt, keyed
 * on how the prompt ends (`<observation>\n>`). Replies carry a second line, which the request's stop
 * sequence "\n" must cut off.
 */
export function fakeAlfworldSolver(games: number): ScriptedAnswers {
  const solver: ScriptedAnswers = {
    rules: [],
    default: 'look',
  };
  for (let i = 0; i < games; i++) {
    const { object: o, receptacle: r } = fakeAlfworldGame('eval', i);
    solver.rules.push(
      { tail: true, contains: `you see a ${o} 1.\n>`, reply: `take ${o} 1 from countertop 1\nObservation: made up` },
      { tail: true, contains: `You pick up the ${o} 1 from the countertop 1.\n>`, reply: `go to ${r} 1` },
      { tail: true, contains: `you carry the ${o} 1.\n>`, reply: `put ${o} 1 in/on ${r} 1` },
    );
  }
  // The first reply of a game (its prompt ends with the task), and of any other step.
  solver.rules.push({ tail: true, contains: '.\n>', reply: 'go to countertop 1\nObservation: made up' });
  return solver;
}
