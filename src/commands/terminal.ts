import { inertJson, inertText } from '../../modules/reports/inert-text.js';

// Machine-readable output (--json, `report --format json|html`) keeps its exact bytes when piped or
// redirected: canonical JSON stays canonical, a saved report stays the bundled one. On a terminal,
// what JSON's escaping leaves raw (C1 controls, bidi and invisible format characters) is written
// escaped instead, so a person reading --json output is not acted on either. Text outputs are made
// inert where they are composed (modules/reports/inert-text.ts), piped or not.

const onTerminal = () => process.stdout.isTTY === true;

/** JSON (or NDJSON) for stdout: as it is when piped, its raw C1/bidi characters as \u escapes (the same JSON values) on a terminal. */
export function jsonOut(json: string): string {
  return onTerminal() ? inertJson(json) : json;
}

/** A document in a machine format that is not JSON (HTML) for stdout: as it is when piped, inert on a terminal. */
export function documentOut(text: string): string {
  return onTerminal() ? inertText(text) : text;
}
