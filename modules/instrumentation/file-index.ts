/** The last recorded (or baseline) state of a workspace file. */
export interface Known {
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
 */
export class KnownFiles {
  private readonly files = new Map<string, Known>();
  /** Directory ('' for the root) → names of its known files and of its subdirectories holding known files. */
  private readonly dirs = new Map<string, Set<string>>();

  get size(): number {
    return this.files.size;
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
    if (!this.files.has(path)) this.link(path);
    this.files.set(path, known);
  }

  delete(path: string): void {
    if (this.files.delete(path)) this.unlink(path);
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
