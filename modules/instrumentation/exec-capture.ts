import { createHash } from 'node:crypto';
import { closeSync, constants, fstatSync, openSync, readlinkSync, readSync, type Stats } from 'node:fs';

/**
 * What a process really runs, read while it is stopped at its exec (see process-tracer-state.ts):
 * the executable image the kernel loaded (/proc/<pid>/exe: the file itself, even when deleted or
 * reached through a link of another name) and, for a `#!` script or an interpreter started with a
 * script argument (`python3 /tmp/x.py`, `bash run.sh`), the script file. Each is hashed by content and,
 * unless it is a large system file, kept (its bytes go to the artifact store with the fact).
 *
 * Everything is synchronous: it runs in the tracer's worker thread while the traced process waits.
 *
 * Paths are the process's own view (its mount namespace: the sandbox's). A script path is resolved
 * inside the process's root (/proc/<pid>/root) one component at a time, each opened relative to the
 * descriptor of its parent (/proc/self/fd/<dir>/<name>, O_NOFOLLOW): a link is read and its target
 * walked again from the process's root or the link's directory, and `..` never climbs above that
 * root, so a link planted by the agent (`x.py -> /etc/shadow`, `-> ../../..`) can never make the
 * harness read a file of its own.
 */

export interface CapturedFile {
  /** The file's path as the process sees it, links resolved. */
  path: string;
  sha256?: string;
  size?: number;
  /** The bytes, when kept (not a large system file; at most `keepBytes`). */
  content?: Uint8Array;
  /** The file had been unlinked already (an executable still running from a deleted file). */
  deleted?: boolean;
  /** Why there is no hash or no content. */
  note?: string;
  /** Kept, but its bytes were handed over with an earlier fact (same sha256): not repeated. */
  keptEarlier?: boolean;
}

export interface ExecFacts {
  exe?: CapturedFile;
  /** The script the program runs: the #! file itself, or an interpreter's script argument. */
  script?: CapturedFile & { via: 'shebang' | 'argument' };
}

export interface CaptureLimits {
  /** Largest file kept whole (default 16 MiB). */
  keepBytes: number;
  /** A system file (root-owned, under /usr, /bin, /lib…) is kept only up to this size (default 64 KiB). */
  systemKeepBytes: number;
  /** Larger files are not hashed (default 512 MiB): noted instead. */
  hashBytes: number;
}

export const DEFAULT_CAPTURE_LIMITS: CaptureLimits = { keepBytes: 16 * 1024 * 1024, systemKeepBytes: 64 * 1024, hashBytes: 512 * 1024 * 1024 };

const SYSTEM_PREFIXES = ['/usr/', '/bin/', '/sbin/', '/lib/', '/lib32/', '/lib64/', '/libx32/', '/etc/', '/opt/', '/nix/store/'];
const MAX_LINKS = 40;
const CHUNK = 1024 * 1024;
const FILE_FLAGS = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;

/** Interpreters whose first operand is the script they run, and how their options read. */
interface InterpreterRule {
  /** Options that run inline code or a module (no script file to capture). */
  inline: Set<string>;
  /** Options that take the next argument as their value. */
  valued: Set<string>;
  /** A bundled short option containing one of these letters runs inline code (`-ec`, `-Sc`). */
  inlineLetters?: string;
}

const SHELL_RULE: InterpreterRule = { inline: new Set(['-c', '-s', '-']), valued: new Set(['-o', '+o', '-O', '+O', '--rcfile', '--init-file']), inlineLetters: 'cs' };
const INTERPRETERS: Array<[RegExp, InterpreterRule]> = [
  [/^(python|pypy)[0-9.]*$/, { inline: new Set(['-c', '-m', '-']), valued: new Set(['-W', '-X', '--check-hash-based-pycs']), inlineLetters: 'cm' }],
  [/^(node|nodejs|bun|deno)$/, { inline: new Set(['-e', '--eval', '-p', '--print', '-']), valued: new Set(['-r', '--require', '--import', '--loader', '--experimental-loader', '-C', '--conditions', '--env-file', '--input-type', '--title']) }],
  [/^(sh|bash|dash|zsh|ksh|mksh|ash|fish)$/, SHELL_RULE],
  [/^perl[0-9.]*$/, { inline: new Set(['-e', '-E', '-']), valued: new Set(['-I', '-M', '-m']), inlineLetters: 'eE' }],
  [/^ruby[0-9.]*$/, { inline: new Set(['-e', '-']), valued: new Set(['-I', '-r']), inlineLetters: 'e' }],
  [/^(Rscript|php[0-9.]*|lua[0-9.]*|tclsh[0-9.]*|awk|gawk)$/, { inline: new Set(['-e', '-f', '-']), valued: new Set() }],
];

