import { Option } from 'commander';

// Option values parsed by commander itself (Option.argParser, Option.choices) rather than by hand in
// each action: a bad value fails while the command line is read, before anything is opened. The
// parsers throw plain errors, so the failure is the CLI's usual single `a2rl: …` line (src/cli.ts),
// worded as before; `choices` also lists the values in --help.

/** A whole number (`-3` passes without `min`: the service refuses it naming the flag), optionally at least `min` / at most `max`. */
export function wholeNumber(flag: string, bounds: { min?: number; max?: number } = {}): (text: string) => number {
  return (text) => {
    if (!/^\s*-?\d+\s*$/.test(text)) throw new Error(`${flag} must be a whole number, got "${text}"`);
    const n = Number(text);
    if (bounds.min !== undefined && n < bounds.min) throw new Error(`${flag} must be a whole number of at least ${bounds.min}, got ${n}`);
    if (bounds.max !== undefined && n > bounds.max) throw new Error(`${flag} must be a whole number of at most ${bounds.max}, got ${n}`);
    return n;
  };
}

/** An option whose value is one of `values` (shown in --help); anything else fails as `<flag> must be <said>, got "<value>"`. */
export function choiceOption<T extends string>(flags: string, description: string, values: readonly T[], said: string): Option {
  const flag = flags.split(/[ ,]/).find((f) => f.startsWith('--'))!;
  return new Option(flags, description).choices(values).argParser((text: string): T => {
    if (!(values as readonly string[]).includes(text)) throw new Error(`${flag} must be ${said}, got "${text}"`);
    return text as T;
  });
}

/** Any integer (a seed). */
export function integer(flag: string): (text: string) => number {
  return (text) => {
    if (!/^-?\d+$/.test(text)) throw new Error(`${flag} must be an integer, got "${text}"`);
    return Number(text);
  };
}

/** An integer of at least `min` (a page size, an offset, a seq). */
export function integerAtLeast(flag: string, min: number): (text: string) => number {
  return (text) => {
    const n = Number(text);
    if (!/^-?\d+$/.test(text) || !Number.isSafeInteger(n) || n < min) throw new Error(`${flag} must be an integer of at least ${min}, got "${text}"`);
    return n;
  };
}
