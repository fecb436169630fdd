import { createHash, randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import {
  ArtifactIntegrityError,
  ArtifactNotFoundError,
  type ArtifactStore,
} from '../../modules/artifacts/artifact-store.port.js';

export interface ArtifactStoreFixture {
  store: ArtifactStore;
  cleanup(): Promise<void>;
}

export interface ArtifactStoreContractOptions {
  /** Size of the "large blob" case; adapters whose test backend limits object size may lower it. */
  largeBlobBytes?: number;
}

export function sha256Hex(bytes: Buffer): string {
  return createHash('sha256').update(bytes).digest('hex');
}

export function declare(bytes: Buffer): { sha256: string; size: number } {
  return { sha256: sha256Hex(bytes), size: bytes.length };
}

export async function readAll(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

/** A body delivered in small chunks, as a file or socket would, rather than as one buffer. */
export function chunked(bytes: Buffer, chunkBytes = 64 * 1024): Readable {
  return Readable.from(
    (function* () {
      for (let offset = 0; offset < bytes.length; offset += chunkBytes) yield bytes.subarray(offset, offset + chunkBytes);
    })(),
  );
}

/** The behaviour every ArtifactStore adapter must have; each adapter's spec runs it once. */
export function artifactStoreContract(
  name: string,
  factory: () => Promise<ArtifactStoreFixture>,
  options: ArtifactStoreContractOptions = {},
): void {
  const largeBlobBytes = options.largeBlobBytes ?? 5 * 1024 * 1024;

  describe(`ArtifactStore contract: ${name}`, () => {
    let fixture: ArtifactStoreFixture;
    let store: ArtifactStore;

    beforeEach(async () => {
      fixture = await factory();
      store = fixture.store;
    });

    afterEach(async () => {
      await store.close();
      await fixture.cleanup();
    });

    it('stores a Buffer and streams the same bytes back', async () => {
      const bytes = Buffer.from('hello artifact store');
      const result = await store.put(bytes, declare(bytes));
      expect(result).toEqual({ ...declare(bytes), key: `sha256/${sha256Hex(bytes).slice(0, 2)}/${sha256Hex(bytes)}`, created: true });
      expect(await readAll(await store.get(sha256Hex(bytes)))).toEqual(bytes);
    });

    it('stores a Readable body and streams the same bytes back', async () => {
      const bytes = randomBytes(200 * 1024);
      await store.put(chunked(bytes), declare(bytes));
      // Buffer.equals, not toEqual: jest compares large buffers element by element, taking seconds.
      expect((await readAll(await store.get(sha256Hex(bytes)))).equals(bytes)).toBe(true);
    });

    it('keys blobs as sha256/<first two hex>/<hex>', async () => {
      const bytes = Buffer.from('layout');
      const sha = sha256Hex(bytes);
      const result = await store.put(bytes, declare(bytes));
      expect(result.key).toBe(`sha256/${sha.slice(0, 2)}/${sha}`);
      expect((await store.stat(sha))?.key).toBe(result.key);
    });

    it('reports stat and exists for present and absent blobs', async () => {
      const bytes = Buffer.from('stat me');
      const sha = sha256Hex(bytes);
      expect(await store.exists(sha)).toBe(false);
      expect(await store.stat(sha)).toBeNull();
      await store.put(bytes, declare(bytes));
      expect(await store.exists(sha)).toBe(true);
      expect(await store.stat(sha)).toEqual({ key: `sha256/${sha.slice(0, 2)}/${sha}`, sha256: sha, size: bytes.length });
    });

    it('treats a second put of the same content as a no-op reporting created:false', async () => {
      const bytes = Buffer.from('twice');
      expect((await store.put(bytes, declare(bytes))).created).toBe(true);
      expect((await store.put(chunked(bytes), declare(bytes))).created).toBe(false);
      expect(await readAll(await store.get(sha256Hex(bytes)))).toEqual(bytes);
    });

    it('rejects a body whose sha256 differs from the declared one and stores nothing', async () => {
      const bytes = Buffer.from('actual content');
      const claimed = sha256Hex(Buffer.from('claimed content'));
      await expect(store.put(bytes, { sha256: claimed, size: bytes.length })).rejects.toThrow(ArtifactIntegrityError);
      await expect(store.put(bytes, { sha256: claimed, size: bytes.length })).rejects.toThrow(
        `declared sha256 ${claimed}, actual ${sha256Hex(bytes)}`,
      );
      expect(await store.exists(claimed)).toBe(false);
      expect(await store.exists(sha256Hex(bytes))).toBe(false);
    });

    it('rejects a body shorter than declared and stores nothing', async () => {
      const bytes = Buffer.from('short body');
      const declared = { sha256: sha256Hex(bytes), size: bytes.length + 1 };
      await expect(store.put(chunked(bytes, 3), declared)).rejects.toThrow(ArtifactIntegrityError);
      expect(await store.exists(declared.sha256)).toBe(false);
    });

    it('rejects a body longer than declared and stores nothing', async () => {
      const bytes = Buffer.from('long body');
      const declared = { sha256: sha256Hex(bytes), size: bytes.length - 1 };
      await expect(store.put(chunked(bytes, 3), declared)).rejects.toThrow(ArtifactIntegrityError);
      expect(await store.exists(declared.sha256)).toBe(false);
    });

    it('rejects a body whose bytes differ from a blob that is already stored', async () => {
      const bytes = Buffer.from('stored once');
      await store.put(bytes, declare(bytes));
      const other = Buffer.from('stored twice');
      await expect(store.put(other, { sha256: sha256Hex(bytes), size: other.length })).rejects.toThrow(ArtifactIntegrityError);
      expect(await readAll(await store.get(sha256Hex(bytes)))).toEqual(bytes);
    });

    it('stores and returns an empty blob', async () => {
      const empty = Buffer.alloc(0);
      const result = await store.put(empty, declare(empty));
      expect(result).toMatchObject({ size: 0, created: true });
      expect(await store.stat(sha256Hex(empty))).toMatchObject({ size: 0 });
      expect(await readAll(await store.get(sha256Hex(empty)))).toEqual(empty);
    });

    it(`streams a ${largeBlobBytes}-byte blob in and out intact`, async () => {
      const bytes = randomBytes(largeBlobBytes);
      const result = await store.put(chunked(bytes), declare(bytes));
      expect(result).toMatchObject({ size: bytes.length, created: true });
      expect(sha256Hex(await readAll(await store.get(sha256Hex(bytes))))).toBe(sha256Hex(bytes));
    });

    it('throws ArtifactNotFoundError when getting a blob that is not stored', async () => {
      const sha = sha256Hex(Buffer.from('never stored'));
      await expect(store.get(sha)).rejects.toThrow(ArtifactNotFoundError);
    });

    it('rejects malformed sha256 arguments', async () => {
      await expect(store.get('ABC')).rejects.toThrow(TypeError);
      await expect(store.stat('../../etc/passwd')).rejects.toThrow(TypeError);
      await expect(store.put(Buffer.from('x'), { sha256: 'nope', size: 1 })).rejects.toThrow(TypeError);
      await expect(store.put(Buffer.from('x'), { sha256: sha256Hex(Buffer.from('x')), size: -1 })).rejects.toThrow(TypeError);
    });
  });
}
