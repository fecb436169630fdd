/** The last recorded (or baseline) state of a workspace file. */
export interface Known {
  /** '' when the content was never read: a path only counted (output/), or a file over the per-file limit. */
  sha256: string;
  size: number;
  mtimeMs: number;
  ino: number;
}

/**
 * The known files by workspace-relative posix path, with a directory index so that "everything
 * under this directory" costs the size of the answer, not of the whole tree: a removed or moved
 * directory must turn into deletes of the files it held, and an agent deleting 100k directories
 * must not cost 100k full scans.
 *
 * It also keeps the total logical size of the known files (st.size: a sparse file at its full size),
 * each inode once: hard links to one file take its space once on disk, so they count once.
 */
export class KnownFiles {
  private readonly files = new Map<string, Known>();
  /** Inode → its last known size and how many known paths are links to it. */
  private readonly inodes = new Map<number, { size: number; names: number }>();
  private total = 0;
  /** Directory ('' for the root) → names of its known files and of its subdirectories holding known files. */
  private readonly dirs = new Map<string, Set<string>>();

  get size(): number {
    return this.files.size;
  }

  /** Logical bytes of the known files, each inode counted once. */
  get bytes(): number {
    return this.total;
  }

  /** What `bytes` would be after `set(path, { ino, size })`, without setting it (a size seen before the content is read). */
  bytesWith(path: string, ino: number, size: number): number {
    let total = this.total;
    const old = this.files.get(path);
    if (old && old.ino !== ino && this.inodes.get(old.ino)!.names === 1) total -= this.inodes.get(old.ino)!.size;
    return total - (this.inodes.get(ino)?.size ?? 0) + size;
  }

  get(path: string): Known | undefined {
    return this.files.get(path);
  }

  has(path: string): boolean {
    return this.files.has(path);
  }

  /** Whether known files lie under `path` as a directory. */
  hasDir(path: string): boolean {
    return this.dirs.has(path);
  }

  set(path: string, known: Known): void {
    const old = this.files.get(path);
    if (old) this.release(old.ino);
    else this.link(path);
    this.files.set(path, known);
    this.hold(known.ino, known.size);
  }

  delete(path: string): void {
    const old = this.files.get(path);
    if (!old) return;
    this.files.delete(path);
    this.release(old.ino);
    this.unlink(path);
  }

  /** Names directly in `dir` of known files and of directories holding known files (a copy). */
  names(dir: string): string[] {
    return [...(this.dirs.get(dir) ?? [])];
  }

  /** Every known file strictly under the directory `dir`. */
  under(dir: string): string[] {
    const out: string[] = [];
    const visit = (d: string) => {
      for (const name of this.dirs.get(d) ?? []) {
        const path = d === '' ? name : `${d}/${name}`;
        if (this.files.has(path)) out.push(path);
        if (this.dirs.has(path)) visit(path);
      }
    };
    if (this.dirs.has(dir)) visit(dir);
    return out;
  }

  /** One more known path links to `ino`, whose size is now `size`. */
  private hold(ino: number, size: number): void {
    const inode = this.inodes.get(ino);
    if (!inode) {
      this.inodes.set(ino, { size, names: 1 });
      this.total += size;
      return;
    }
    this.total += size - inode.size;
    inode.size = size;
    inode.names++;
  }

  private release(ino: number): void {
    const inode = this.inodes.get(ino)!;
    if (--inode.names > 0) return;
    this.inodes.delete(ino);
    this.total -= inode.size;
  }

  private link(path: string): void {
    for (let child = path; ; ) {
      const cut = child.lastIndexOf('/');
      const parent = cut < 0 ? '' : child.slice(0, cut);
      let names = this.dirs.get(parent);
      const fresh = !names;
      if (!names) this.dirs.set(parent, (names = new Set()));
      names.add(child.slice(cut + 1));
      if (!fresh || parent === '') return;
      child = parent;
    }
  }

  private unlink(path: string): void {
    for (let child = path; ; ) {
      const cut = child.lastIndexOf('/');
      const parent = cut < 0 ? '' : child.slice(0, cut);
      const name = child.slice(cut + 1);
      // A name can be both a file and a directory holding known files only transiently; keep it while either holds.
      if (this.files.has(child) || this.dirs.has(child)) return;
      const names = this.dirs.get(parent);
      if (!names) return;
      names.delete(name);
      if (names.size > 0 || parent === '') return;
      this.dirs.delete(parent);
      child = parent;
    }
  }
}
