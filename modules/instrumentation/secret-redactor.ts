/**
 * Secrets never enter the ledger: the values the harness knows (the run token, the gateway token,
 * credentials from its environment) and common key shapes are replaced by `[REDACTED:<kind>]` in
 * event data and in archived text blobs before they are recorded. This module is pure: it finds and
 * replaces; the run recorder and the redacting artifact store decide where it applies.
 *
 * Scanning is two regular-expression passes per text (the known values first, so a key-shape match
 * that starts earlier can never leave half a known value behind; then the key shapes). Every
 * pattern starts with a fixed prefix and has bounded repetitions, so a pass is linear in the text
 * and needs at most PATTERN_MAX_MATCH characters past a match's start to decide it: blobs are scanned in
 * windows (`BlobRedaction`) with that much held back, never whole in memory. Blobs are handled as
 * latin1 strings (one char per byte), so bytes that are not UTF-8 come out unchanged.
 */

export interface KnownSecret {
  /** What the value is, shown in the replacement and the SecretRedacted fact: 'run-token', 'credential:OPENAI_API_KEY'. */
  kind: string;
  value: string;
}

export interface TextHit {
  kind: string;
  count: number;
}

export interface FieldHit extends TextHit {
  /** JSON path inside the event data: `argv[2]`, `manifest[3].path`, `details["a b"]`. */
  field: string;
}

/** Shorter values are too likely to occur by chance (and are no real credential). */
export const MIN_SECRET_LENGTH = 8;
/** The first bytes of a blob looked at to tell text from binary (a NUL there: binary, kept as is). */
export const BINARY_SNIFF_BYTES = 8 * 1024;

/** Longest text a key-shape pattern can match (the PEM block) plus its look-around, rounded up. */
const PATTERN_MAX_MATCH = 20 * 1024;
/** Characters kept before a window's new text so look-behinds see what precedes it. */
const CONTEXT = 64;
/** Blob input gathered before a window is scanned (fewer, larger regex runs). */
const WINDOW = 1024 * 1024;

// Tokens are delimited: no token character right before or after, so a key shape inside a longer
// identifier, hex digest or base64 run does not fire.
const NOT_AFTER_TOKEN = '(?<![A-Za-z0-9_-])';
const NOT_BEFORE_TOKEN = '(?![A-Za-z0-9_-])';

interface Shape {
  kind: string;
  source: string;
  /** The pattern's group `keep` (a header name) stays; only the rest is replaced. */
  keepsPrefix?: boolean;
}

/** Built-in key shapes; the first listed wins where two could start at one position. */
export const KEY_SHAPES: readonly Shape[] = [
  { kind: 'pattern:anthropic-key', source: `${NOT_AFTER_TOKEN}sk-ant-[A-Za-z0-9_-]{32,256}${NOT_BEFORE_TOKEN}` },
  // Project/service/admin keys carry dashes; legacy keys are 48 alphanumerics.
  { kind: 'pattern:openai-key', source: `${NOT_AFTER_TOKEN}sk-(?:(?:proj|svcacct|admin)-[A-Za-z0-9_-]{40,256}|[A-Za-z0-9]{32,64})${NOT_BEFORE_TOKEN}` },
  // Not inside a base64 run (weights, data URIs): no base64 character on either side.
  { kind: 'pattern:aws-access-key-id', source: '(?<![A-Za-z0-9+/])(?:AKIA|ASIA)[0-9A-Z]{16}(?![A-Za-z0-9+/=])' },
  { kind: 'pattern:github-token', source: '(?<![A-Za-z0-9_])(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})(?![A-Za-z0-9_])' },
  { kind: 'pattern:slack-token', source: `${NOT_AFTER_TOKEN}xox[abpr]-[0-9]{6,20}-[A-Za-z0-9-]{8,250}${NOT_BEFORE_TOKEN}` },
  { kind: 'pattern:huggingface-token', source: `${NOT_AFTER_TOKEN}hf_[A-Za-z0-9]{34,40}${NOT_BEFORE_TOKEN}` },
  { kind: 'pattern:google-api-key', source: `${NOT_AFTER_TOKEN}AIza[0-9A-Za-z_-]{35}${NOT_BEFORE_TOKEN}` },
  // The body's class has no '-', so a BEGIN without its END costs at most the run up to the next dash.
  {
    kind: 'pattern:private-key',
    source:
      '-----BEGIN[A-Z0-9 ]{0,40} PRIVATE KEY-----(?:\\r?\\n[A-Za-z-]{1,40}: [^\\r\\n]{0,200}){0,4}[A-Za-z0-9+/=\\s]{16,16384}-----END[A-Z0-9 ]{0,40} PRIVATE KEY-----',
  },
  // `Authorization: Bearer x`, `-H 'authorization: bearer x'`, `"Authorization": "Bearer x"`.
  {
    kind: 'pattern:bearer-token',
    source: `(?<keep>[Aa]uthorization["']?[ \\t]{0,8}[:=][ \\t]{0,8}["']?[Bb]earer[ \\t]{1,8})[A-Za-z0-9._~+/=-]{8,4096}`,
    keepsPrefix: true,
  },
];