/**
 * Stat identity → hash of an executable already read (system binaries are exec'd thousands of
 * times), with the bytes of a small system one (kept: handed over once per run by the tracer).
 */
type HashCache = Map<string, { sha256: string; size: number; content?: Uint8Array }>;

/** What read() gave for an executable, without its path. */
type ReadFile = Omit<CapturedFile, 'path' | 'deleted'>;

/** Captures what a process runs; keeps a cache of executable hashes across calls. */
export class ExecCapturer {
  private readonly cache: HashCache = new Map();
  /** Known programs (see `takeKnown`) by their exact stat identity: what their capture gave. */
  private readonly known = new Map<string, ReadFile>();
  private readonly learnt: string[] = [];

  constructor(private readonly limits: CaptureLimits = DEFAULT_CAPTURE_LIMITS) {}

  /**
   * The facts of the program `pid` runs right after exec'ing `execPath` (as execve was given it,
   * relative to the process's cwd) with `argv`. Never throws: what cannot be read is noted.
   */
  capture(pid: number, execPath: string | undefined, argv: string[]): ExecFacts {
    const facts: ExecFacts = {};
    const exe = this.captureExe(pid);
    if (exe) facts.exe = exe;
    const shebang = execPath !== undefined ? this.captureShebang(pid, execPath) : undefined;
    if (shebang) facts.script = { ...shebang, via: 'shebang' };
    else {
      const operand = exe ? scriptOperand(baseName(exe.path), argv.slice(1)) : undefined;
      const script = operand !== undefined ? this.captureInRoot(pid, operand) : undefined;
      if (script) facts.script = { ...script, via: 'argument' };
    }
    return facts;
  }

  /**
   * a2rl-trace's control records ("K DEV INO SIZE MTIME_S MTIME_NS CTIME_S CTIME_NS [ARG1...]\n") for
   * the programs learnt since the last call: system executables (the agent cannot write them) with
   * one link (no other name could make them another program), read whole; an interpreter with the
   * first arguments that make it run inline code (its rule's `inline`: `-c`), the only ones with
   * which it runs no script file. Their execs need not wait for a capture: the tracer checks at the
   * exec that the image has this identity (and argv[1]), and that the path exec'd is that file (not a
   * `#!` script), and `captureKnown` gives the facts.
   */
  takeKnown(): string[] {
    return this.learnt.splice(0);
  }

  /**
   * The facts of an exec a2rl-trace let go at once (its `known exec` line): the image is the file of
   * `identity` (as takeKnown named it, read by the tracer while the process was stopped at its exec),
   * `exePath` its /proc/<pid>/exe link then; nothing else ran (no script).
   */
  captureKnown(identity: string, exePath: string): ExecFacts {
    const deleted = exePath.endsWith(' (deleted)');
    const path = deleted ? exePath.slice(0, -' (deleted)'.length) : exePath;
    const read = this.known.get(identity);
    return { exe: { path, ...(deleted ? { deleted } : {}), ...(read ? { ...read } : { note: 'not captured: the tracer named a program the harness does not know' }) } };
  }

  /**
   * Remembers a just-read executable as a known program when it qualifies (see takeKnown); `before`
   * is its identity from before the read: a file that changed meanwhile is not remembered.
   */
  private learn(fd: number, path: string, read: ReadFile, before: KnownIdentity | null): void {
    if (before === null || read.sha256 === undefined || this.known.has(before.key)) return;
    const after = knownIdentity(fd, path);
    if (after?.key !== before.key || BigInt(read.size ?? -1) !== after.size) return;
    const inline = interpreterRule(baseName(path))?.inline;
    const args = inline ? [...inline].filter((a) => /^[!-~]+$/.test(a)) : [];
    if (inline && args.length === 0) return;
    this.known.set(after.key, read);
    this.learnt.push(`K ${[after.key, ...args].join(' ')}\n`);
  }

  /** The executable image: /proc/<pid>/exe opens the very file the kernel loaded. */
  private captureExe(pid: number): CapturedFile | undefined {
    let link: string;
    try {
      link = readlinkSync(`/proc/${pid}/exe`);
    } catch {
      return undefined; // gone, or a kernel thread
    }
    const deleted = link.endsWith(' (deleted)');
    const path = deleted ? link.slice(0, -' (deleted)'.length) : link;
    let fd: number;
    try {
      fd = openSync(`/proc/${pid}/exe`, constants.O_RDONLY | constants.O_NONBLOCK);
    } catch (err) {
      return { path, ...(deleted ? { deleted } : {}), note: `unreadable (${codeOf(err)})` };
    }
    try {
      const before = deleted ? null : knownIdentity(fd, path);
      const read = this.read(fd, path, true);
      this.learn(fd, path, read, before);
      return { path, ...(deleted ? { deleted } : {}), ...read };
    } finally {
      closeSync(fd);
    }
  }

