/*
 * a2rl-trace: a2rl's own process tracer (ptrace), the default where it builds and works.
 *
 *   a2rl-trace -o OUTPUT_FIFO -c CONTROL_FIFO -- COMMAND [ARGS...]
 *
 * It reports what the harness's state machine (process-tracer-state.ts) reads from strace, in
 * strace's `-f -ttt` line format, so that both tracers share one interpretation:
 *   PID SECS.USEC execve("path", ["argv0", ...], envp) = 0      a successful exec
 *   PID SECS.USEC chdir("cwd") = 0                              the cwd at that exec (just before it)
 *   PID SECS.USEC clone(flags=CLONE_THREAD|0) = CHILD, then CHILD again in strace's comment form
 *                                                            ("in the tracer's PID NS"): the host pid
 *   PID SECS.USEC +++ exited with N +++  |  +++ killed by SIGX +++
 *   PID SECS.USEC --- held at exec N ---                        it waits until the harness writes "PID N\n"
 *   PID SECS.USEC --- known exec DEV INO SIZE MS MNS CS CNS "exe" ---   before an exec line: not held (below)
 *
 * Why not strace (measured in docs/runs.md, "Process tracing"):
 * - Only execve/execveat stop (a seccomp filter, SECCOMP_RET_TRACE); everything else runs at full
 *   speed. strace keeps a new process stopping at EVERY syscall until its first traced one, so a
 *   fork that never execs (a data loader's worker, a subshell) ran at ptrace speed.
 * - Every successful exec is held in its ptrace stop (PTRACE_EVENT_EXEC: the new image is loaded, its
 *   first instruction not run) until the harness has read what it runs and writes its pid to the
 *   control FIFO. Nothing else can resume a ptrace stop (a SIGCONT from the agent cannot), the
 *   parent never sees it (no job-control stop a shell could notice), and it holds every exec,
 *   including a process's second exec, which strace's injected SIGSTOP did not.
 * - A fork's child pid comes from the kernel in the tracer's (host) pid namespace, exact at any
 *   nesting depth; a new child is held at its first stop until its parent's clone line is written.
 *
 * - A known program is not held. The harness names, on the control FIFO ("K DEV INO SIZE MTIME_S
 *   MTIME_NS CTIME_S CTIME_NS [ARG1...]\n"), the system executables it has read already (one link):
 *   their hash is known by that stat identity. An interpreter comes with the first arguments that
 *   make it run inline code (`-c`): it is known only when exec'd with one of them, as it then runs
 *   no script file. An exec whose loaded image (/proc/PID/exe) has such an identity, and whose path
 *   resolves inside the process's root to that very file (so it was no `#!` script run by it), goes
 *   on at once; its exec line is preceded by a `known exec` line naming the identity, which the
 *   harness reads instead of /proc.
 *   What is recorded is the same; the exec just does not wait for the harness (a round trip of two
 *   thread wake-ups and a capture, paid by every git, grep or ls of a shell tool call).
 *
 * Like `strace -DD`: the launched process IS the command (its pid and exit status are the agent's);
 * the tracer is a detached grandchild in its own session, so killing the agent's group spares it.
 * It exits once every tracee is gone. If it dies, PTRACE_O_EXITKILL kills the tracees (an untraced
 * agent would be an unrecorded one). If the harness stops reading, the tracer blocks and the agent
 * with it; if the harness is gone (control FIFO at EOF), held processes are let go.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <dirent.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__)
#define NATIVE_ARCH AUDIT_ARCH_X86_64
#define X32_BIT 0x40000000u
#define I386_EXECVE 11u
#define I386_EXECVEAT 358u
#elif defined(__aarch64__)
#define NATIVE_ARCH AUDIT_ARCH_AARCH64
#else
#error "a2rl-trace: unsupported architecture"
#endif

/* Longest string and argv taken from memory; longer ones are marked shortened ("..."), and the
 * harness reads the exact argv from /proc while the process is held. */
#define MAX_STRING (128 * 1024)
#define MAX_ARGS 4096

static void die(const char *what) {
  fprintf(stderr, "a2rl-trace: %s: %s\n", what, strerror(errno));
  _exit(126);
}

/* ---------- output: one buffer, written out before the tracer waits ---------- */

