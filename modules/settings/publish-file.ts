import { randomBytes } from 'node:crypto';
import { closeSync, fchmodSync, fsyncSync, linkSync, openSync, renameSync, rmSync, writeFileSync } from 'node:fs';

/**
 * Writes `data` to `file` so that no reader ever sees it half-written: the bytes go to a fresh
 * sibling first (fsynced, given `mode` exactly, whatever the umask) and then appear under `file` in
 * one step. With `replace: false` that step is link(2), which fails when `file` exists, so of several
 * processes creating the same file at once exactly one wins and the others read the winner's complete
 * bytes; `false` is returned to a loser. With `replace: true` it is rename(2), which replaces.
 */
export function publishFile(file: string, data: string | Buffer, opts: { mode: number; replace: boolean }): boolean {
  const temp = `${file}.${process.pid}-${randomBytes(6).toString('hex')}.tmp`;
  const fd = openSync(temp, 'wx', opts.mode); // before the try: a name we did not create is not ours to remove
  try {
    try {
      writeFileSync(fd, data); // the whole of it, however many write(2)s that takes
      fchmodSync(fd, opts.mode);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    if (opts.replace) renameSync(temp, file);
    else linkSync(temp, file);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw err;
  } finally {
    rmSync(temp, { force: true }); // after a link, or whatever failed on the way
  }
}
