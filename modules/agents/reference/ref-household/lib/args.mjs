// Required `--name value` command-line options.
export function requiredArgs(names) {
  const argv = process.argv.slice(2);
  return Object.fromEntries(
    names.map((name) => {
      const i = argv.indexOf(`--${name}`);
      if (i < 0 || argv[i + 1] === undefined) throw new Error(`missing --${name} <value> (needs ${names.map((n) => `--${n}`).join(' ')})`);
      return [name, argv[i + 1]];
    }),
  );
}
