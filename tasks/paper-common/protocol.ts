/**
 * A paper task's evaluation protocol, as data: `tasks/<task>/protocol.json` states the split recipe,
 * the prompt (templates and few-shot source), completion vs chat, max tokens, stop sequences,
 * temperature and post-processing, defaulting to what the paper's harness does. Every deliberate
 * difference is listed by name in `deviations` (and explained in docs/paper-tasks.md). The file is
 * read and checked when the pack is loaded, so a broken protocol stops a2rl before anything runs, and
 * its canonical hash becomes part of the pack's cache key (TaskPack.protocol).
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { packageRoot } from '../../modules/settings/package-root.js';
import type { EvalProtocol, RequestApi, RequestSettings, RowRange, SplitRecipe } from '../eval-protocol.js';

// The protocol's types live in tasks/eval-protocol.ts, below the TaskPack that names them.
export type { Deviation, EvalProtocol, RequestApi, RequestSettings, RowRange, SplitRecipe } from '../eval-protocol.js';

export class ProtocolError extends Error {
  override readonly name = 'ProtocolError';
}

/** The protocol file of a task, `tasks/<task>/protocol.json` in the package. */
export function protocolPath(taskId: string, root = packageRoot()): string {
  return path.join(root, 'tasks', taskId, 'protocol.json');
}

/** Reads and checks `tasks/<task>/protocol.json`; any problem throws ProtocolError naming the file and field. */
export function loadProtocol(taskId: string, root = packageRoot()): EvalProtocol {
  const file = protocolPath(taskId, root);
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(file, 'utf8'));
  } catch (err) {
    throw new ProtocolError(`${file}: ${(err as Error).message}`);
  }
  const protocol = checkProtocol(raw, file);
  if (protocol.task !== taskId) throw new ProtocolError(`${file}: task is "${protocol.task}", expected "${taskId}"`);
  return protocol;
}

/** Checks the shape of a parsed protocol object (`where` names it in errors). */
export function checkProtocol(raw: unknown, where: string): EvalProtocol {
  const p = new Fields(where);
  const root = p.object(raw, '');
  const request = p.object(root.request, 'request');
  const api = p.string(request.api, 'request.api');
  if (api !== 'chat' && api !== 'completion') p.fail('request.api', 'must be "chat" or "completion"');
  const protocol: EvalProtocol = {
    task: p.string(root.task, 'task'),
    source: p.string(root.source, 'source'),
    split: checkSplit(p, root.split),
    request: {
      api: api as RequestApi,
      maxTokens: p.positiveInt(request.maxTokens, 'request.maxTokens'),
      stop: p.strings(request.stop, 'request.stop'),
      temperature: p.number(request.temperature, 'request.temperature'),
    },
    prompt: p.object(root.prompt, 'prompt'),
    postprocess: p.object(root.postprocess, 'postprocess'),
    settings: p.object(root.settings ?? {}, 'settings'),
    deviations: p.array(root.deviations, 'deviations').map((d, i) => {
      const o = p.object(d, `deviations[${i}]`);
      const name = p.string(o.name, `deviations[${i}].name`);
      if (!/^[a-z0-9]+(?:-[a-z0-9]+)*$/.test(name)) p.fail(`deviations[${i}].name`, 'must be kebab-case');
      return { name, reason: p.string(o.reason, `deviations[${i}].reason`) };
    }),
  };
  const names = protocol.deviations.map((d) => d.name);
  if (new Set(names).size !== names.length) p.fail('deviations', 'names must be unique');
  return protocol;
}

