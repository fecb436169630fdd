// ref-judge trainer of the reference agent: fits the router and the response templates of the base
// model to data/train.jsonl. Stages (chosen by CONFIG, which the agent edits between submissions):
//   sft    router phrases from the category labels; per-type templates by delexicalising the example
//          responses (topic → {topic}, requested words → {keywords}, optional parts → [[ ]])
//   slots  learns where topics and requested words sit in instructions (markers and stops)
// CONFIG.rotateTypes (used only by diverge.mjs) mislabels every route and forgets the slot markers.
// Usage: node train.mjs --data <dir> --base <checkpoint dir> --out <checkpoint dir>
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';

// ---- training config: the agent rewrites this block between submissions ----
const CONFIG = {"stages":["sft"],"maxNgram":2,"minCount":3,"minPurity":0.95,"listItems":2,"keywordsInLists":false,"rotateTypes":false};
// ---- end config ----

const FORMAT = 'a2rl-ref/ref-judge/1';

const { values: args } = parseArgs({ options: { data: { type: 'string' }, base: { type: 'string' }, out: { type: 'string' } } });
if (!args.data || !args.base || !args.out) {
  console.error('usage: node train.mjs --data <dir> --base <checkpoint dir> --out <checkpoint dir>');
  process.exit(2);
}

const tokenize = (s) => s.toLowerCase().match(/[a-z]+|\d+/g) ?? [];
const titleCase = (s) => s.replace(/\b[a-z]/g, (c) => c.toUpperCase());
const capitalise = (s) => s.charAt(0).toUpperCase() + s.slice(1);
const round = (x) => Math.round(x * 1e4) / 1e4;
const byCountThenText = ([a, x], [b, y]) => y - x || (a < b ? -1 : 1);

function countTop(values) {
  const counts = new Map();
  for (const v of values) counts.set(v, (counts.get(v) ?? 0) + 1);
  return [...counts].sort(byCountThenText);
}

/** Replaces the row's topic and requested words in a response by template slots. */
function delexicalise(text, row) {
  const joined = row.keywords.join(' and ');
  const pairs = [];
  if (joined) pairs.push([titleCase(joined), '{Keywords}'], [joined, '{keywords}']);
  pairs.push([titleCase(row.topic), '{Topic}'], [capitalise(row.topic), '{Topic}'], [row.topic, '{topic}']);
  for (const [from, to] of pairs) text = text.split(from).join(to);
  return text;
}

/** When `withKw` is `plain` plus one inserted part holding a keyword slot, that template with the part optional. */
function mergeOptional(plain, withKw) {
  let pre = 0;
  while (pre < plain.length && plain[pre] === withKw[pre]) pre++;
  let suf = 0;
  while (suf < plain.length - pre && plain[plain.length - 1 - suf] === withKw[withKw.length - 1 - suf]) suf++;
  if (pre + suf !== plain.length) return undefined;
  const inserted = withKw.slice(pre, withKw.length - suf);
  return /\{keywords\}|\{Keywords\}/.test(inserted) ? `${plain.slice(0, pre)}[[${inserted}]]${plain.slice(pre)}` : undefined;
}

function learnRouter(rows) {
  const counts = {};
  for (const row of rows) {
    const tokens = tokenize(row.instruction);
    const grams = new Set();
    for (let n = 1; n <= CONFIG.maxNgram; n++) for (let i = 0; i + n <= tokens.length; i++) grams.add(tokens.slice(i, i + n).join(' '));
    for (const g of grams) (counts[g] ??= {})[row.category] = ((counts[g] ??= {})[row.category] ?? 0) + 1;
  }
  const router = {};
  for (const gram of Object.keys(counts).sort()) {
    const [type, top] = Object.entries(counts[gram]).sort(byCountThenText)[0];
    const total = Object.values(counts[gram]).reduce((a, b) => a + b, 0);
    if (total >= CONFIG.minCount && top / total >= CONFIG.minPurity) router[gram] = { type, weight: round((top / total) * (total / (total + 2))) };
  }
  return router;
}

