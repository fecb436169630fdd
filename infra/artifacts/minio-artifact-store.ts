import { createHash } from 'node:crypto';
import http from 'node:http';
import https from 'node:https';
import { Writable, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { Client } from 'minio';
import {
  ArtifactNotFoundError,
  ArtifactStoreUnavailableError,
  artifactKey,
  type ArtifactInfo,
  type ArtifactStore,
  type PutResult,
} from '../../modules/artifacts/artifact-store.port.js';
import { assertDeclared, bodyStream, verifyBody, VerifyingStream, type Declared } from './content-verifier.js';

const MiB = 1024 * 1024;
/** S3 rejects parts below 5 MiB (except the last) and uploads of more than 10 000 parts. */
const MIN_PART_BYTES = 5 * MiB;
const MAX_PART_BYTES = 5 * 1024 * MiB;
const MAX_PARTS = 10_000;
const DEFAULT_PART_BYTES = 16 * MiB;
const CONTENT_TYPE = { 'Content-Type': 'application/octet-stream' };
const CONNECTION_ERRORS = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EPIPE',
]);

interface S3Location {
  endPoint: string;
  port?: number;
  useSSL: boolean;
  accessKey: string;
  secretKey: string;
  region: string;
  bucket: string;
  partSize: number;
}

/**
 * Content-addressed blobs in a MinIO (S3) bucket under `sha256/<2 hex>/<hex>`.
 *
 * URL: `s3://ACCESS_KEY:SECRET_KEY@host:port/bucket?ssl=false&region=us-east-1&partSize=16777216`
 * - credentials are percent-decoded, so a secret containing `/`, `+`, `@` or `:` must be percent-encoded;
 * - `ssl` defaults to true, `region` to us-east-1, `partSize` (bytes, 5 MiB..5 GiB) to 16 MiB;
 * - the bucket is created if missing.
 *
 * No object under `sha256/` ever holds unverified bytes, without a temporary key and CopyObject:
 * - size <= partSize: the body goes through the verifier into memory (at most one part) and is PUT,
 *   with the declared size, only once its size and sha256 checked out; an S3 PUT is all-or-nothing,
 *   and its payload hash (or Content-MD5 over TLS) is checked by the server.
 * - size > partSize: one multipart upload on the final key. Parts are uploaded as they fill, and
 *   CompleteMultipartUpload, the only step that makes the object visible, is sent only after the
 *   verifier saw the whole body match; on any failure the upload is aborted instead.
 * A temp key plus CopyObject would add a second server-side write of every blob, is capped at 5 GiB
 * by S3's CopyObject, and leaves `tmp/` objects behind when the process dies between copy and delete.
 * CopyObject does work on s3rver with this client (checked), so that is not why it is avoided.
 *
 * Multipart is driven here rather than through `putObject`: for streams larger than a part the
 * client pipes the body with `.pipe()`, so an error from the verifier never reaches it (checked with
 * minio 8.0.7: putObject stays pending forever and the upload is never aborted), and it first lists
 * incomplete uploads to resume one for the same key. Every part is at most `partSize` bytes (raised
 * only if 10 000 parts would not hold the declared size) and carries a Content-MD5.
 */
export class MinioArtifactStore implements ArtifactStore {
  readonly backend = 'minio' as const;

  private constructor(
    private readonly client: Client,
    private readonly agent: http.Agent,
    private readonly location: S3Location,
    private readonly endpoint: string,
  ) {}

  static async open(url: string): Promise<MinioArtifactStore> {
    const location = parseS3Url(url);
    const agent = location.useSSL ? new https.Agent({ keepAlive: true }) : new http.Agent({ keepAlive: true });
    const client = new Client({
      endPoint: location.endPoint,
      port: location.port,
      useSSL: location.useSSL,
      accessKey: location.accessKey,
      secretKey: location.secretKey,
      region: location.region,
      pathStyle: true,
      partSize: location.partSize,
      transportAgent: agent,
    });
    const scheme = location.useSSL ? 'https' : 'http';
    const endpoint = `${scheme}://${location.endPoint}${location.port ? `:${location.port}` : ''}/${location.bucket}`;
    const store = new MinioArtifactStore(client, agent, location, endpoint);
    try {
      await store.ensureBucket();
    } catch (err) {
      agent.destroy();
      if (err instanceof ArtifactStoreUnavailableError) throw err;
      // Reachable but unusable (bad credentials, no permission, wrong region): still a store we cannot use.
      const code = (err as { code?: string }).code ?? 'error';
      throw new ArtifactStoreUnavailableError(
        `MinIO artifact store at ${endpoint}: cannot use the bucket (${code}): ${(err as Error).message}`,
        { cause: err },
      );
    }
    return store;
  }

