import { describe, expect, it } from '@jest/globals';
import { createHash } from 'node:crypto';
import { BodyStore, type StoredBody } from './body-store.js';
import { BodyRebuildError, bodyShape, decodeManifest, encodeManifest, joinSegments, rebuildBody, splitBody, type PiecesRef } from './request-pieces.js';

const sha = (b: Buffer | string) => createHash('sha256').update(b).digest('hex');
const long = (tag: string, n = 120) => `${tag} ${'lorem ipsum '.repeat(Math.ceil(n / 12))}`.slice(0, n);

/** An in-memory content-addressed store, as the run's artifact store is; `redact` plays the redacting store. */
function memoryStore(redact: (b: Buffer) => Buffer = (b) => b) {
  const blobs = new Map<string, Buffer>();
  const puts: string[] = [];
  const storeBlob = async (body: Buffer) => {
    const stored = redact(body);
    const sha256 = sha(stored);
    puts.push(sha256);
    blobs.set(sha256, Buffer.from(stored));
    return { sha256, size: stored.length, key: `sha256/${sha256.slice(0, 2)}/${sha256}` };
  };
  const readBlob = async (sha256: string) => blobs.get(sha256) ?? null;
  const bytes = () => [...blobs.values()].reduce((n, b) => n + b.length, 0);
  return { blobs, puts, storeBlob, readBlob, bytes };
}

const rebuildOf = (stored: StoredBody, readBlob: (sha: string) => Promise<Buffer | null>) =>
  rebuildBody('whole' in stored ? { whole: stored.whole } : { pieces: stored.pieces }, readBlob);

// Bodies as agents write them, with what a re-serializer would change: key order, escapes, white space, raw non-ASCII.
const BODIES: Record<string, { api: string; text: string }> = {
  'anthropic messages': {
    api: 'messages',
    text: `{"model":"claude-sonnet-4-5","max_tokens":4096,"system":[{"type":"text","text":"${long('You are Claude Code')}"}],"messages":[{"role":"user","content":"${long('fix the \\u00e9l\\u00e8ve bug \\ud83d\\ude00')}"},{"content":[{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"${long('ls -la')}"}}],"role":"assistant"},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"${long('total 12 élève 😀')}"}]}],"tools":[{"name":"Bash","input_schema":{"type":"object","properties":{"command":{"type":"string"}}},"description":"${long('Runs a shell command')}"}],"stream":true}`,
  },
  'openai chat.completions (pretty-printed)': {
    api: 'chat.completions',
    text: JSON.stringify({ model: 'gpt-5', messages: [{ role: 'system', content: long('You are Codex') }, { role: 'user', content: long('run the tests') }, { role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'shell', arguments: JSON.stringify({ cmd: long('pytest -q') }) } }] }, { role: 'tool', tool_call_id: 'c1', content: long('3 passed') }], tools: [{ type: 'function', function: { name: 'shell', description: long('a shell') } }] }, null, 2),
  },
  'openai responses (odd spacing)': {
    api: 'responses',
    text: `{ "model" : "gpt-5" ,\r\n "instructions" :"${long('You are a coding agent')}", "input" : [ {"type":"message","role":"user","content":[{"type":"input_text","text":"${long('hello \\"quoted\\" \\\\ back')}"}]} , {"type":"function_call_output","call_id":"c1","output":"${long('done')}"} ]\t}`,
  },
  'gemini generateContent': {
    api: 'generateContent',
    text: `{"contents":[{"role":"user","parts":[{"text":"${long('Write a haiku')}"}]},{"role":"model","parts":[{"functionCall":{"name":"run","args":{"cmd":"${long('echo')}"}}}]}],"systemInstruction":{"parts":[{"text":"${long('Be brief')}"}]},"generationConfig":{"temperature":0.0,"maxOutputTokens":1e3}}`,
  },
};

