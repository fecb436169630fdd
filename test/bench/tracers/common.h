/*
 * Shared by the tracer prototypes of `npm run bench -- tracers` (test/bench/tracers.bench.ts).
 * Each prototype runs a command, watches its execs one way, and prints one JSON line of counts on
 * the descriptor named by A2RL_TRACER_OUT (default stderr). They are measurement tools, not tracers
 * a2rl runs: no record is kept, only what each way could see and what reading it cost.
 *
 * "capture" stands in for exec-capture.ts: read the program's argv (cmdline) and up to 64 KiB of
 * the file it runs, the part a2rl keeps of a system binary (the hash of large images is cached).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct counts {
  long execs;        /* exec events seen */
  long argv_ok;      /* argv read while it was still the exec'd program's */
  long argv_missed;  /* argv unreadable: the process was gone or had moved on */
  long file_ok;      /* the program (image or script) read */
  long file_missed;  /* the program could not be read */
  long script_ok;    /* an interpreter's script operand (argv[1], a path) read */
  long script_missed;/* ... could not be read (deleted or moved before the read) */
  long forks;        /* fork/clone events seen (processes, threads included where the way cannot tell) */
  long exits;        /* exits seen */
  long exit_status;  /* exits whose status was known */
  long root_status;  /* the traced command's own exit status */
};

static struct counts C;
static char capture_buf[64 * 1024];

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Reads a whole small file (a /proc entry) into buf; returns bytes read or -1. */
static ssize_t read_small(const char *path, char *buf, size_t size) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t n = read(fd, buf, size);
  close(fd);
  return n;
}

static int read_head(int fd);

/*
 * argv of a process, as /proc shows it now (counted, not kept); for an interpreter started on a
 * script (`sh x.sh`, or a #! script, which the kernel turns into `interp path`), the script is read
 * too: argv[1] when it is not an option, from the process's cwd.
 */
__attribute__((unused)) static int read_cmdline(int pid) {
  char path[64], buf[4096];
  snprintf(path, sizeof path, "/proc/%d/cmdline", pid);
  ssize_t n = read_small(path, buf, sizeof buf - 1);
  if (n > 0) C.argv_ok++;
  else {
    C.argv_missed++;
    return 0;
  }
  buf[n] = 0;
  const char *arg0 = buf, *base = strrchr(arg0, '/');
  base = base ? base + 1 : arg0;
  size_t len0 = strlen(arg0);
  if ((size_t)n > len0 + 1 && (!strcmp(base, "sh") || !strcmp(base, "bash") || !strncmp(base, "python", 6))) {
    const char *arg1 = buf + len0 + 1;
    if (arg1[0] && arg1[0] != '-') {
      char file[4200];
      if (arg1[0] == '/') snprintf(file, sizeof file, "/proc/%d/root%s", pid, arg1);
      else snprintf(file, sizeof file, "/proc/%d/cwd/%s", pid, arg1);
      int fd = open(file, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
      if (fd >= 0) {
        C.script_ok++;
        close(fd);
      } else C.script_missed++;
    }
  }
  return 1;
}

/* Up to 64 KiB of an open file, from its start. */
static int read_head(int fd) {
  if (fd < 0) {
    C.file_missed++;
    return 0;
  }
  ssize_t n = pread(fd, capture_buf, sizeof capture_buf, 0);
  close(fd);
  if (n >= 0) C.file_ok++;
  else C.file_missed++;
  return n >= 0;
}

/* The image the kernel loaded for pid (valid right after its exec). */
__attribute__((unused)) static int read_exe(int pid) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/exe", pid);
  return read_head(open(path, O_RDONLY | O_CLOEXEC));
}

static void print_counts(const char *way, double seconds) {
  const char *fdname = getenv("A2RL_TRACER_OUT");
  FILE *out = stderr;
  if (fdname) {
    out = fopen(fdname, "a");
    if (!out) out = stderr;
  }
  fprintf(out,
          "{\"way\":\"%s\",\"seconds\":%.4f,\"execs\":%ld,\"argv_ok\":%ld,\"argv_missed\":%ld,\"file_ok\":%ld,\"file_missed\":%ld,"
          "\"script_ok\":%ld,\"script_missed\":%ld,\"forks\":%ld,\"exits\":%ld,\"exit_status\":%ld,\"root_status\":%ld}\n",
          way, seconds, C.execs, C.argv_ok, C.argv_missed, C.file_ok, C.file_missed, C.script_ok, C.script_missed, C.forks, C.exits, C.exit_status, C.root_status);
  if (out != stderr) fclose(out);
}
