// Why this file exists: s3rver, which the MinIO adapter's contract run uses, cannot do multipart
// uploads, and no real MinIO is available to the test suite. Blobs larger than the configured part
// size take a different path in the adapter (its own CreateMultipartUpload / UploadPart /
// CompleteMultipartUpload / AbortMultipartUpload sequence, see minio-artifact-store.ts), and that path
// carries the guarantees that matter for large checkpoints: bounded memory (parts of at most the part
// size, the body streamed rather than buffered whole) and no visible object unless the whole body
// matched its declaration. So a tiny S3 endpoint built on node:http answers exactly the requests the
// `minio` client sends for the calls the adapter makes, records them, and lets these tests check the
// adapter's traffic. It checks Content-MD5 when sent and ignores signatures.

import { createHash, randomBytes } from 'node:crypto';
import http from 'node:http';
import { Readable } from 'node:stream';
import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { ArtifactIntegrityError, artifactKey } from '../../modules/artifacts/artifact-store.port.js';
import { MinioArtifactStore } from '../../infra/artifacts/minio-artifact-store.js';
import { artifactStoreContract, declare, readAll, sha256Hex } from './artifact-store.contract.js';

const MiB = 1024 * 1024;
const PART_SIZE = 5 * MiB; // the smallest part S3 accepts, so multipart blobs stay small
const BUCKET = 'artifacts';

interface RecordedRequest {
  method: string;
  key: string;
  query: URLSearchParams;
  headers: http.IncomingHttpHeaders;
  bodyBytes: number;
  /** Value of FakeS3.observe() when the request arrived (e.g. bytes the adapter had read from its source). */
  observed: number;
}

class FakeS3 {
  readonly requests: RecordedRequest[] = [];
  readonly objects = new Map<string, Buffer>();
  readonly uploads = new Map<string, { key: string; parts: Map<number, Buffer> }>();
  observe: () => number = () => 0;
  /** Part number whose upload is answered with an error, to simulate a failure mid-upload. */
  failPart: number | undefined;
  private readonly buckets = new Set<string>();
  private readonly server = http.createServer((req, res) => {
    this.handle(req, res).catch((err: Error) => reply(res, 500, errorXml('InternalError', err.message)));
  });
  private nextUploadId = 1;

  async start(): Promise<number> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    return (this.server.address() as { port: number }).port;
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  ofKind(kind: 'CreateMultipartUpload' | 'UploadPart' | 'CompleteMultipartUpload' | 'AbortMultipartUpload' | 'PutObject') {
    return this.requests.filter((r) => kindOf(r) === kind);
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://fake-s3');
    const [bucket = '', ...rest] = url.pathname.slice(1).split('/');
    const key = decodeURIComponent(rest.join('/'));
    const observed = this.observe();
    const body = await readAll(req);
    const request = { method: req.method ?? '', key, query: url.searchParams, headers: req.headers, bodyBytes: body.length, observed };
    this.requests.push(request);

    const md5 = req.headers['content-md5'];
    if (md5 !== undefined && md5 !== createHash('md5').update(body).digest('base64')) {
      return reply(res, 400, errorXml('BadDigest', 'Content-MD5 does not match the body'));
    }
    const uploadId = url.searchParams.get('uploadId');
    switch (`${req.method} ${kindOf(request)}`) {
      case 'HEAD Bucket':
        return reply(res, this.buckets.has(bucket) ? 200 : 404);
      case 'PUT Bucket':
        this.buckets.add(bucket);
        return reply(res, 200);
      case 'HEAD Object': {
        const object = this.objects.get(key);
        if (!object) return reply(res, 404);
        return reply(res, 200, '', { 'Content-Length': object.length, ETag: etag(object), 'Last-Modified': new Date().toUTCString() });
      }
      case 'GET Object': {
        const object = this.objects.get(key);
        if (!object) return reply(res, 404, errorXml('NoSuchKey', 'The specified key does not exist.'));
        return reply(res, 200, object, { ETag: etag(object) });
      }
      case 'PUT PutObject':
        this.objects.set(key, body);
        return reply(res, 200, '', { ETag: etag(body) });
      case 'POST CreateMultipartUpload': {
        const id = `upload-${this.nextUploadId++}`;
        this.uploads.set(id, { key, parts: new Map() });
        return reply(res, 200, `<InitiateMultipartUploadResult><Bucket>${bucket}</Bucket><Key>${key}</Key><UploadId>${id}</UploadId></InitiateMultipartUploadResult>`);
      }
      case 'PUT UploadPart': {
        const partNumber = Number(url.searchParams.get('partNumber'));
        const upload = this.uploads.get(uploadId ?? '');
        if (!upload) return reply(res, 404, errorXml('NoSuchUpload', uploadId ?? ''));
        if (partNumber === this.failPart) return reply(res, 400, errorXml('InvalidRequest', 'injected part failure'));
        upload.parts.set(partNumber, body);
        return reply(res, 200, '', { ETag: etag(body) });
      }
      case 'POST CompleteMultipartUpload': {
        const upload = this.uploads.get(uploadId ?? '');
        if (!upload) return reply(res, 404, errorXml('NoSuchUpload', uploadId ?? ''));
        const numbers = [...body.toString().matchAll(/<PartNumber>(\d+)<\/PartNumber>/g)].map((m) => Number(m[1]));
        const parts = numbers.map((n) => upload.parts.get(n));
        if (parts.some((p) => p === undefined)) return reply(res, 400, errorXml('InvalidPart', 'unknown part'));
        this.objects.set(key, Buffer.concat(parts as Buffer[]));
        this.uploads.delete(uploadId ?? '');
        return reply(res, 200, `<CompleteMultipartUploadResult><Location>http://fake-s3/${bucket}/${key}</Location><Bucket>${bucket}</Bucket><Key>${key}</Key><ETag>"multipart"</ETag></CompleteMultipartUploadResult>`);
      }
      case 'DELETE AbortMultipartUpload':
        this.uploads.delete(uploadId ?? '');
        return reply(res, 204);
      default:
        return reply(res, 501, errorXml('NotImplemented', `${req.method} ${req.url} is not part of the fake`));
    }
  }
}