function checkSplit(p: Fields, raw: unknown): SplitRecipe {
  const o = p.object(raw, 'split');
  const kind = p.string(o.kind, 'split.kind');
  const recipe = p.string(o.recipe, 'split.recipe');
  if (kind === 'environment') return { kind, recipe };
  if (kind !== 'rows') p.fail('split.kind', 'must be "rows" or "environment"');
  const expected = p.object(o.expectedRows, 'split.expectedRows');
  const expectedRows = Object.fromEntries(Object.entries(expected).map(([k, v]) => [k, p.positiveInt(v, `split.expectedRows.${k}`)]));
  const range = (name: 'visible' | 'private'): RowRange => {
    const r = p.object(o[name], `split.${name}`);
    const order = p.string(r.order, `split.${name}.order`);
    if (order !== 'file' && order !== 'permutation') p.fail(`split.${name}.order`, 'must be "file" or "permutation"');
    const start = p.nonNegativeInt(r.start, `split.${name}.start`);
    const end = r.end === null ? null : p.nonNegativeInt(r.end, `split.${name}.end`);
    if (end !== null && end < start) p.fail(`split.${name}.end`, 'must not be below start');
    const file = p.string(r.file, `split.${name}.file`);
    if (!(file in expectedRows)) p.fail(`split.${name}.file`, `"${file}" has no entry in split.expectedRows`);
    return {
      file, start, end, order: order as RowRange['order'],
      ...(r.endVariable === undefined ? {} : { endVariable: p.string(r.endVariable, `split.${name}.endVariable`) }),
    };
  };
  const split: SplitRecipe = { kind: 'rows', recipe, visible: range('visible'), private: range('private'), expectedRows };
  if (o.permutation !== undefined) {
    const perm = p.object(o.permutation, 'split.permutation');
    split.permutation = {
      file: p.string(perm.file, 'split.permutation.file'),
      length: p.positiveInt(perm.length, 'split.permutation.length'),
      sha256: p.string(perm.sha256, 'split.permutation.sha256'),
    };
  }
  if ([split.visible, split.private].some((r) => r.order === 'permutation') && !split.permutation) {
    p.fail('split.permutation', 'is required when a range is in permutation order');
  }
  return split;
}

/** Field checks that name the file and the field path in their one-line errors. */
class Fields {
  constructor(private readonly where: string) {}

  fail(field: string, why: string): never {
    throw new ProtocolError(`${this.where}: ${field || 'the protocol'} ${why}`);
  }

  object(v: unknown, field: string): Record<string, unknown> {
    if (typeof v !== 'object' || v === null || Array.isArray(v)) this.fail(field, 'must be an object');
    return v as Record<string, unknown>;
  }

  array(v: unknown, field: string): unknown[] {
    if (!Array.isArray(v)) this.fail(field, 'must be an array');
    return v;
  }

  string(v: unknown, field: string): string {
    if (typeof v !== 'string' || v === '') this.fail(field, 'must be a non-empty string');
    return v;
  }

  strings(v: unknown, field: string): string[] {
    return this.array(v, field).map((s, i) => {
      if (typeof s !== 'string' || s === '') this.fail(`${field}[${i}]`, 'must be a non-empty string');
      return s;
    });
  }

  number(v: unknown, field: string): number {
    if (typeof v !== 'number' || !Number.isFinite(v)) this.fail(field, 'must be a number');
    return v;
  }

  nonNegativeInt(v: unknown, field: string): number {
    if (!Number.isSafeInteger(v) || (v as number) < 0) this.fail(field, 'must be a non-negative integer');
    return v as number;
  }

  positiveInt(v: unknown, field: string): number {
    if (!Number.isSafeInteger(v) || (v as number) < 1) this.fail(field, 'must be a positive integer');
    return v as number;
  }
}

/** Typed access to the task-specific sections, failing with the protocol file's name. */
export function protocolString(protocol: EvalProtocol, section: 'prompt' | 'postprocess' | 'settings', key: string): string {
  const v = protocol[section][key];
  if (typeof v !== 'string') throw new ProtocolError(`tasks/${protocol.task}/protocol.json: ${section}.${key} must be a string`);
  return v;
}

export function protocolNumber(protocol: EvalProtocol, section: 'prompt' | 'postprocess' | 'settings', key: string): number {
  const v = protocol[section][key];
  if (typeof v !== 'number' || !Number.isFinite(v)) throw new ProtocolError(`tasks/${protocol.task}/protocol.json: ${section}.${key} must be a number`);
  return v;
}

export function protocolStrings(protocol: EvalProtocol, section: 'prompt' | 'postprocess' | 'settings', key: string): string[] {
  const v = protocol[section][key];
  if (!Array.isArray(v) || !v.every((s) => typeof s === 'string')) throw new ProtocolError(`tasks/${protocol.task}/protocol.json: ${section}.${key} must be an array of strings`);
  return v as string[];
}

export function protocolBoolean(protocol: EvalProtocol, section: 'prompt' | 'postprocess' | 'settings', key: string): boolean {
  const v = protocol[section][key];
  if (typeof v !== 'boolean') throw new ProtocolError(`tasks/${protocol.task}/protocol.json: ${section}.${key} must be true or false`);
  return v;
}

/** Fills `{name}` placeholders; an unknown placeholder is a protocol bug, not silently kept. */
export function fillTemplate(template: string, values: Record<string, string>): string {
  return template.replace(/\{([a-z_]+)\}/g, (whole, name: string) => {
    if (!(name in values)) throw new ProtocolError(`template placeholder {${name}} has no value`);
    return values[name]!;
  });
}
