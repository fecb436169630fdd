import { describe, expect, it } from '@jest/globals';
import { buildCli, COMMAND_AREA } from './cli-program.js';

// The CLI loads only the area of the command it runs: the table of areas must name every command.

describe('the CLI areas', () => {
  it('names the area of every command, and a command built alone is the same command', async () => {
    const all = await buildCli();
    expect(all.commands.map((c) => c.name()).sort()).toEqual(Object.keys(COMMAND_AREA).sort());
    for (const name of Object.keys(COMMAND_AREA)) {
      const alone = await buildCli(name);
      const command = alone.commands.find((c) => c.name() === name);
      expect(command?.description()).toBe(all.commands.find((c) => c.name() === name)!.description());
    }
  }, 60_000);

  it('builds every command for help, an option first, or an unknown word', async () => {
    for (const first of [undefined, '--help', 'nonsense', 'constructor']) expect((await buildCli(first)).commands.length).toBe(Object.keys(COMMAND_AREA).length);
  }, 60_000);
});
