import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { ArtifactStoreUnavailableError } from '../../modules/artifacts/artifact-store.port.js';
import { MinioArtifactStore } from '../../infra/artifacts/minio-artifact-store.js';
import { artifactStoreContract, declare, readAll, sha256Hex } from './artifact-store.contract.js';

// The MinIO adapter runs against s3rver, a pure-Node S3 server started in-process. s3rver stores
// single-part objects only (no multipart upload, no versioning, no object lock), so every blob here
// must fit in one part: the adapter's part size is set to 8 MiB, above the contract's 5 MiB blob.
// The multipart path is covered by minio-multipart.spec.ts; a real MinIO was not available here.

interface S3rverInstance {
  run(): Promise<{ port: number }>;
  close(): Promise<void>;
}
interface S3rverModule {
  new (options: { address: string; port: number; directory: string; silent: boolean }): S3rverInstance;
}
interface S3rverAccount {
  createKeyPair(accessKeyId: string, secretAccessKey: string): void;
  revokeAccessKey(accessKeyId: string): void;
}
// s3rver is CommonJS without type declarations.
const require = createRequire(import.meta.url);
const S3rver = require('s3rver') as S3rverModule;
const s3rverAccount = (require('s3rver/lib/models/account.js') as { DUMMY_ACCOUNT: S3rverAccount }).DUMMY_ACCOUNT;

const PART_SIZE = 8 * 1024 * 1024;
let server: S3rverInstance;
let directory: string;
let port: number;
let buckets = 0;

function s3Url(bucket: string, credentials = 'S3RVER:S3RVER'): string {
  return `s3://${credentials}@127.0.0.1:${port}/${bucket}?ssl=false&region=us-east-1&partSize=${PART_SIZE}`;
}

beforeAll(async () => {
  directory = await mkdtemp(join(tmpdir(), 'a2rl-s3rver-'));
  server = new S3rver({ address: '127.0.0.1', port: 0, directory, silent: true });
  ({ port } = await server.run());
});

afterAll(async () => {
  await server.close();
  await rm(directory, { recursive: true, force: true });
});

// A fresh bucket per test, created by the adapter itself.
artifactStoreContract('minio (s3rver)', async () => ({
  store: await MinioArtifactStore.open(s3Url(`contract-${++buckets}`)),
  cleanup: async () => undefined,
}));

describe('MinioArtifactStore', () => {
  it('reports an unreachable endpoint as ArtifactStoreUnavailableError naming it', async () => {
    const closedPort = await freePort();
    const url = `s3://S3RVER:S3RVER@127.0.0.1:${closedPort}/artifacts?ssl=false`;
    await expect(MinioArtifactStore.open(url)).rejects.toThrow(ArtifactStoreUnavailableError);
    await expect(MinioArtifactStore.open(url)).rejects.toThrow(
      `MinIO artifact store at http://127.0.0.1:${closedPort}/artifacts is unreachable (ECONNREFUSED)`,
    );
  });

  it('reports rejected credentials at open as ArtifactStoreUnavailableError naming the endpoint', async () => {
    const url = s3Url('denied', 'NOBODY:secret');
    await expect(MinioArtifactStore.open(url)).rejects.toThrow(ArtifactStoreUnavailableError);
    await expect(MinioArtifactStore.open(url)).rejects.toThrow(`MinIO artifact store at http://127.0.0.1:${port}/denied`);
  });

  // s3rver checks that the access key exists but does not verify SigV4 signatures, so only the access
  // key's decoding is observable here; the secret goes through the same decodeURIComponent.
  it('percent-decodes credentials from the URL', async () => {
    const accessKey = 'A2RL+TEST=';
    s3rverAccount.createKeyPair(accessKey, 'unchecked');
    try {
      const store = await MinioArtifactStore.open(s3Url('decoded', `${encodeURIComponent(accessKey)}:unchecked`));
      const bytes = Buffer.from('signed with a decoded access key');
      await store.put(bytes, declare(bytes));
      expect(await readAll(await store.get(sha256Hex(bytes)))).toEqual(bytes);
      await store.close();
    } finally {
      s3rverAccount.revokeAccessKey(accessKey);
    }
  });

  it('opens an existing bucket without recreating it', async () => {
    const first = await MinioArtifactStore.open(s3Url('reopened'));
    const bytes = Buffer.from('kept');
    await first.put(bytes, declare(bytes));
    await first.close();
    const second = await MinioArtifactStore.open(s3Url('reopened'));
    expect(await second.exists(sha256Hex(bytes))).toBe(true);
    await second.close();
  });

  it('rejects malformed URLs without echoing the secret', async () => {
    await expect(MinioArtifactStore.open('s3://K:topsecret@host:9000/')).rejects.toThrow('one bucket');
    await expect(MinioArtifactStore.open('s3://K:topsecret@host:9000/b/c')).rejects.toThrow('one bucket');
    await expect(MinioArtifactStore.open('s3://K:topsecret@host:9000/b?partsize=1')).rejects.toThrow('unknown');
    await expect(MinioArtifactStore.open('s3://K:topsecret@host:9000/b?partSize=1024')).rejects.toThrow('partSize');
    await expect(MinioArtifactStore.open('s3://K:topsecret@host:9000/b?ssl=no')).rejects.toThrow('ssl');
    await expect(MinioArtifactStore.open('s3://K:topsecret@host:9000/b?ssl=no')).rejects.not.toThrow('topsecret');
  });
});

async function freePort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port: free } = probe.address() as { port: number };
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  return free;
}
