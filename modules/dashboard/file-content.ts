import { createHash } from 'node:crypto';
import { ArtifactNotFoundError, type ArtifactStore } from '../artifacts/artifact-store.port.js';
import type { WorkspaceFile } from '../replay/workspace-state.js';
import { ReplayIntegrityError } from '../replay/errors.js';

/** A file's content shown at most this long; a longer file is shown cut, with `truncated: true`. */
export const MAX_SHOWN_BYTES = 1024 * 1024;
/** Bytes looked at to tell text from binary. */
const SNIFF_BYTES = 8192;

export interface FileContent {
  binary: boolean;
  /** UTF-8 text (null for binary content or content not recorded). */
  content: string | null;
  truncated: boolean;
}

/**
 * A workspace file's content for display: its blob read up to MAX_SHOWN_BYTES. A blob read whole is
 * checked against the recorded sha256 and size (a mismatch is a ReplayIntegrityError). Binary: a
 * NUL byte, or bytes that are not UTF-8, in the first 8 KiB.
 */
export async function readFileContent(artifacts: ArtifactStore, file: WorkspaceFile): Promise<FileContent> {
  if (file.sha256 === null) return { binary: false, content: null, truncated: false };
  const body = await readCapped(artifacts, file, MAX_SHOWN_BYTES);
  const truncated = body.length > MAX_SHOWN_BYTES;
  const shown = truncated ? body.subarray(0, MAX_SHOWN_BYTES) : body;
  if (isBinary(shown, truncated)) return { binary: true, content: null, truncated };
  return { binary: false, content: utf8(shown, truncated), truncated };
}

export function isBinary(bytes: Buffer, cut: boolean): boolean {
  const head = bytes.subarray(0, SNIFF_BYTES);
  if (head.includes(0)) return true;
  try {
    new TextDecoder('utf-8', { fatal: true }).decode(head, { stream: cut || bytes.length > SNIFF_BYTES });
    return false;
  } catch {
    return true;
  }
}

/** Decodes, dropping a multi-byte character cut at the end of a truncated read. */
function utf8(bytes: Buffer, cut: boolean): string {
  return new TextDecoder('utf-8').decode(bytes, { stream: cut });
}

/** The blob's first `cap + 1` bytes (more than `cap`: there is more), checked when read whole. */
async function readCapped(artifacts: ArtifactStore, file: WorkspaceFile, cap: number): Promise<Buffer> {
  let stream;
  try {
    stream = await artifacts.get(file.sha256!);
  } catch (error) {
    if (error instanceof ArtifactNotFoundError) throw new ReplayIntegrityError(`${file.path} (written at seq ${file.seq}): blob ${file.sha256} is missing from the artifact store`);
    throw error;
  }
  const chunks: Buffer[] = [];
  const hash = createHash('sha256');
  let size = 0;
  try {
    for await (const chunk of stream) {
      const b = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as Uint8Array);
      hash.update(b);
      chunks.push(b);
      size += b.length;
      if (size > cap) return Buffer.concat(chunks).subarray(0, cap + 1);
    }
  } finally {
    stream.destroy();
  }
  if (hash.digest('hex') !== file.sha256 || (file.size !== null && size !== file.size)) {
    throw new ReplayIntegrityError(`${file.path} (written at seq ${file.seq}): blob content differs from the sha256 and size the ledger recorded`);
  }
  return Buffer.concat(chunks);
}