function kindOf(r: { method: string; key: string; query: URLSearchParams }): string {
  if (!r.key) return 'Bucket';
  if (r.query.has('uploads')) return 'CreateMultipartUpload';
  if (r.query.has('uploadId')) {
    if (r.method === 'PUT') return 'UploadPart';
    return r.method === 'POST' ? 'CompleteMultipartUpload' : 'AbortMultipartUpload';
  }
  return r.method === 'PUT' ? 'PutObject' : 'Object';
}

function reply(res: http.ServerResponse, status: number, body: string | Buffer = '', headers: http.OutgoingHttpHeaders = {}): void {
  res.writeHead(status, { 'Content-Length': Buffer.byteLength(body), ...headers });
  res.end(body);
}

function errorXml(code: string, message: string): string {
  return `<?xml version="1.0" encoding="UTF-8"?><Error><Code>${code}</Code><Message>${message}</Message></Error>`;
}

function etag(bytes: Buffer): string {
  return `"${createHash('md5').update(bytes).digest('hex')}"`;
}

/** A body produced 256 KiB at a time on demand, counting how much the consumer has pulled. */
function meteredSource(bytes: Buffer): { stream: Readable; pulled(): number } {
  let pulled = 0;
  const stream = Readable.from(
    (function* () {
      for (let offset = 0; offset < bytes.length; offset += 256 * 1024) {
        const chunk = bytes.subarray(offset, offset + 256 * 1024);
        pulled += chunk.length;
        yield chunk;
      }
    })(),
  );
  return { stream, pulled: () => pulled };
}

function url(port: number): string {
  return `s3://KEY:SECRET@127.0.0.1:${port}/${BUCKET}?ssl=false&partSize=${PART_SIZE}`;
}

artifactStoreContract(
  'minio (fake multipart S3)',
  async () => {
    const fake = new FakeS3();
    const port = await fake.start();
    return { store: await MinioArtifactStore.open(url(port)), cleanup: () => fake.stop() };
  },
  { largeBlobBytes: 2 * PART_SIZE + 12345 }, // three parts
);