  /** The file execve was given, when it is a `#!` script (the kernel ran its interpreter instead). */
  private captureShebang(pid: number, execPath: string): CapturedFile | undefined {
    const opened = openInRoot(pid, execPath);
    if ('error' in opened) return undefined;
    try {
      const head = Buffer.alloc(2);
      if (readSync(opened.fd, head, 0, 2, 0) !== 2 || head.toString('latin1') !== '#!') return undefined;
      return { path: opened.path, ...this.read(opened.fd, opened.path, false) };
    } catch {
      return undefined;
    } finally {
      closeSync(opened.fd);
    }
  }

  /** A script argument, resolved in the process's root; noted when it cannot be opened. */
  private captureInRoot(pid: number, path: string): CapturedFile | undefined {
    const opened = openInRoot(pid, path);
    if ('error' in opened) return { path: opened.path, note: opened.error };
    try {
      return { path: opened.path, ...this.read(opened.fd, opened.path, false) };
    } finally {
      closeSync(opened.fd);
    }
  }

  /** Hash (and content, when kept) of an open file. */
  private read(fd: number, path: string, cacheable: boolean): ReadFile {
    let st: Stats;
    try {
      st = fstatSync(fd);
    } catch (err) {
      return { note: `unreadable (${codeOf(err)})` };
    }
    if (!st.isFile()) return { note: 'not a regular file' };
    const system = isSystemFile(path, st);
    const keep = st.size <= (system ? this.limits.systemKeepBytes : this.limits.keepBytes);
    if (st.size > this.limits.hashBytes) return { size: st.size, note: `not hashed: larger than ${this.limits.hashBytes} bytes` };
    const id = `${st.dev}:${st.ino}:${st.size}:${st.mtimeMs}:${st.ctimeMs}`;
    // A kept file is cached only when it is a system file: the agent cannot write it, while its own
    // file can change within one timestamp tick, keeping its stat identity.
    const caching = cacheable && (!keep || system);
    const cached = caching ? this.cache.get(id) : undefined;
    if (cached) return cached.content ? { ...cached } : { ...cached, note: keepNote(system) };
    try {
      const { sha256, size, content } = readAll(fd, keep ? st.size : 0, st.size);
      const kept = keep && content ? content : undefined;
      if (caching) this.cache.set(id, { sha256, size, ...(kept ? { content: kept } : {}) });
      return kept ? { sha256, size, content: kept } : { sha256, size, note: keepNote(system) };
    } catch (err) {
      return { size: st.size, note: `unreadable (${codeOf(err)})` };
    }
  }
}

function keepNote(system: boolean): string {
  return system ? 'system file: hashed, not kept' : 'too large to keep: hashed only';
}

/** Root-owned, not world-writable, under a system directory: the agent cannot have written it. */
function isSystemFile(path: string, st: Pick<Stats, 'uid' | 'mode'>): boolean {
  return st.uid === 0 && (st.mode & 0o002) === 0 && SYSTEM_PREFIXES.some((p) => path.startsWith(p));
}

/**
 * Reads the whole file from offset 0, hashing it; keeps the bytes when `keep` > 0. Reads in pieces
 * the size the file had (`expected`, one byte more so that growth shows at once), at most CHUNK: a
 * small executable of the agent, read at each of its execs while the process is held, then costs
 * one allocation of its own size instead of a 1 MiB buffer and two copies of what is kept.
 */
function readAll(fd: number, keep: number, expected: number): { sha256: string; size: number; content?: Uint8Array } {
  const hash = createHash('sha256');
  const parts: Buffer[] = [];
  const length = Math.min(CHUNK, expected + 1);
  let buffer = Buffer.allocUnsafe(length);
  let size = 0;
  for (;;) {
    const n = readSync(fd, buffer, 0, length, size);
    if (n === 0) break;
    hash.update(buffer.subarray(0, n));
    if (keep > 0 && size + n <= keep) {
      parts.push(buffer.subarray(0, n));
      buffer = Buffer.allocUnsafe(length); // the kept piece is never read over
    }
    size += n;
  }
  const whole = keep > 0 && size <= keep;
  return { sha256: hash.digest('hex'), size, ...(whole ? { content: parts.length === 1 ? parts[0] : Buffer.concat(parts) } : {}) };
}

interface KnownIdentity {
  /** "DEV INO SIZE MTIME_S MTIME_NS CTIME_S CTIME_NS", as a2rl-trace prints and reads it. */
  key: string;
  size: bigint;
}