static int out_fd = -1;
static char *obuf;
static size_t olen, ocap;

static void ogrow(size_t more) {
  if (olen + more <= ocap) return;
  while (olen + more > ocap) ocap = ocap ? ocap * 2 : 1 << 16;
  obuf = realloc(obuf, ocap);
  if (!obuf) die("out of memory");
}

static void oput(const char *s, size_t n) {
  ogrow(n);
  memcpy(obuf + olen, s, n);
  olen += n;
}

static void ostr(const char *s) { oput(s, strlen(s)); }

static void ofmt(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void ofmt(const char *fmt, ...) {
  va_list ap;
  char tmp[256];
  va_start(ap, fmt);
  int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  oput(tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

/* A C string literal as strace prints it: printable ASCII as is, the rest escaped byte by byte. */
static void oquoted(const unsigned char *s, size_t n, int shortened) {
  ogrow(n * 4 + 8);
  obuf[olen++] = '"';
  for (size_t i = 0; i < n; i++) {
    unsigned char c = s[i];
    if (c == '"' || c == '\\') {
      obuf[olen++] = '\\';
      obuf[olen++] = (char)c;
    } else if (c >= 0x20 && c < 0x7f) obuf[olen++] = (char)c;
    else olen += (size_t)sprintf(obuf + olen, "\\x%02x", c);
  }
  obuf[olen++] = '"';
  if (shortened) oput("...", 3);
}

static void oline_start(pid_t pid) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  ofmt("%d %lld.%06ld ", pid, (long long)ts.tv_sec, ts.tv_nsec / 1000);
}

/* Writes out everything buffered; a reader that is gone means the harness is: end (EXITKILL). */
static void oflush(void) {
  size_t done = 0;
  while (done < olen) {
    ssize_t n = write(out_fd, obuf + done, olen - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      die("writing the trace");
    }
    done += (size_t)n;
  }
  olen = 0;
}

/* ---------- per-task state ---------- */

enum { UNKNOWN = 0, KNOWN = 1, EARLY_STOP = 2, EXPECTED = 3, HELD = 4 };

struct task {
  pid_t tid;
  int state;
  char *exec_line; /* "execve(...)" of its pending exec entry, or NULL */
  char *exec_path; /* that execve's path as given (whole), or NULL */
  char *exec_arg1; /* and its argv[1] (whole), or NULL */
  unsigned long hold; /* while HELD: the number of its hold, which the harness names to resume it */
  struct task *next;
};

#define BUCKETS 4096
static struct task *tasks[BUCKETS];
static long live_tasks;

static struct task *find(pid_t tid, int create) {
  struct task **b = &tasks[(unsigned)tid % BUCKETS];
  for (struct task *t = *b; t; t = t->next)
    if (t->tid == tid) return t;
  if (!create) return NULL;
  struct task *t = calloc(1, sizeof *t);
  if (!t) die("out of memory");
  t->tid = tid;
  t->next = *b;
  *b = t;
  live_tasks++;
  return t;
}

static void forget(pid_t tid) {
  struct task **p = &tasks[(unsigned)tid % BUCKETS];
  for (; *p; p = &(*p)->next) {
    if ((*p)->tid == tid) {
      struct task *t = *p;
      *p = t->next;
      free(t->exec_line);
      free(t->exec_path);
      free(t->exec_arg1);
      free(t);
      live_tasks--;
      return;
    }
  }
}

/* ---------- reading an exec's arguments from the tracee ---------- */

/* Up to `max` bytes of the NUL-terminated string at `addr`; returns its length, -1 if unreadable. */
static ssize_t read_string(pid_t tid, uint64_t addr, char *buf, size_t max, int *shortened) {
  size_t got = 0;
  *shortened = 0;
  while (got < max) {
    size_t page_left = 4096 - ((addr + got) & 4095);
    size_t want = page_left < max - got ? page_left : max - got;
    struct iovec local = {buf + got, want}, remote = {(void *)(uintptr_t)(addr + got), want};
    ssize_t n = process_vm_readv(tid, &local, 1, &remote, 1, 0);
    if (n <= 0) return got ? (ssize_t)got : -1;
    char *nul = memchr(buf + got, 0, (size_t)n);
    if (nul) return nul - buf;
    got += (size_t)n;
  }
  *shortened = 1;
  return (ssize_t)got;
}

static uint64_t read_pointer(pid_t tid, uint64_t addr, int size, int *ok) {
  uint64_t v = 0;
  struct iovec local = {&v, (size_t)size}, remote = {(void *)(uintptr_t)addr, (size_t)size};
  *ok = process_vm_readv(tid, &local, 1, &remote, 1, 0) == size;
  return v; /* little-endian: a 4-byte pointer fills the low half */
}

static char strbuf[MAX_STRING];

/* Appends `"path", [argv...]` for an exec entry; ptr_size is 8, or 4 for a 32-bit caller. `path_out` and
 * `arg1_out`, when given, receive copies of the path and argv[1] when they were read whole (else NULL). */
static void oexec_args(pid_t tid, uint64_t path, uint64_t argv, int ptr_size, char **path_out, char **arg1_out) {
  int shortened, ok;
  ssize_t n = read_string(tid, path, strbuf, sizeof strbuf, &shortened);
  if (n < 0) ostr("NULL");
  else oquoted((unsigned char *)strbuf, (size_t)n, shortened);
  if (path_out) *path_out = n > 0 && !shortened ? strndup(strbuf, (size_t)n) : NULL;
  ostr(", [");
  size_t total = 0;
  for (int i = 0; argv; i++) {
    uint64_t p = read_pointer(tid, argv + (uint64_t)i * ptr_size, ptr_size, &ok);
    if (!ok || !p) break;
    if (i > 0) ostr(", ");
    if (i >= MAX_ARGS || total >= 4 * MAX_STRING) {
      ostr("...");
      break;
    }
    n = read_string(tid, p, strbuf, sizeof strbuf, &shortened);
    if (n < 0) {
      ostr("...");
      break;
    }
    oquoted((unsigned char *)strbuf, (size_t)n, shortened);
    if (i == 1 && arg1_out && !shortened) *arg1_out = strndup(strbuf, (size_t)n);
    total += (size_t)n;
  }
  ostr("], envp");
}

/* A seccomp stop at an exec's entry: keep the call as text until the exec succeeds. */
static void on_exec_entry(struct task *t) {
  struct __ptrace_syscall_info info;
  memset(&info, 0, sizeof info);
  if (ptrace(PTRACE_GET_SYSCALL_INFO, t->tid, sizeof info, &info) <= 0 || info.op != PTRACE_SYSCALL_INFO_SECCOMP) return;
  uint64_t nr = info.seccomp.nr, *a = info.seccomp.args;
  int ptr_size = 8, is_execve, is_execveat;
#if defined(__x86_64__)
  if (info.arch == AUDIT_ARCH_I386) {
    ptr_size = 4;
    is_execve = nr == I386_EXECVE;
    is_execveat = nr == I386_EXECVEAT;
  } else {
    if (nr & X32_BIT) ptr_size = 4;
    nr &= ~(uint64_t)X32_BIT;
    is_execve = nr == SYS_execve || nr == 520; /* 520: x32's execve */
    is_execveat = nr == SYS_execveat || nr == 545;
  }
#else
  is_execve = nr == SYS_execve;
  is_execveat = nr == SYS_execveat;
#endif
  if (!is_execve && !is_execveat) return;
  size_t mark = olen;
  free(t->exec_path);
  free(t->exec_arg1);
  t->exec_path = t->exec_arg1 = NULL;
  if (is_execve) {
    ostr("execve(");
    oexec_args(t->tid, a[0], a[1], ptr_size, &t->exec_path, &t->exec_arg1); /* only execve's may let it skip the hold */
  } else {
    int dirfd = (int)a[0];
    if (dirfd == AT_FDCWD) ostr("execveat(AT_FDCWD, ");
    else ofmt("execveat(%d, ", dirfd);
    oexec_args(t->tid, a[1], a[2], ptr_size, NULL, NULL);
  }
  free(t->exec_line);
  t->exec_line = strndup(obuf + mark, olen - mark);
  olen = mark; /* kept aside, not written: only a successful exec is a line */
}

/* ---------- known programs: executables the harness has read, which need no hold ---------- */

struct identity {
  unsigned long long dev, ino, size;
  long long mtime_s, mtime_ns, ctime_s, ctime_ns;
};

#define KNOWN_SLOTS 8192 /* open addressing; at most half full */
static struct identity known_ids[KNOWN_SLOTS];
static unsigned char known_used[KNOWN_SLOTS];
/* Per slot, for an interpreter: the first arguments that make it run inline code, each followed by a
 * NUL, the list by another; NULL for a program that runs no script whatever its arguments. */
static char *known_inline[KNOWN_SLOTS];
static int known_count;

static int same_identity(const struct identity *a, const struct identity *b) {
  return a->dev == b->dev && a->ino == b->ino && a->size == b->size && a->mtime_s == b->mtime_s && a->mtime_ns == b->mtime_ns &&
         a->ctime_s == b->ctime_s && a->ctime_ns == b->ctime_ns;
}

static unsigned known_slot(const struct identity *id) {
  return (unsigned)((id->ino * 0x9E3779B97F4A7C15ull) ^ id->dev) & (KNOWN_SLOTS - 1);
}

static void known_add(const struct identity *id, char *inline_args) {
  unsigned i = known_slot(id);
  for (; known_used[i]; i = (i + 1) & (KNOWN_SLOTS - 1))
    if (same_identity(&known_ids[i], id)) break;
  if (known_used[i] || known_count >= KNOWN_SLOTS / 2) { /* named before (the first naming stands), or full: held, as any */
    free(inline_args);
    return;
  }
  known_ids[i] = *id;
  known_inline[i] = inline_args;
  known_used[i] = 1;
  known_count++;
}

/* Whether `id` is known, and when it is an interpreter, `arg1` one of its inline-code arguments. */
static int known_has(const struct identity *id, const char *arg1) {
  for (unsigned i = known_slot(id); known_used[i]; i = (i + 1) & (KNOWN_SLOTS - 1)) {
    if (!same_identity(&known_ids[i], id)) continue;
    if (!known_inline[i]) return 1;
    if (!arg1) return 0;
    for (const char *a = known_inline[i]; *a; a += strlen(a) + 1)
      if (!strcmp(a, arg1)) return 1;
    return 0;
  }
  return 0;
}

static void identity_of(const struct stat *st, struct identity *id) {
  id->dev = (unsigned long long)st->st_dev;
  id->ino = (unsigned long long)st->st_ino;
  id->size = (unsigned long long)st->st_size;
  id->mtime_s = (long long)st->st_mtim.tv_sec;
  id->mtime_ns = st->st_mtim.tv_nsec;
  id->ctime_s = (long long)st->st_ctim.tv_sec;
  id->ctime_ns = st->st_ctim.tv_nsec;
}

#ifndef RESOLVE_IN_ROOT
#define RESOLVE_NO_MAGICLINKS 0x02
#define RESOLVE_BENEATH 0x08
#define RESOLVE_IN_ROOT 0x10
#endif
struct a2rl_open_how {
  uint64_t flags, mode, resolve;
};

/*
 * Whether the exec of `path` (as execve was given it) that loaded process `tid`'s image is a known
 * program: the image's identity is known, and `path` resolves, inside the process's root (relative
 * paths beneath its cwd), to that very file: not a `#!` script, whose image is its interpreter. The
 * path is opened O_PATH (nothing is read, a FIFO or device is not opened) and never leaves the root
 * (RESOLVE_IN_ROOT / RESOLVE_BENEATH, no /proc magic links). Anything unsure says no: the exec is held.
 */
static int known_program(pid_t tid, const char *path, const char *arg1, struct identity *id) {
  if (known_count == 0 || !path || !path[0]) return 0;
  char proc[64];
  struct stat image, named;
  snprintf(proc, sizeof proc, "/proc/%d/exe", tid);
  if (stat(proc, &image) != 0 || !S_ISREG(image.st_mode)) return 0;
  identity_of(&image, id);
  if (!known_has(id, arg1)) return 0;
  int absolute = path[0] == '/';
  snprintf(proc, sizeof proc, absolute ? "/proc/%d/root" : "/proc/%d/cwd", tid);
  int dir = open(proc, O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return 0;
  struct a2rl_open_how how = {O_PATH | O_CLOEXEC, 0, (absolute ? RESOLVE_IN_ROOT : RESOLVE_BENEATH) | RESOLVE_NO_MAGICLINKS};
  int fd = (int)syscall(SYS_openat2, dir, path, &how, sizeof how);
  close(dir);
  if (fd < 0) return 0;
  int same = fstat(fd, &named) == 0 && named.st_dev == image.st_dev && named.st_ino == image.st_ino;
  close(fd);
  return same;
}

/* A control record "K DEV INO SIZE MTIME_S MTIME_NS CTIME_S CTIME_NS [ARG1...]": a known program (an
 * interpreter when arguments follow: the ones that make it run inline code). */
static void known_record(const char *text) {
  struct identity id;
  int end = 0;
  if (sscanf(text, "K %llu %llu %llu %lld %lld %lld %lld%n", &id.dev, &id.ino, &id.size, &id.mtime_s, &id.mtime_ns, &id.ctime_s, &id.ctime_ns, &end) != 7) return;
  const char *rest = text + end;
  char *inline_args = NULL;
  if (*rest) {
    size_t n = strlen(rest);
    inline_args = calloc(n + 2, 1); /* " -c -m" -> "-c\0-m\0\0" */
    if (!inline_args) return;
    size_t w = 0;
    for (const char *p = rest; *p;) {
      while (*p == ' ') p++;
      while (*p && *p != ' ') inline_args[w++] = *p++;
      if (w > 0 && inline_args[w - 1]) inline_args[w++] = 0;
    }
    if (w == 0) { /* only spaces: an interpreter with no inline argument is never known */
      free(inline_args);
      return;
    }
  }
  known_add(&id, inline_args);
}

static unsigned long holds;

/* The new image of `pid` is loaded (its first instruction not run): report it and hold it. */
static void on_exec(struct task *t, int held) {
  unsigned long former = 0;
  ptrace(PTRACE_GETEVENTMSG, t->tid, 0, &former);
  struct task *caller = (pid_t)former != t->tid ? find((pid_t)former, 0) : t;
  char *line = caller ? caller->exec_line : NULL;
  char *path = caller ? caller->exec_path : NULL, *arg1 = caller ? caller->exec_arg1 : NULL;
  if (caller) caller->exec_line = caller->exec_path = caller->exec_arg1 = NULL;
  if (caller && caller != t) forget(caller->tid); /* a thread exec'd: it took the leader's pid */

  char cwd[4200], link[64];
  snprintf(link, sizeof link, "/proc/%d/cwd", t->tid);
  ssize_t n = readlink(link, cwd, sizeof cwd - 1);
  if (n > 0 && cwd[0] == '/') {
    oline_start(t->tid);
    ostr("chdir(");
    oquoted((unsigned char *)cwd, (size_t)n, 0);
    ostr(") = 0\n");
  }
  struct identity id;
  if (held && line && known_program(t->tid, path, arg1, &id)) {
    char exe[4200];
    snprintf(link, sizeof link, "/proc/%d/exe", t->tid);
    ssize_t m = readlink(link, exe, sizeof exe - 1);
    if (m > 0) {
      oline_start(t->tid);
      ofmt("--- known exec %llu %llu %llu %lld %lld %lld %lld ", id.dev, id.ino, id.size, id.mtime_s, id.mtime_ns, id.ctime_s, id.ctime_ns);
      oquoted((unsigned char *)exe, (size_t)m, 0);
      ostr(" ---\n");
      held = 0;
    }
  }
  free(path);
  free(arg1);
  oline_start(t->tid);
  if (line) ostr(line);
  else {
    /* No entry seen (a call the filter does not know): the harness reads /proc while it waits. */
    char cmd[64];
    snprintf(cmd, sizeof cmd, "/proc/%d/cmdline", t->tid);
    ostr("execveat(-1, \"\", [");
    int fd = open(cmd, O_RDONLY | O_CLOEXEC);
    ssize_t len = fd >= 0 ? read(fd, strbuf, sizeof strbuf) : -1;
    if (fd >= 0) close(fd);
    for (ssize_t i = 0, first = 1; i < len; first = 0) {
      size_t l = strnlen(strbuf + i, (size_t)(len - i));
      if (!first) ostr(", ");
      oquoted((unsigned char *)strbuf + i, l, 0);
      i += (ssize_t)l + 1;
    }
    ostr("], envp");
  }
  ostr(") = 0\n");
  free(line);
  if (held) {
    oline_start(t->tid);
    t->hold = ++holds;
    ofmt("--- held at exec %lu ---\n", t->hold);
    t->state = HELD;
  } else ptrace(PTRACE_CONT, t->tid, 0, 0);
}

/* ---------- the harness's control FIFO: pids to resume ---------- */

static int ctl_fd = -1;
static char ctl_buf[4096];
static size_t ctl_len;

/* A pid, with the hold it names: a late record for a pid since reused cannot resume its new program. */
static void resume(pid_t tid, unsigned long hold) {
  struct task *t = find(tid, 0);
  if (!t || t->state != HELD || t->hold != hold) return; /* not held (any more): nothing to do */
  t->state = KNOWN;
  ptrace(PTRACE_CONT, tid, 0, 0);
}

static void release_all(void) {
  for (int b = 0; b < BUCKETS; b++)
    for (struct task *t = tasks[b]; t; t = t->next)
      if (t->state == HELD) {
        t->state = KNOWN;
        ptrace(PTRACE_CONT, t->tid, 0, 0);
      }
}

/* Reads "PID HOLD\n" records; at EOF (the harness is gone) lets every held process go, and holds no more. */
static void read_control(void) {
  for (;;) {
    ssize_t n = read(ctl_fd, ctl_buf + ctl_len, sizeof ctl_buf - ctl_len);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) return;
    }
    if (n <= 0) {
      close(ctl_fd);
      ctl_fd = -1;
      release_all();
      return;
    }
    ctl_len += (size_t)n;
    char *start = ctl_buf, *nl;
    while ((nl = memchr(start, '\n', ctl_len - (size_t)(start - ctl_buf)))) {
      *nl = 0;
      char *sp = strchr(start, ' ');
      if (start[0] == 'K') known_record(start);
      else if (sp) resume((pid_t)atoi(start), strtoul(sp + 1, NULL, 10));
      start = nl + 1;
    }
    ctl_len -= (size_t)(start - ctl_buf);
    memmove(ctl_buf, start, ctl_len);
    if (ctl_len == sizeof ctl_buf) ctl_len = 0; /* a line that long is not a pid */
  }
}

/* ---------- the tracer's loop ---------- */

static const char *signame(int sig) {
  const char *abbrev = sigabbrev_np(sig);
  static char buf[32];
  if (abbrev) snprintf(buf, sizeof buf, "SIG%s", abbrev);
  else snprintf(buf, sizeof buf, "SIG%d", sig);
  return buf;
}

/* A new child's first stop: continued once its parent's clone line is out (EXPECTED), else kept. */
static void on_child_stop(struct task *t) {
  if (t->state == EXPECTED) {
    t->state = KNOWN;
    ptrace(PTRACE_CONT, t->tid, 0, 0);
  } else t->state = EARLY_STOP;
}

static void on_clone(pid_t caller, int event) {
  unsigned long msg = 0;
  ptrace(PTRACE_GETEVENTMSG, caller, 0, &msg);
  pid_t child = (pid_t)msg;
  int thread = 0;
  if (event == PTRACE_EVENT_CLONE) {
    char path[64];
    struct stat st;
    snprintf(path, sizeof path, "/proc/%d/task/%d", caller, child);
    thread = stat(path, &st) == 0;
  }
  oline_start(caller);
  ofmt("clone(flags=%s) = %d /* %d in the tracer's PID NS */\n", thread ? "CLONE_THREAD" : "0", child, child);
  struct task *c = find(child, 1);
  if (c->state == EARLY_STOP) {
    c->state = KNOWN;
    ptrace(PTRACE_CONT, child, 0, 0);
  } else if (c->state == UNKNOWN) c->state = EXPECTED;
  ptrace(PTRACE_CONT, caller, 0, 0);
}

static void on_stop(pid_t tid, int status) {
  struct task *t = find(tid, 1);
  int sig = WSTOPSIG(status), event = (unsigned)status >> 16;
  if (event == PTRACE_EVENT_SECCOMP) {
    on_exec_entry(t);
    ptrace(PTRACE_CONT, tid, 0, 0);
  } else if (event == PTRACE_EVENT_EXEC) {
    if (t->state == UNKNOWN) t->state = KNOWN;
    on_exec(t, ctl_fd >= 0);
  } else if (event == PTRACE_EVENT_FORK || event == PTRACE_EVENT_VFORK || event == PTRACE_EVENT_CLONE) {
    if (t->state == UNKNOWN) t->state = KNOWN;
    on_clone(tid, event);
  } else if (event == PTRACE_EVENT_STOP) {
    if (t->state == UNKNOWN || t->state == EXPECTED) on_child_stop(t);
    else if (sig == SIGSTOP || sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU) ptrace(PTRACE_LISTEN, tid, 0, 0); /* a group stop */
    else ptrace(PTRACE_CONT, tid, 0, 0);
  } else {
    if (t->state == UNKNOWN) t->state = KNOWN;
    ptrace(PTRACE_CONT, tid, 0, sig); /* a signal for the tracee: delivered */
  }
}

static void on_end(pid_t tid, int status) {
  oline_start(tid);
  if (WIFEXITED(status)) ofmt("+++ exited with %d +++\n", WEXITSTATUS(status));
  else ofmt("+++ killed by %s%s +++\n", signame(WTERMSIG(status)), WCOREDUMP(status) ? " (core dumped)" : "");
  forget(tid);
}

/* Reaps every stop and exit waiting; returns 0 once no tracee is left. */
static int drain_waits(void) {
  for (;;) {
    int status;
    pid_t tid = waitpid(-1, &status, __WALL | WNOHANG);
    if (tid == 0) return 1;
    if (tid < 0) {
      if (errno == EINTR) continue;
      return 0; /* ECHILD */
    }
    if (WIFSTOPPED(status)) on_stop(tid, status);
    else if (WIFEXITED(status) || WIFSIGNALED(status)) on_end(tid, status);
  }
}

static int trace_loop(void) {
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  int sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
  if (sfd < 0) die("signalfd");
  for (;;) {
    if (!drain_waits()) break;
    oflush();
    struct pollfd fds[2] = {{sfd, POLLIN, 0}, {ctl_fd, POLLIN, 0}};
    /* The timeout only guards against a lost wake-up; stops and exits arrive as SIGCHLD. */
    int n = poll(fds, ctl_fd >= 0 ? 2 : 1, 200);
    if (n < 0 && errno != EINTR) die("poll");
    if (n > 0 && fds[0].revents) {
      struct signalfd_siginfo si;
      while (read(sfd, &si, sizeof si) == sizeof si) {
      }
    }
    if (ctl_fd >= 0 && n > 0 && fds[1].revents) read_control();
  }
  oflush();
  return 0;
}

/* ---------- start: the command stays the launched process; the tracer detaches ---------- */

static int install_filter(void) {
  struct sock_filter f[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
#if defined(__x86_64__)
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 0, 6),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_execve, 9, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_execveat, 8, 0),
      /* x32 (pointers of 4 bytes, numbers with bit 30): its two exec calls */
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, X32_BIT | 520, 7, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, X32_BIT | 545, 6, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      /* i386 on x86_64; an architecture not known here: every call stops */
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_I386, 0, 4),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, I386_EXECVE, 2, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, I386_EXECVEAT, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRACE),
#else
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, NATIVE_ARCH, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRACE),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_execve, 2, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_execveat, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRACE),
#endif
  };
  struct sock_fprog prog = {(unsigned short)(sizeof f / sizeof f[0]), f};
  if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) == 0) return 0;
  if (errno != EACCES) return -1;
  /* Without CAP_SYS_ADMIN a filter needs no_new_privs (as strace --seccomp-bpf does). */
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return -1;
  return (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog);
}

