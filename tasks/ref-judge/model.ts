import { InvalidCheckpointError } from '../task-pack.js';

/**
 * The ref-judge "model": a router plus response templates. Description.md documents it for agents.
 * - Routing: the instruction is tokenised (lowercase words and numbers); every router phrase occurring
 *   in it adds its weight to its type; the heaviest type wins (ties: alphabetical); none → default_type.
 *   A type without a template answers with default_type's template.
 * - Slots: {topic} is the text after the first topic marker (a whole word or phrase) up to the first
 *   topic stop (a plain substring), trailing punctuation removed; {keywords} are the items after the
 *   first keyword marker up to the next ".", split on commas and "and", joined with " and "; {n} is
 *   the first number (default 3). {Topic} and {Keywords} are title-cased; {items} is n numbered lines
 *   "k. <list_items[(k-1) mod len]>" (rendered with the same slots).
 * - `[[ … ]]` marks an optional segment, dropped when a slot inside it is empty.
 */
export interface JudgeModel {
  router: ReadonlyMap<string, { type: string; weight: number }>;
  maxRouterTokens: number;
  defaultType: string;
  templates: Readonly<Record<string, string>>;
  listItems: readonly string[];
  topicMarkers: readonly string[];
  topicStops: readonly string[];
  keywordMarkers: readonly string[];
}

const tokenize = (s: string): string[] => s.toLowerCase().match(/[a-z]+|\d+/g) ?? [];
const escapeRegExp = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
const titleCase = (s: string): string => s.replace(/\b[a-z]/g, (c) => c.toUpperCase());
const MAX_ITEMS = 10;

function stringList(weights: Record<string, unknown>, field: string): string[] {
  const value = weights[field] ?? [];
  if (!Array.isArray(value) || !value.every((v) => typeof v === 'string')) {
    throw new InvalidCheckpointError(`weights.json "${field}" must be an array of strings`);
  }
  return value as string[];
}

/** Validates parsed `weights.json` into a model; every defect is an InvalidCheckpointError naming the field. */
export function loadJudgeModel(weights: Record<string, unknown>): JudgeModel {
  const rawRouter = weights['router'] ?? {};
  if (typeof rawRouter !== 'object' || rawRouter === null || Array.isArray(rawRouter)) {
    throw new InvalidCheckpointError('weights.json "router" must map phrases to {type, weight}');
  }
  const router = new Map<string, { type: string; weight: number }>();
  let maxRouterTokens = 0;
  for (const [phrase, raw] of Object.entries(rawRouter as Record<string, unknown>)) {
    const { type, weight } = (raw ?? {}) as Record<string, unknown>;
    const tokens = tokenize(phrase);
    if (tokens.length === 0 || typeof type !== 'string' || typeof weight !== 'number' || !Number.isFinite(weight)) {
      throw new InvalidCheckpointError(`weights.json router[${JSON.stringify(phrase)}] must be {type: string, weight: finite number} for a non-empty phrase`);
    }
    router.set(tokens.join(' '), { type, weight });
    maxRouterTokens = Math.max(maxRouterTokens, tokens.length);
  }
  const templates = weights['templates'];
  if (typeof templates !== 'object' || templates === null || Array.isArray(templates) || !Object.values(templates).every((t) => typeof t === 'string')) {
    throw new InvalidCheckpointError('weights.json needs "templates": an object mapping types to template strings');
  }
  const defaultType = weights['default_type'];
  if (typeof defaultType !== 'string' || typeof (templates as Record<string, unknown>)[defaultType] !== 'string') {
    throw new InvalidCheckpointError(`weights.json "default_type" must name a type that has a template (got ${JSON.stringify(defaultType)})`);
  }
  return {
    router,
    maxRouterTokens,
    defaultType,
    templates: templates as Record<string, string>,
    listItems: stringList(weights, 'list_items'),
    topicMarkers: stringList(weights, 'topic_markers'),
    topicStops: stringList(weights, 'topic_stops'),
    keywordMarkers: stringList(weights, 'keyword_markers'),
  };
}

export function route(model: JudgeModel, instruction: string): string {
  const tokens = tokenize(instruction);
  const scores = new Map<string, number>();
  for (let length = 1; length <= model.maxRouterTokens; length++) {
    for (let i = 0; i + length <= tokens.length; i++) {
      const entry = model.router.get(tokens.slice(i, i + length).join(' '));
      if (entry) scores.set(entry.type, (scores.get(entry.type) ?? 0) + entry.weight);
    }
  }
  let best: [string, number] | undefined;
  for (const [type, score] of [...scores].sort(([a], [b]) => (a < b ? -1 : 1))) {
    if (!best || score > best[1]) best = [type, score];
  }
  return best ? best[0] : model.defaultType;
}

/** Position just after the earliest whole-word marker occurrence, or -1. */
function afterMarker(text: string, markers: readonly string[]): number {
  let best = -1;
  for (const marker of markers) {
    if (marker.trim() === '') continue;
    const match = new RegExp(`\\b${escapeRegExp(marker.trim().toLowerCase())}\\b`).exec(text.toLowerCase());
    if (match && (best === -1 || match.index + match[0].length < best)) best = match.index + match[0].length;
  }
  return best;
}

export function extractTopic(model: JudgeModel, instruction: string): string {
  const start = afterMarker(instruction, model.topicMarkers);
  if (start < 0) return '';
  const rest = instruction.slice(start);
  let end = rest.length;
  for (const stop of model.topicStops) {
    const at = stop === '' ? -1 : rest.toLowerCase().indexOf(stop.toLowerCase());
    if (at >= 0 && at < end) end = at;
  }
  return rest.slice(0, end).trim().replace(/[.,;:!?]+$/, '').trim();
}

export function extractKeywords(model: JudgeModel, instruction: string): string[] {
  const start = afterMarker(instruction, model.keywordMarkers);
  if (start < 0) return [];
  const clause = instruction.slice(start).split('.')[0]!;
  return clause.split(/,|\band\b/).map((k) => k.trim()).filter((k) => k !== '');
}

function render(template: string, slots: Record<string, string>): string {
  const fillSlots = (text: string): string => text.replace(/\{(\w+)\}/g, (whole, name: string) => slots[name] ?? whole);
  const withOptional = template.replace(/\[\[([\s\S]*?)\]\]/g, (_, inner: string) =>
    [...inner.matchAll(/\{(\w+)\}/g)].some((m) => slots[m[1]!] === '') ? '' : inner,
  );
  return fillSlots(withOptional);
}

/** The model's response to one instruction. */
export function respond(model: JudgeModel, instruction: string): string {
  const topic = extractTopic(model, instruction);
  const keywords = extractKeywords(model, instruction).join(' and ');
  const number = instruction.match(/\d+/);
  const n = Math.min(MAX_ITEMS, Math.max(1, number ? Number(number[0]) : 3));
  const slots: Record<string, string> = { topic, Topic: titleCase(topic), keywords, Keywords: titleCase(keywords), n: String(n) };
  slots['items'] =
    model.listItems.length === 0
      ? ''
      : Array.from({ length: n }, (_, k) => `${k + 1}. ${render(model.listItems[k % model.listItems.length]!, slots)}`).join('\n');
  const type = route(model, instruction);
  return render(model.templates[type] ?? model.templates[model.defaultType]!, slots).trim();
}