  async put(body: Readable | Buffer, declared: Declared): Promise<PutResult> {
    assertDeclared(declared);
    const info: ArtifactInfo = { key: artifactKey(declared.sha256), sha256: declared.sha256, size: declared.size };
    if (await this.exists(declared.sha256)) {
      // No upload, but still read the body: a caller whose bytes do not match its declaration has a bug.
      await verifyBody(body, declared);
      return { ...info, created: false };
    }
    await this.call(`storing ${info.key}`, () =>
      declared.size <= this.location.partSize
        ? this.putSinglePart(info.key, body, declared)
        : this.putMultipart(info.key, body, declared),
    );
    return { ...info, created: true };
  }

  async get(sha256: string): Promise<Readable> {
    const key = artifactKey(sha256);
    return this.call(`reading ${key}`, async () => {
      try {
        return await this.client.getObject(this.location.bucket, key);
      } catch (err) {
        if (isNotFound(err)) throw new ArtifactNotFoundError(sha256);
        throw err;
      }
    });
  }

  async stat(sha256: string): Promise<ArtifactInfo | null> {
    const key = artifactKey(sha256);
    return this.call(`checking ${key}`, async () => {
      try {
        const stat = await this.client.statObject(this.location.bucket, key);
        return { key, sha256, size: stat.size };
      } catch (err) {
        if (isNotFound(err)) return null;
        throw err;
      }
    });
  }

  async exists(sha256: string): Promise<boolean> {
    return (await this.stat(sha256)) !== null;
  }

  async close(): Promise<void> {
    this.agent.destroy();
  }

  private async ensureBucket(): Promise<void> {
    const { bucket, region } = this.location;
    await this.call(`checking bucket ${bucket}`, async () => {
      if (await this.client.bucketExists(bucket)) return;
      try {
        await this.client.makeBucket(bucket, region);
      } catch (err) {
        // Another process created it between our check and our request.
        if ((err as { code?: string }).code !== 'BucketAlreadyOwnedByYou') throw err;
      }
    });
  }

  private async putSinglePart(key: string, body: Readable | Buffer, declared: Declared): Promise<void> {
    const chunks: Buffer[] = [];
    const collect = new Writable({
      write(chunk: Buffer, _encoding, done) {
        chunks.push(chunk);
        done();
      },
    });
    await pipeline(bodyStream(body), new VerifyingStream(declared), collect);
    await this.client.putObject(this.location.bucket, key, Buffer.concat(chunks, declared.size), declared.size, CONTENT_TYPE);
  }

  private async putMultipart(key: string, body: Readable | Buffer, declared: Declared): Promise<void> {
    const { bucket } = this.location;
    const partSize = Math.max(this.location.partSize, Math.ceil(declared.size / MAX_PARTS));
    const uploadId = await this.client.initiateNewMultipartUpload(bucket, key, { ...CONTENT_TYPE });
    const parts: { part: number; etag: string }[] = [];
    const uploadPart = async (payload: Buffer): Promise<void> => {
      const partNumber = parts.length + 1;
      const headers = { 'Content-MD5': createHash('md5').update(payload).digest('base64') };
      const { etag } = await this.client.uploadPart({ bucketName: bucket, objectName: key, uploadID: uploadId, partNumber, headers }, payload);
      parts.push({ part: partNumber, etag });
    };
    try {
      await pipeline(bodyStream(body), new VerifyingStream(declared), new PartWriter(partSize, uploadPart));
      await this.client.completeMultipartUpload(bucket, key, uploadId, parts);
    } catch (err) {
      // Best effort: the original error matters more, and an upload left behind is invisible and
      // expires with the server's stale-upload cleanup (MinIO) or an abort-incomplete lifecycle rule (S3).
      await this.client.abortMultipartUpload(bucket, key, uploadId).catch(() => undefined);
      throw err;
    }
  }