/** One regex pass: what it finds and what each find becomes. */
interface Pass {
  regex: RegExp;
  /** How far past a match's start the pass may need to look to decide it. */
  maxMatch: number;
  /** The replacement and its kind for one match. */
  replace(match: RegExpExecArray): { text: string; kind: string };
}

const replacement = (kind: string) => `[REDACTED:${kind}]`;

function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\/-]/g, '\\$&');
}

/** The forms a value may take in a URL, a header or a config file. */
function encodings(value: string): string[] {
  const forms = new Set<string>([value]);
  const url = urlEncoded(value);
  if (url) forms.add(url).add(url.replace(/%[0-9A-F]{2}/g, (e) => e.toLowerCase()));
  for (const b64 of base64Cores(Buffer.from(value, 'utf8'))) forms.add(b64);
  return [...forms];
}

function urlEncoded(value: string): string | null {
  try {
    return encodeURIComponent(value);
  } catch {
    return null; // a lone surrogate has no URL form
  }
}

/**
 * The base64 characters that depend only on the value, at each of the three alignments it can have
 * inside a longer encoded string (`Basic base64(user:token)`): a few edge characters carrying bits of
 * neighbouring bytes are left out. Cores under 12 characters are too weak to search for.
 */
function base64Cores(bytes: Buffer): string[] {
  const cores: string[] = [];
  for (let offset = 0; offset < 3; offset++) {
    const encoded = Buffer.concat([Buffer.alloc(offset), bytes]).toString('base64');
    const first = Math.ceil((8 * offset) / 6);
    const end = Math.floor((8 * (offset + bytes.length)) / 6);
    const core = encoded.slice(first, end);
    if (core.length >= 12) cores.push(core, core.replace(/\+/g, '-').replace(/\//g, '_'));
  }
  return cores;
}

/** A pass over the known values (and their encodings), in the given string representation. */
function literalPass(secrets: readonly KnownSecret[], represent: (s: string) => string): Pass | null {
  const kindOf = new Map<string, string>();
  for (const { kind, value } of secrets) {
    for (const form of encodings(value)) {
      const text = represent(form);
      if (!kindOf.has(text)) kindOf.set(text, kind); // the first kind given for a value wins
    }
  }
  if (kindOf.size === 0) return null;
  // Longest first: where one value contains another, the whole of it is replaced.
  const literals = [...kindOf.keys()].sort((a, b) => b.length - a.length);
  return {
    regex: new RegExp(literals.map(escapeRegExp).join('|'), 'g'),
    maxMatch: literals[0].length,
    replace: (m) => {
      const kind = kindOf.get(m[0])!;
      return { text: replacement(kind), kind };
    },
  };
}

function shapePass(): Pass {
  const regex = new RegExp(KEY_SHAPES.map((s, i) => `(?<s${i}>${s.source})`).join('|'), 'g');
  return {
    regex,
    maxMatch: PATTERN_MAX_MATCH,
    replace: (m) => {
      const i = KEY_SHAPES.findIndex((_, j) => m.groups![`s${j}`] !== undefined);
      const shape = KEY_SHAPES[i];
      return { text: `${shape.keepsPrefix ? m.groups!.keep : ''}${replacement(shape.kind)}`, kind: shape.kind };
    },
  };
}

const SHAPES = shapePass();

class Counts {
  private readonly byKind = new Map<string, number>();
  add(kind: string): void {
    this.byKind.set(kind, (this.byKind.get(kind) ?? 0) + 1);
  }
  get empty(): boolean {
    return this.byKind.size === 0;
  }
  list(): TextHit[] {
    return [...this.byKind].map(([kind, count]) => ({ kind, count }));
  }
}

/**
 * Runs `pass` over `text` from `from`, taking the matches that start before `limit`. Returns the
 * output for text[from, end) and `end`: `limit`, or further where the last match taken ends past it.
 */
function scan(pass: Pass, text: string, from: number, limit: number, counts: Counts): { out: string; end: number } {
  const parts: string[] = [];
  let pos = from;
  pass.regex.lastIndex = from;
  for (let m = pass.regex.exec(text); m !== null && m.index < limit; m = pass.regex.exec(text)) {
    const { text: replaced, kind } = pass.replace(m);
    parts.push(text.slice(pos, m.index), replaced);
    counts.add(kind);
    pos = m.index + m[0].length;
  }
  const end = Math.max(pos, limit);
  parts.push(text.slice(pos, end));
  return { out: parts.join(''), end };
}

/** One pass over a text that arrives in pieces: holds back what a match starting there could still need. */
class WindowedPass {
  /** Unscanned input, preceded by `context` characters already scanned (for look-behinds). */
  private pending = '';
  private context = 0;
  private readonly holdBack: number;

  constructor(
    private readonly pass: Pass,
    private readonly counts: Counts,
  ) {
    this.holdBack = pass.maxMatch + CONTEXT;
  }

  push(text: string, final: boolean): string {
    const buf = this.pending + text;
    const limit = final ? buf.length : buf.length - this.holdBack;
    if (limit <= this.context) {
      this.pending = buf;
      return '';
    }
    const { out, end } = scan(this.pass, buf, this.context, limit, this.counts);
    const keepFrom = Math.max(0, end - CONTEXT);
    this.pending = buf.slice(keepFrom);
    this.context = end - keepFrom;
    return out;
  }
}

/**
 * Redaction of one blob fed in pieces (`write` each piece, then `end`): the output, concatenated,
 * is the redacted blob. Memory stays within a window plus what the patterns hold back.
 */
export class BlobRedaction {
  private readonly counts = new Counts();
  private readonly stages: WindowedPass[];
  private input: Buffer[] = [];
  private inputSize = 0;

  constructor(
    passes: readonly Pass[],
    private readonly window = WINDOW,
  ) {
    this.stages = passes.map((p) => new WindowedPass(p, this.counts));
  }

  write(chunk: Buffer): Buffer {
    this.input.push(chunk);
    this.inputSize += chunk.length;
    return this.inputSize >= this.window ? this.run(false) : EMPTY;
  }

  end(): Buffer {
    return this.run(true);
  }

  get hits(): TextHit[] {
    return this.counts.list();
  }

  private run(final: boolean): Buffer {
    let text = Buffer.concat(this.input, this.inputSize).toString('latin1');
    this.input = [];
    this.inputSize = 0;
    for (const stage of this.stages) text = stage.push(text, final);
    return Buffer.from(text, 'latin1');
  }
}

const EMPTY = Buffer.alloc(0);

/** A blob whose first bytes hold a NUL is binary (weights, archives, images): never rewritten. */
export function looksBinary(head: Buffer): boolean {
  return head.subarray(0, BINARY_SNIFF_BYTES).includes(0);
}

export class SecretRedactor {
  /** Passes over JavaScript strings (event data). */
  private readonly textPasses: Pass[];
  /** Passes over latin1 strings of bytes (blobs): known values as their UTF-8 bytes. */
  private readonly bytePasses: Pass[];
  readonly secrets: readonly KnownSecret[];

  constructor(secrets: readonly KnownSecret[] = []) {
    this.secrets = secrets.filter((s) => s.value.length >= MIN_SECRET_LENGTH);
    const asText = literalPass(this.secrets, (s) => s);
    const asBytes = literalPass(this.secrets, (s) => Buffer.from(s, 'utf8').toString('latin1'));
    this.textPasses = asText ? [asText, SHAPES] : [SHAPES];
    this.bytePasses = asBytes ? [asBytes, SHAPES] : [SHAPES];
  }

  /** A redactor that also knows `more`. */
  with(more: readonly KnownSecret[]): SecretRedactor {
    return new SecretRedactor([...this.secrets, ...more]);
  }

  redactText(s: string): { text: string; hits: TextHit[] } {
    const counts = new Counts();
    let text = s;
    for (const pass of this.textPasses) text = scan(pass, text, 0, text.length, counts).out;
    return counts.empty ? { text: s, hits: [] } : { text, hits: counts.list() };
  }

  /**
   * Redacts every string (and object key) in JSON event data. Returns the input itself when nothing
   * was found, else a copy with only the changed branches rebuilt.
   */
  redactData<T>(data: T): { data: T; hits: FieldHit[] } {
    const hits: FieldHit[] = [];
    const out = this.walk(data, '', hits) as T;
    return { data: out, hits };
  }

  /**
   * Redacts a text blob; null when it is binary (a NUL in its first 8 KiB) or holds nothing to
   * redact. The bytes are read one char per byte, so anything not matched comes out as it went in.
   */
  redactBlob(bytes: Buffer): { bytes: Buffer; hits: TextHit[] } | null {
    if (looksBinary(bytes)) return null;
    const counts = new Counts();
    let text = bytes.toString('latin1');
    for (const pass of this.bytePasses) text = scan(pass, text, 0, text.length, counts).out;
    return counts.empty ? null : { bytes: Buffer.from(text, 'latin1'), hits: counts.list() };
  }

  /**
   * A redaction of one blob fed in pieces (the caller decides text or binary from its first bytes);
   * input is scanned once `windowBytes` of it have gathered.
   */
  blob(windowBytes?: number): BlobRedaction {
    return new BlobRedaction(this.bytePasses, windowBytes);
  }

  private walk(value: unknown, path: string, hits: FieldHit[]): unknown {
    if (typeof value === 'string') return this.redactField(value, path, hits);
    if (Array.isArray(value)) {
      let copy: unknown[] | null = null;
      value.forEach((item, i) => {
        const next = this.walk(item, `${path}[${i}]`, hits);
        if (next !== item) (copy ??= value.slice())[i] = next;
      });
      return copy ?? value;
    }
    if (value !== null && typeof value === 'object') {
      let changed = false;
      const entries = Object.entries(value).map(([key, item]): [string, unknown] => {
        const { text: redactedKey, hits: inKey } = this.redactText(key);
        for (const h of inKey) hits.push({ field: `${fieldPath(path, redactedKey)}{key}`, ...h }); // the key itself, not its value
        const next = this.walk(item, fieldPath(path, redactedKey), hits);
        if (next !== item || redactedKey !== key) changed = true;
        return [redactedKey, next];
      });
      // Rebuilt in the original key order, so the stored JSON keeps its shape.
      return changed ? Object.fromEntries(entries) : value;
    }
    return value;
  }

  private redactField(s: string, field: string, hits: FieldHit[]): string {
    const { text, hits: found } = this.redactText(s);
    for (const h of found) hits.push({ field, ...h });
    return text;
  }
}

const IDENTIFIER = /^[A-Za-z_$][A-Za-z0-9_$]*$/;

/** The JSON path of `key` inside `parent` (`argv[2]`, `chunk.key`, `details["a b"]`). */
export function fieldPath(parent: string, key: string): string {
  if (IDENTIFIER.test(key)) return parent ? `${parent}.${key}` : key;
  return `${parent}[${JSON.stringify(key)}]`;
}

/** Environment variable names that hold credentials (API keys, tokens, passwords). */
const CREDENTIAL_NAME = /(?:^|_)(?:API_?KEY|ACCESS_?KEY|SECRET(?:_?ACCESS)?_?KEY|SECRET|TOKEN|PASSWORD|PASSWD|CREDENTIALS?|PRIVATE_?KEY|AUTH_?KEY)$/i;

/**
 * The credentials the harness knows: the run's tokens and every credential-named variable of its
 * environment (`OPENAI_API_KEY`, `HF_TOKEN`, `A2RL_JUDGE_API_KEY`…), plus passwords written inside
 * URL-valued variables (`postgres://user:pw@host`). Paths are not credentials and are left out.
 */
export function knownSecrets(opts: { runToken?: string; gatewayToken?: string; env?: Record<string, string | undefined> }): KnownSecret[] {
  const secrets: KnownSecret[] = [];
  if (opts.runToken) secrets.push({ kind: 'run-token', value: opts.runToken });
  if (opts.gatewayToken) secrets.push({ kind: 'gateway-token', value: opts.gatewayToken });
  for (const [name, raw] of Object.entries(opts.env ?? {})) {
    const value = raw?.trim();
    if (!value) continue;
    if (CREDENTIAL_NAME.test(name) && !value.startsWith('/')) secrets.push({ kind: `credential:${name}`, value });
    const password = urlPassword(value);
    if (password) secrets.push({ kind: `credential:${name}`, value: password });
  }
  return secrets.filter((s) => s.value.length >= MIN_SECRET_LENGTH);
}

function urlPassword(value: string): string | null {
  if (!/^[a-z][a-z0-9+.-]*:\/\/[^/\s]*:[^/\s]*@/i.test(value)) return null;
  try {
    const password = decodeURIComponent(new URL(value).password);
    return password || null;
  } catch {
    return null;
  }
}