/* The tracer keeps only its own descriptors: the agent's output pipes must close when the agent's tree ends. */
static void close_inherited(const int *keep, int n) {
  int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
  if (devnull >= 0) {
    for (int fd = 0; fd < 3; fd++) dup2(devnull, fd);
    close(devnull);
  }
  DIR *d = opendir("/proc/self/fd");
  if (!d) return;
  int self = dirfd(d);
  for (struct dirent *e; (e = readdir(d));) {
    int fd = atoi(e->d_name), kept = fd < 3 || fd == self || e->d_name[0] == '.';
    for (int k = 0; k < n; k++) kept |= fd == keep[k];
    if (!kept) close(fd);
  }
  closedir(d);
}

static void usage(void) {
  fprintf(stderr, "usage: a2rl-trace -o OUTPUT_FIFO -c CONTROL_FIFO -- COMMAND [ARGS...]\n");
  _exit(2);
}

static void read_all(int fd, void *buf, size_t n) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = read(fd, (char *)buf + got, n - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) die("the tracer's start-up handshake");
    got += (size_t)r;
  }
}

int main(int argc, char **argv) {
  const char *output = NULL, *control = NULL;
  int i = 1;
  for (; i < argc; i++) {
    if (!strcmp(argv[i], "--")) {
      i++;
      break;
    }
    if (i + 1 >= argc) usage();
    if (!strcmp(argv[i], "-o")) output = argv[++i];
    else if (!strcmp(argv[i], "-c")) control = argv[++i];
    else usage();
  }
  if (!output || !control || i >= argc) usage();

  int to_tracer[2], to_command[2];
  if (pipe2(to_tracer, O_CLOEXEC) || pipe2(to_command, O_CLOEXEC)) die("pipe");
  pid_t command = getpid();
  pid_t middle = fork();
  if (middle < 0) die("fork");
  if (middle > 0) {
    /* The command: let the tracer (a grandchild) trace it, wait until it does, then exec. */
    int status;
    pid_t tracer;
    while (waitpid(middle, &status, 0) < 0 && errno == EINTR) {
    }
    read_all(to_command[0], &tracer, sizeof tracer);
    prctl(PR_SET_PTRACER, (unsigned long)tracer, 0, 0, 0); /* Yama, where it restricts ptrace to descendants */
    char go = 1, attached = 0;
    if (write(to_tracer[1], &go, 1) != 1) die("the tracer's start-up handshake");
    read_all(to_command[0], &attached, 1);
    prctl(PR_SET_PTRACER, 0, 0, 0, 0);
    if (!attached) {
      fprintf(stderr, "a2rl-trace: cannot trace the command (ptrace refused)\n");
      _exit(126);
    }
    if (install_filter() != 0) die("installing the exec filter (seccomp)");
    execvp(argv[i], argv + i);
    fprintf(stderr, "a2rl-trace: cannot run %s: %s\n", argv[i], strerror(errno));
    _exit(127);
  }
  /* The middle process: detach the tracer into its own session and go. */
  if (setsid() < 0) die("setsid");
  pid_t tracer = fork();
  if (tracer < 0) die("fork");
  if (tracer > 0) _exit(0);
  tracer = getpid();
  signal(SIGPIPE, SIG_IGN);
  signal(SIGHUP, SIG_IGN);
  signal(SIGINT, SIG_IGN);
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  sigprocmask(SIG_BLOCK, &chld, NULL);
  /* The control FIFO first: the harness holds its write end open, so this sees EOF only once it is gone. */
  ctl_fd = open(control, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  out_fd = open(output, O_WRONLY | O_CLOEXEC);
  if (write(to_command[1], &tracer, sizeof tracer) != sizeof tracer) die("the tracer's start-up handshake");
  char go;
  read_all(to_tracer[0], &go, 1);
  long opts = PTRACE_O_TRACEEXEC | PTRACE_O_TRACEFORK | PTRACE_O_TRACEVFORK | PTRACE_O_TRACECLONE | PTRACE_O_TRACESECCOMP | PTRACE_O_EXITKILL;
  char attached = ctl_fd >= 0 && out_fd >= 0 && ptrace(PTRACE_SEIZE, command, 0, opts) == 0;
  if (!attached) fprintf(stderr, "a2rl-trace: %s\n", ctl_fd < 0 || out_fd < 0 ? "cannot open the trace FIFOs" : strerror(errno));
  if (write(to_command[1], &attached, 1) != 1 || !attached) _exit(1);
  int keep[] = {ctl_fd, out_fd};
  close_inherited(keep, 2);
  find(command, 1)->state = KNOWN;
  return trace_loop();
}
