import { Readable } from 'node:stream';
import { describe, expect, it } from '@jest/globals';
import { ArtifactNotFoundError, type ArtifactStore } from '../artifacts/artifact-store.port.js';
import { BlobIntegrityError, eventBlobs, isBinaryContent, pickEventBlob, readableText, readEventBlob, readEventBlobHead } from './event-blob.js';
import { sha } from '../../test/testing/helpers.js';
import { BodyStore } from '../llm-gateway/body-store.js';

const ref = (text: string) => ({ sha256: sha(text), size: Buffer.byteLength(text), key: `sha256/${sha(text).slice(0, 2)}/${sha(text)}` });

/** An artifact store holding `blobs` by sha256 (only get is used). */
const storeOf = (blobs: Record<string, string>): ArtifactStore => ({
  get: async (sha256: string) => {
    if (!(sha256 in blobs)) throw new ArtifactNotFoundError(sha256);
    return Readable.from([Buffer.from(blobs[sha256])]);
  },
}) as unknown as ArtifactStore;

describe('the blobs an event references', () => {
  it("names them by the payload field: a model call's request and response, a file revision's content", () => {
    const call = { data: { provider: 'anthropic', request: ref('{"a":1}'), response: ref('data: x'), status: 200 } };
    expect(eventBlobs(call).map((b) => b.part)).toEqual(['request', 'response']);
    const file = { data: { path: 'code/a.py', op: 'modify', ...ref('print(1)') } };
    expect(eventBlobs(file)).toEqual([{ part: 'content', sha256: sha('print(1)'), size: 8 }]);
    expect(eventBlobs({ data: { pid: 1, argv: ['x'] } })).toEqual([]);
    expect(eventBlobs({ data: { chunk: { sha256: 'not-a-hash', size: 1 } } })).toEqual([]);
  });

  it('reads a blob checked against its recorded sha256 and size, and says when it is missing or other bytes', async () => {
    const body = '{"messages":[]}';
    const [blob] = eventBlobs({ data: { request: ref(body) } });
    expect((await readEventBlob(storeOf({ [sha(body)]: body }), blob, 'request of event 3', 1024)).toString()).toBe(body);
    await expect(readEventBlob(storeOf({}), blob, 'request of event 3', 1024)).rejects.toThrow(new BlobIntegrityError(`request of event 3: blob ${sha(body)} is missing from the artifact store`));
    await expect(readEventBlob(storeOf({ [sha(body)]: '{"messages":[1]}' }), blob, 'request of event 3', 1024)).rejects.toThrow(/the stored bytes .* are not the recorded ones/);
    await expect(readEventBlob(storeOf({ [sha(body)]: body }), blob, 'request of event 3', 4)).rejects.toThrow(/more than the 4 shown at once: write it to a file with --raw/);
  });

  it('picks the part asked for, else the first; none when the event has no such part', () => {
    const blobs = eventBlobs({ data: { request: ref('{"a":1}'), response: ref('data: x') } });
    expect(pickEventBlob(blobs, undefined)?.part).toBe('request');
    expect(pickEventBlob(blobs, 'response')?.part).toBe('response');
    expect(pickEventBlob(blobs, 'chunk')).toBeUndefined();
    expect(pickEventBlob([], undefined)).toBeUndefined();
  });

  it('reads the head of a blob for display: whole and checked when it fits, cut and unchecked past the cap', async () => {
    const body = 'x'.repeat(10);
    const [blob] = eventBlobs({ data: { chunk: ref(body) } });
    expect(await readEventBlobHead(storeOf({ [sha(body)]: body }), blob, 'chunk of event 5', 10)).toEqual({ bytes: Buffer.from(body), truncated: false });
    expect(await readEventBlobHead(storeOf({ [sha(body)]: body }), blob, 'chunk of event 5', 4)).toEqual({ bytes: Buffer.from('xxxx'), truncated: true });
    await expect(readEventBlobHead(storeOf({}), blob, 'chunk of event 5', 10)).rejects.toThrow(new BlobIntegrityError(`chunk of event 5: blob ${sha(body)} is missing from the artifact store`));
    await expect(readEventBlobHead(storeOf({ [sha(body)]: 'y'.repeat(10) }), blob, 'chunk of event 5', 10)).rejects.toThrow(/^chunk of event 5: the stored bytes \(10 B, sha256 \w+\) are not the recorded ones/);
    await expect(readEventBlobHead(storeOf({ [sha(body)]: 'x'.repeat(9) }), blob, 'chunk of event 5', 10)).rejects.toThrow(BlobIntegrityError);
  });

  it('tells binary from text and pretty-prints JSON', () => {
    expect(isBinaryContent(Buffer.from('a\0b'))).toBe(true);
    expect(isBinaryContent(Buffer.from([0xff, 0xfe, 0x41]))).toBe(true);
    expect(isBinaryContent(Buffer.from('héllo'))).toBe(false);
    expect(readableText('{"a":[1,2]}')).toEqual({ format: 'json', text: '{\n  "a": [\n    1,\n    2\n  ]\n}\n' });
    expect(readableText('{not json')).toEqual({ format: 'text', text: '{not json' });
  });
});

describe('a model-call body stored as pieces', () => {
  it('is part "request", rebuilt from its pieces and checked: a changed piece is an integrity error', async () => {
    const blobs: Record<string, string> = {};
    const bodies = new BodyStore({ storeBlob: async (b) => ((blobs[sha(b.toString())] = b.toString()), ref(b.toString())) });
    const body = JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'x'.repeat(600) }] });
    const stored = await bodies.store(Buffer.from(body), 'messages', 'request');
    if (!('pieces' in stored)) throw new Error('expected pieces');
    const parts = eventBlobs({ data: { requestPieces: stored.pieces, response: ref('{}') } });
    expect(parts).toEqual([{ part: 'request', sha256: sha(body), size: body.length }, { part: 'response', sha256: sha('{}'), size: 2 }]);
    expect((await readEventBlob(storeOf(blobs), parts[0], 'request of event 7', 1 << 20)).toString()).toBe(body);
    const piece = stored.pieces.pieces[0];
    await expect(readEventBlob(storeOf({ ...blobs, [piece]: blobs[piece].replace('xx', 'xy') }), parts[0], 'request of event 7', 1 << 20)).rejects.toThrow(BlobIntegrityError);
    const { [piece]: _gone, ...missing } = blobs;
    await expect(readEventBlob(storeOf(missing), parts[0], 'request of event 7', 1 << 20)).rejects.toThrow(/request of event 7: .*is missing/);
  });
});
