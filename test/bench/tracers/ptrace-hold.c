/*
 * A minimal ptrace tracer (no strace): every process of the command is followed (fork, vfork,
 * clone), each successful exec stops the process at PTRACE_EVENT_EXEC -- the new image is loaded,
 * its first instruction not run -- and it stays stopped while the tracer reads its argv and image,
 * then continues. No syscall is stopped, no SIGSTOP injected (so no job-control stop a shell could
 * notice), every exit's status arrives through waitpid. What strace adds on top: the syscall entry
 * (the argv execve was given, before a #! rewrite), chdir, and its text output.
 *
 * usage: ptrace-hold CMD ARGS...
 */
#include "common.h"
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/wait.h>

int main(int argc, char **argv) {
  if (argc < 2) return 2;
  double t0 = now_s();
  pid_t root = fork();
  if (root == 0) {
    raise(SIGSTOP);
    execvp(argv[1], argv + 1);
    _exit(127);
  }
  int st;
  if (waitpid(root, &st, WUNTRACED) != root || !WIFSTOPPED(st)) return 3;
  long opts = PTRACE_O_TRACEEXEC | PTRACE_O_TRACEFORK | PTRACE_O_TRACEVFORK | PTRACE_O_TRACECLONE | PTRACE_O_EXITKILL;
  if (ptrace(PTRACE_SEIZE, root, 0, opts) != 0) {
    perror("PTRACE_SEIZE");
    return 3;
  }
  kill(root, SIGCONT);
  for (;;) {
    pid_t pid = waitpid(-1, &st, __WALL);
    if (pid < 0) {
      if (errno == EINTR) continue;
      break; /* ECHILD: every tracee is gone */
    }
    if (WIFEXITED(st) || WIFSIGNALED(st)) {
      C.exits++;
      C.exit_status++;
      if (pid == root) C.root_status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      continue;
    }
    if (!WIFSTOPPED(st)) continue;
    int sig = WSTOPSIG(st), event = (st >> 16) & 0xff;
    if (event == PTRACE_EVENT_EXEC) {
      C.execs++;
      read_cmdline(pid);
      read_exe(pid);
      ptrace(PTRACE_CONT, pid, 0, 0);
    } else if (event == PTRACE_EVENT_FORK || event == PTRACE_EVENT_VFORK || event == PTRACE_EVENT_CLONE) {
      C.forks++;
      ptrace(PTRACE_CONT, pid, 0, 0);
    } else if (event == PTRACE_EVENT_STOP) {
      if (sig == SIGSTOP || sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU) ptrace(PTRACE_LISTEN, pid, 0, 0); /* a group stop */
      else ptrace(PTRACE_CONT, pid, 0, 0); /* a new child's first stop */
    } else {
      ptrace(PTRACE_CONT, pid, 0, sig); /* a signal for the tracee: delivered */
    }
  }
  print_counts("ptrace-hold", now_s() - t0);
  return (int)C.root_status;
}