describe('MinioArtifactStore multipart uploads', () => {
  let fake: FakeS3;
  let store: MinioArtifactStore;

  beforeEach(async () => {
    fake = new FakeS3();
    store = await MinioArtifactStore.open(url(await fake.start()));
  });

  afterEach(async () => {
    await store.close();
    await fake.stop();
  });

  it('uploads a blob larger than the part size in parts of at most the part size, each with Content-MD5', async () => {
    const bytes = randomBytes(2 * PART_SIZE + 777);
    const result = await store.put(meteredSource(bytes).stream, declare(bytes));

    expect(result.created).toBe(true);
    expect(fake.ofKind('CreateMultipartUpload')).toHaveLength(1);
    const parts = fake.ofKind('UploadPart');
    expect(parts.map((p) => p.bodyBytes)).toEqual([PART_SIZE, PART_SIZE, 777]);
    expect(parts.map((p) => p.query.get('partNumber'))).toEqual(['1', '2', '3']);
    expect(parts.every((p) => typeof p.headers['content-md5'] === 'string')).toBe(true);
    expect(fake.ofKind('CompleteMultipartUpload')).toHaveLength(1);
    expect(fake.ofKind('PutObject')).toHaveLength(0);
    expect(fake.objects.get(artifactKey(sha256Hex(bytes)))?.equals(bytes)).toBe(true);
    expect((await readAll(await store.get(sha256Hex(bytes)))).equals(bytes)).toBe(true);
  });

  it('streams the body: each part is sent before the source is read much further, never all at once', async () => {
    const bytes = randomBytes(4 * PART_SIZE);
    const source = meteredSource(bytes);
    fake.observe = source.pulled;
    await store.put(source.stream, declare(bytes));

    const parts = fake.ofKind('UploadPart');
    expect(parts).toHaveLength(4);
    // When part n arrives the adapter has read part n plus at most stream buffering (well under a part).
    parts.forEach((part, index) => expect(part.observed).toBeLessThan((index + 2) * PART_SIZE));
    expect(parts[0]!.observed).toBeLessThan(bytes.length);
  });

  it('sends a blob up to the part size as one PutObject of exactly the declared size', async () => {
    const bytes = randomBytes(PART_SIZE);
    await store.put(meteredSource(bytes).stream, declare(bytes));
    const puts = fake.ofKind('PutObject');
    expect(puts).toHaveLength(1);
    expect(puts[0]!.headers['content-length']).toBe(String(PART_SIZE));
    expect(fake.ofKind('CreateMultipartUpload')).toHaveLength(0);
  });

  it('aborts a multipart upload whose sha256 does not match and leaves no final object', async () => {
    const bytes = randomBytes(2 * PART_SIZE + 1);
    const claimed = sha256Hex(Buffer.from('something else'));
    await expect(store.put(meteredSource(bytes).stream, { sha256: claimed, size: bytes.length })).rejects.toThrow(
      ArtifactIntegrityError,
    );

    expect(fake.ofKind('UploadPart').length).toBeGreaterThan(0); // it really was a multipart upload
    expect(fake.ofKind('CompleteMultipartUpload')).toHaveLength(0);
    expect(fake.ofKind('AbortMultipartUpload')).toHaveLength(1);
    expect(fake.uploads.size).toBe(0);
    expect(fake.objects.size).toBe(0);
    expect(await store.exists(claimed)).toBe(false);
  });

  it('stops reading and aborts when the body runs past its declared size', async () => {
    const bytes = randomBytes(6 * PART_SIZE);
    const source = meteredSource(bytes);
    const declared = { sha256: sha256Hex(bytes), size: 2 * PART_SIZE + 10 };
    await expect(store.put(source.stream, declared)).rejects.toThrow(ArtifactIntegrityError);

    expect(fake.ofKind('UploadPart').length).toBeLessThanOrEqual(2);
    expect(fake.ofKind('AbortMultipartUpload')).toHaveLength(1);
    expect(source.pulled()).toBeLessThan(bytes.length);
    expect(fake.objects.size).toBe(0);
  });

  it('aborts the upload and leaves no object when a part upload fails', async () => {
    fake.failPart = 2;
    const bytes = randomBytes(3 * PART_SIZE);
    await expect(store.put(meteredSource(bytes).stream, declare(bytes))).rejects.toThrow('injected part failure');

    expect(fake.ofKind('CompleteMultipartUpload')).toHaveLength(0);
    expect(fake.ofKind('AbortMultipartUpload')).toHaveLength(1);
    expect(fake.objects.size).toBe(0);
    expect(await store.exists(sha256Hex(bytes))).toBe(false);
  });
});