  /** Runs one backend interaction, turning "cannot reach the server" into ArtifactStoreUnavailableError. */
  private async call<T>(action: string, run: () => Promise<T>): Promise<T> {
    try {
      return await run();
    } catch (err) {
      const code = connectionErrorCode(err);
      if (code === undefined) throw err;
      throw new ArtifactStoreUnavailableError(
        `MinIO artifact store at ${this.endpoint} is unreachable (${code}) while ${action}: ${(err as Error).message}`,
        { cause: err },
      );
    }
  }
}

/** Cuts the incoming bytes into parts of exactly `partSize` (the last may be shorter) and uploads them in order. */
class PartWriter extends Writable {
  private pending: Buffer[] = [];
  private pendingBytes = 0;

  constructor(
    private readonly partSize: number,
    private readonly upload: (part: Buffer) => Promise<void>,
  ) {
    super();
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, done: (err?: Error | null) => void): void {
    this.pending.push(chunk);
    this.pendingBytes += chunk.length;
    this.uploadFullParts().then(() => done(), done);
  }

  override _final(done: (err?: Error | null) => void): void {
    const last = this.pendingBytes > 0 ? this.upload(this.take(this.pendingBytes)) : Promise.resolve();
    last.then(() => done(), done);
  }

  private async uploadFullParts(): Promise<void> {
    while (this.pendingBytes >= this.partSize) await this.upload(this.take(this.partSize));
  }

  private take(bytes: number): Buffer {
    const all = Buffer.concat(this.pending, this.pendingBytes);
    const rest = Buffer.from(all.subarray(bytes)); // a copy, so the part's memory is not pinned by the remainder
    this.pending = rest.length > 0 ? [rest] : [];
    this.pendingBytes = rest.length;
    return all.subarray(0, bytes);
  }
}

function parseS3Url(url: string): S3Location {
  const form = 's3://ACCESS_KEY:SECRET_KEY@host:port/bucket?ssl=false&region=us-east-1&partSize=<bytes>';
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new TypeError(`artifacts URL is not a valid URL; expected ${form}`);
  }
  const bucket = decodeURIComponent(parsed.pathname.replace(/^\/+|\/+$/g, ''));
  if (parsed.protocol !== 's3:' || !parsed.hostname || !bucket || bucket.includes('/')) {
    throw new TypeError(`artifacts URL must name a host and one bucket: ${form}`);
  }
  const unknown = [...parsed.searchParams.keys()].filter((name) => !['ssl', 'region', 'partSize'].includes(name));
  if (unknown.length > 0) throw new TypeError(`unknown artifacts URL parameter(s) ${unknown.join(', ')}; expected ${form}`);
  const ssl = parsed.searchParams.get('ssl') ?? 'true';
  if (ssl !== 'true' && ssl !== 'false') throw new TypeError(`artifacts URL parameter ssl must be true or false, got "${ssl}"`);
  const partSize = Number(parsed.searchParams.get('partSize') ?? DEFAULT_PART_BYTES);
  if (!Number.isSafeInteger(partSize) || partSize < MIN_PART_BYTES || partSize > MAX_PART_BYTES) {
    throw new TypeError(`artifacts URL parameter partSize must be a byte count from ${MIN_PART_BYTES} to ${MAX_PART_BYTES}`);
  }
  return {
    endPoint: parsed.hostname,
    port: parsed.port ? Number(parsed.port) : undefined,
    useSSL: ssl === 'true',
    accessKey: decodeURIComponent(parsed.username),
    secretKey: decodeURIComponent(parsed.password),
    region: parsed.searchParams.get('region') ?? 'us-east-1',
    bucket,
    partSize,
  };
}

function isNotFound(err: unknown): boolean {
  const code = (err as { code?: string } | null)?.code;
  return code === 'NoSuchKey' || code === 'NotFound';
}

/** Node reports a failed connect as an error with `code`, or (several addresses tried) an AggregateError of them. */
function connectionErrorCode(err: unknown): string | undefined {
  const candidates = [err, ...((err as { errors?: unknown[] } | null)?.errors ?? [])];
  for (const candidate of candidates) {
    const code = (candidate as { code?: unknown } | null)?.code;
    if (typeof code === 'string' && CONNECTION_ERRORS.has(code)) return code;
  }
  return undefined;
}