/** The exact stat identity of an open system executable with one link, else null (it cannot be a known program). */
function knownIdentity(fd: number, path: string): KnownIdentity | null {
  let st;
  try {
    st = fstatSync(fd, { bigint: true });
  } catch {
    return null;
  }
  if (!st.isFile() || st.nlink !== 1n || st.mtimeNs < 0n || st.ctimeNs < 0n || !isSystemFile(path, { uid: Number(st.uid), mode: Number(st.mode) })) return null;
  const billion = 1_000_000_000n;
  const key = [st.dev, st.ino, st.size, st.mtimeNs / billion, st.mtimeNs % billion, st.ctimeNs / billion, st.ctimeNs % billion].join(' ');
  return { key, size: st.size };
}

/** An interpreter's rule, by the real executable's name: it may run a script named in its arguments. */
function interpreterRule(exeName: string): InterpreterRule | undefined {
  return INTERPRETERS.find(([name]) => name.test(exeName))?.[1];
}

/**
 * The script an interpreter (by the real executable's name) runs: its first operand after options
 * and their values; none for inline code, a module or stdin.
 */
export function scriptOperand(exeName: string, args: string[]): string | undefined {
  const rule = interpreterRule(exeName);
  if (!rule) return undefined;
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    if (rule.inline.has(a)) return undefined;
    if (a === '--') return args[i + 1];
    if (rule.valued.has(a)) i++;
    else if (/^[-+]/.test(a)) {
      if (rule.inlineLetters && /^-[a-zA-Z]+$/.test(a) && [...rule.inlineLetters].some((l) => a.slice(1).includes(l))) return undefined;
    } else return a;
  }
  return undefined;
}

export type OpenedInRoot = { fd: number; path: string } | { error: string; path: string };

/**
 * Opens `path` as process `pid` would (relative paths from its cwd), never leaving its root: see the
 * module comment. Only a regular file counts as found.
 */
export function openInRoot(pid: number, path: string): OpenedInRoot {
  let cwd = '/';
  if (!path.startsWith('/')) {
    try {
      cwd = readlinkSync(`/proc/${pid}/cwd`);
    } catch {
      return { error: 'process gone', path };
    }
  }
  let root: number;
  try {
    root = openSync(`/proc/${pid}/root`, constants.O_RDONLY | constants.O_DIRECTORY);
  } catch (err) {
    return { error: `unreadable (${codeOf(err)})`, path };
  }
  const stack: Array<{ fd: number; name: string }> = [{ fd: root, name: '' }];
  const shown = () => `/${stack.slice(1).map((s) => s.name).join('/')}`;
  const closeAbove = (depth: number) => {
    while (stack.length > depth) closeSync(stack.pop()!.fd);
  };
  const todo = components(path.startsWith('/') ? path : `${cwd}/${path}`);
  let links = 0;
  try {
    while (todo.length > 0) {
      const name = todo.pop()!;
      if (name === '.') continue;
      if (name === '..') {
        if (stack.length > 1) closeAbove(stack.length - 1);
        continue;
      }
      const last = todo.length === 0;
      const at = `/proc/self/fd/${stack[stack.length - 1].fd}/${name}`;
      let fd: number;
      try {
        fd = openSync(at, last ? FILE_FLAGS : FILE_FLAGS | constants.O_DIRECTORY);
      } catch (err) {
        const code = codeOf(err);
        if (code !== 'ELOOP' && code !== 'ENOTDIR') return { error: code === 'ENOENT' ? 'not found' : `unreadable (${code})`, path: `${shown()}/${name}`.replace('//', '/') };
        let target: string;
        try {
          target = readlinkSync(at);
        } catch {
          return { error: 'not a directory', path: `${shown()}/${name}`.replace('//', '/') };
        }
        if (++links > MAX_LINKS) return { error: 'too many links', path };
        if (target.startsWith('/')) closeAbove(1);
        todo.push(...components(target));
        continue;
      }
      stack.push({ fd, name });
    }
    if (stack.length === 1) return { error: 'not a regular file', path: '/' };
    const top = stack.pop()!;
    const resolved = `${shown()}/${top.name}`.replace('//', '/');
    if (!fstatSync(top.fd).isFile()) {
      closeSync(top.fd);
      return { error: 'not a regular file', path: resolved };
    }
    return { fd: top.fd, path: resolved };
  } finally {
    closeAbove(0);
  }
}

/** Path components in reverse order (a stack: the first component last). */
function components(path: string): string[] {
  return path.split('/').filter((c) => c !== '').reverse();
}

function baseName(path: string): string {
  return path.slice(path.lastIndexOf('/') + 1);
}

function codeOf(err: unknown): string {
  return (err as NodeJS.ErrnoException)?.code ?? 'error';
}