describe('request pieces: cutting and joining', () => {
  for (const [name, { api, text }] of Object.entries(BODIES)) {
    it(`${name}: the segments join to the exact bytes, with each message as a piece`, () => {
      const body = Buffer.from(text, 'utf8');
      const split = splitBody(body, bodyShape(api, 'request'));
      expect(split).not.toBeNull();
      expect(joinSegments(split!.segments, (s) => split!.pieces.get(s)!).equals(body)).toBe(true);
      // Every piece is an exact JSON value of the body (parses on its own) and none is small.
      for (const piece of split!.pieces.values()) {
        expect(() => JSON.parse(piece.toString('utf8'))).not.toThrow();
        expect(piece.length).toBeGreaterThanOrEqual(64);
      }
      expect(split!.pieces.size).toBeGreaterThanOrEqual(2);
    });
  }

  it('writes and reads back a manifest: texts with new lines, escapes and non-ASCII, pieces, a parent', () => {
    const m = { parent: sha('p'), entries: [{ from: 0, count: 3 }, { text: '},{"a":"x\n\\n é 😀"' }, { piece: sha('x') }, { text: '\n' }, { from: 7, count: 2 }] };
    expect(decodeManifest(encodeManifest(m))).toEqual(m);
    expect(decodeManifest(encodeManifest({ entries: [] }))).toEqual({ entries: [] });
    expect(() => decodeManifest(Buffer.from('a2rl-llm-body/1\nt 99\nshort\n'))).toThrow(BodyRebuildError);
    expect(() => decodeManifest(Buffer.from('{"segments":[]}'))).toThrow(/not an a2rl-llm-body\/1 manifest/);
  });

  it('cuts nothing it cannot join back: not an object, not JSON, inline text not UTF-8', () => {
    expect(splitBody(Buffer.from(`[${JSON.stringify(long('x', 200))}]`), bodyShape('messages', 'request'))).toBeNull();
    expect(splitBody(Buffer.from(`data: {"x":"${long('y', 600)}"}\n\n`), bodyShape('models', 'response'))).toBeNull();
    expect(splitBody(Buffer.from(`{"x":"${long('y', 600)}"`), bodyShape('models', 'response'))).toBeNull();
    const notUtf8 = (where: string) => Buffer.concat([Buffer.from(`{"a":"${long('z', 600)}","${where}`), Buffer.from([0xff, 0xfe]), Buffer.from('":1}')]);
    expect(splitBody(notUtf8('k'), bodyShape('models', 'response'))).toBeNull();
    // Inside a piece, bytes that are no UTF-8 are kept as they are: the piece is a byte range.
    const inPiece = Buffer.concat([Buffer.from(`{"a":"${long('z', 1100)}`), Buffer.from([0xff, 0xfe]), Buffer.from('"}')]);
    const split = splitBody(inPiece, bodyShape('models', 'response'))!;
    expect(joinSegments(split.segments, (s) => split.pieces.get(s)!).equals(inPiece)).toBe(true);
  });
});