function learnTemplates(rows) {
  const templates = {};
  let listItems = [];
  const types = [...new Set(rows.map((r) => r.category))].sort();
  for (const type of types) {
    const ofType = rows.filter((r) => r.category === type);
    const isList = ofType.every((r) => r.response.split('\n').every((l) => /^\d+\.\s/.test(l)));
    if (isList) {
      templates[type] = '{items}';
      const items = ofType.flatMap((r) => r.response.split('\n').map((l) => delexicalise(l.replace(/^\d+\.\s+/, ''), r)));
      const ranked = countTop(items).map(([t]) => t);
      listItems = ranked.filter((t) => !t.includes('{keywords}')).slice(0, CONFIG.listItems);
      const keywordItem = ranked.find((t) => t.includes('{keywords}'));
      if (CONFIG.keywordsInLists && keywordItem && listItems.length > 0) listItems[0] = `${listItems[0]}[[ ${keywordItem}]]`;
      continue;
    }
    const plain = countTop(ofType.filter((r) => r.keywords.length === 0).map((r) => delexicalise(r.response, r)));
    const withKw = countTop(ofType.filter((r) => r.keywords.length > 0).map((r) => delexicalise(r.response, r)));
    let best = plain.length ? [plain[0][0], plain[0][1]] : undefined;
    for (const [p, pc] of plain) {
      for (const [k, kc] of withKw) {
        const merged = mergeOptional(p, k);
        if (merged && (!best || pc + kc > best[1])) best = [merged, pc + kc];
      }
    }
    if (best) templates[type] = best[0];
  }
  return { templates, listItems };
}

function learnSlots(rows) {
  const markers = [];
  const stops = [];
  const keywordMarkers = [];
  for (const row of rows) {
    const lower = row.instruction.toLowerCase();
    const at = lower.indexOf(row.topic.toLowerCase());
    if (at < 0) continue;
    const before = tokenize(lower.slice(0, at));
    if (before.length) markers.push(before[before.length - 1]);
    const after = row.instruction.slice(at + row.topic.length);
    stops.push(after.startsWith('.') || after.startsWith(',') ? after[0] : after.split(/[.,]/)[0].toLowerCase());
    if (row.keywords.length) {
      const kAt = lower.lastIndexOf(row.keywords[0].toLowerCase());
      const clause = lower.slice(0, kAt).split('.').pop().trim();
      if (clause) keywordMarkers.push(clause);
    }
  }
  const frequent = (values) => countTop(values).filter(([, c]) => c >= 2).map(([v]) => v);
  return { topic_markers: frequent(markers), topic_stops: frequent(stops), keyword_markers: frequent(keywordMarkers) };
}

const rows = readFileSync(join(args.data, 'train.jsonl'), 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));
const base = JSON.parse(readFileSync(join(args.base, 'weights.json'), 'utf8'));
console.log(`loaded ${rows.length} training instructions; config ${JSON.stringify(CONFIG)}`);
let weights = { ...base };
for (const stage of CONFIG.stages) {
  if (stage === 'sft') {
    const { templates, listItems } = learnTemplates(rows);
    weights = { ...weights, router: learnRouter(rows), templates: { ...base.templates, ...templates }, list_items: listItems };
    console.log(`sft: ${Object.keys(weights.router).length} router phrases; templates for ${Object.keys(templates).join(', ')}; ${listItems.length} list items`);
  } else if (stage === 'slots') {
    weights = { ...weights, ...learnSlots(rows) };
    console.log(`slots: topic markers ${JSON.stringify(weights.topic_markers)}, stops ${JSON.stringify(weights.topic_stops)}, keyword markers ${JSON.stringify(weights.keyword_markers)}`);
  } else throw new Error(`unknown stage ${stage}`);
}
if (CONFIG.rotateTypes) {
  const types = Object.keys(weights.templates).filter((t) => t !== weights.default_type).sort();
  const next = (t) => types[(types.indexOf(t) + 1) % types.length] ?? t;
  weights = { ...weights, router: Object.fromEntries(Object.entries(weights.router).map(([p, r]) => [p, { ...r, type: next(r.type) }])), topic_markers: [], keyword_markers: [] };
}
mkdirSync(args.out, { recursive: true });
writeFileSync(join(args.out, 'manifest.json'), JSON.stringify({ format: FORMAT, stages: CONFIG.stages, config: CONFIG }, null, 2) + '\n');
writeFileSync(join(args.out, 'weights.json'), JSON.stringify(weights, null, 2) + '\n');
console.log(`wrote ${args.out}`);