describe('BodyStore: bodies stored once per piece', () => {
  /** A growing anthropic conversation: call n sends call n-1's messages plus an answer and a tool result. */
  function conversation(calls: number): Buffer[] {
    const system = JSON.stringify([{ type: 'text', text: long('system prompt', 2000) }]);
    const tools = JSON.stringify([{ name: 'Bash', description: long('tool definitions', 3000) }]);
    const messages: string[] = [JSON.stringify({ role: 'user', content: long('the task', 500) })];
    const bodies: Buffer[] = [];
    for (let i = 0; i < calls; i++) {
      bodies.push(Buffer.from(`{"model":"m","messages":[${messages.join(',')}],"system":${system},"tools":${tools},"max_tokens":100}`));
      messages.push(JSON.stringify({ role: 'assistant', content: [{ type: 'tool_use', id: `t${i}`, name: 'Bash', input: { command: long(`cmd ${i}`, 200) } }] }));
      messages.push(JSON.stringify({ role: 'user', content: [{ type: 'tool_result', tool_use_id: `t${i}`, content: long(`result ${i}`, 800) }] }));
    }
    return bodies;
  }

  it('stores each message, the system prompt and the tools once, and rebuilds every request exactly', async () => {
    const store = memoryStore();
    const bodies = new BodyStore({ storeBlob: store.storeBlob });
    const sent = conversation(3);
    const stored: StoredBody[] = [];
    for (const body of sent) {
      const s = await bodies.store(body, 'messages', 'request');
      bodies.adopt(s);
      stored.push(s);
    }
    expect(stored.every((s) => 'pieces' in s)).toBe(true);
    for (const [i, s] of stored.entries()) expect((await rebuildOf(s, store.readBlob)).equals(sent[i])).toBe(true);
    // The third call names its parent and only what it appended (the last messages, system, tools).
    const third = (stored[2] as { pieces: PiecesRef }).pieces;
    const manifest = decodeManifest(store.blobs.get(third.manifest.sha256)!);
    expect(manifest.parent).toBe((stored[1] as { pieces: PiecesRef }).pieces.manifest.sha256);
    expect(third.pieces.length).toBe(2); // the system prompt and tools are ranges of the parent's
    expect(manifest.entries.filter((e) => 'from' in e).length).toBeGreaterThanOrEqual(2);
    // Each piece was stored (put) at most once per call that appended it: the store holds content once.
    const unique = new Set(sent.flatMap((b) => [...splitBody(b, bodyShape('messages', 'request'))!.pieces.values()].map((p) => p.toString())));
    const pieceBytes = [...unique].reduce((n, p) => n + Buffer.byteLength(p), 0);
    const manifests = stored.reduce((n, s) => n + (s as { pieces: PiecesRef }).pieces.manifest.size, 0);
    expect(store.bytes()).toBe(pieceBytes + manifests);
    expect(store.bytes()).toBeLessThan(sent.reduce((n, b) => n + b.length, 0));
  });

  it('names as parent only a request that comes before it in the record order (so its event is recorded first)', async () => {
    const store = memoryStore();
    const bodies = new BodyStore({ storeBlob: store.storeBlob });
    const [first, second] = conversation(2);
    bodies.adopt(await bodies.store(first, 'messages', 'request', 20));
    const earlier = await bodies.store(second, 'messages', 'request', 10);
    const later = await bodies.store(second, 'messages', 'request', 30);
    const parentOf = (s: StoredBody) => decodeManifest(store.blobs.get((s as { pieces: PiecesRef }).pieces.manifest.sha256)!).parent;
    expect(parentOf(earlier)).toBeUndefined();
    expect(parentOf(later)).toBeDefined();
    for (const s of [earlier, later]) expect((await rebuildOf(s, store.readBlob)).equals(second)).toBe(true);
  });

  it('stores the body whole when the store would redact it, or when it redacted a piece', async () => {
    const body = conversation(1)[0];
    const whole = memoryStore();
    const flagged = await new BodyStore({ storeBlob: whole.storeBlob, wouldRedact: () => true }).store(body, 'messages', 'request');
    expect(flagged).toEqual({ whole: expect.objectContaining({ sha256: sha(body), size: body.length }) });

    const secret = 'system prompt';
    const redacting = memoryStore((b) => Buffer.from(b.toString('utf8').replaceAll(secret, '[REDACTED:x]')));
    const stored = await new BodyStore({ storeBlob: redacting.storeBlob }).store(body, 'messages', 'request');
    expect('whole' in stored).toBe(true);
    const rebuilt = await rebuildOf(stored, redacting.readBlob);
    expect(rebuilt.toString()).toBe(body.toString().replaceAll(secret, '[REDACTED:x]'));
  });

  it('stores small and unsplittable bodies whole (an SSE answer), as runs before pieces did', async () => {
    const store = memoryStore();
    const bodies = new BodyStore({ storeBlob: store.storeBlob });
    const sse = Buffer.from(`event: message_start\ndata: {"x":"${long('y', 800)}"}\n\n`);
    expect(await bodies.store(Buffer.from('{"model":"m"}'), 'messages', 'request')).toEqual({ whole: expect.objectContaining({ size: 13 }) });
    const stored = await bodies.store(sse, 'messages', 'response');
    expect('whole' in stored && (await rebuildOf(stored, store.readBlob)).equals(sse)).toBe(true);
  });

  it('refuses a rebuild that is not the recorded bytes (a piece altered or missing)', async () => {
    const store = memoryStore();
    const bodies = new BodyStore({ storeBlob: store.storeBlob });
    const stored = await bodies.store(conversation(1)[0], 'messages', 'request');
    const ref = (stored as { pieces: PiecesRef }).pieces;
    const victim = ref.pieces[0];
    store.blobs.set(victim, Buffer.from(store.blobs.get(victim)!.toString().replace('lorem', 'LOREM')));
    await expect(rebuildBody({ pieces: ref }, store.readBlob)).rejects.toThrow(BodyRebuildError);
    store.blobs.delete(victim);
    await expect(rebuildBody({ pieces: ref }, store.readBlob)).rejects.toThrow(/is missing/);
  });

  it('reads a whole body recorded before pieces existed (an old event) as before', async () => {
    const store = memoryStore();
    const old = Buffer.from('{"model":"claude-3","messages":[{"role":"user","content":"hi"}]}');
    const ref = await store.storeBlob(old);
    const oldEvent = { request: ref };
    expect((await rebuildBody({ whole: oldEvent.request }, store.readBlob)).equals(old)).toBe(true);
  });
});
