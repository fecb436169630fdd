/*
 * seccomp user notification: the command runs under a filter that turns every execve/execveat
 * into a notification to this supervisor. The caller is blocked in the syscall's entry while the
 * supervisor reads its argv (from /proc/<pid>/mem), its cwd and the file it names (inside
 * /proc/<pid>/root), checks the notification is still valid, and lets the call go on
 * (SECCOMP_USER_NOTIF_FLAG_CONTINUE). Forks and exits are not seen (only the root's, as its
 * parent); whether the exec succeeded is not known; the file read is the one named at entry, which
 * the kernel opens again afterwards (another process can swap it in between).
 *
 * usage: seccomp-notify CMD ARGS...
 */
#include "common.h"
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <stddef.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>

static int install_filter(void) {
  struct sock_filter f[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_execve, 2, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_execveat, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF),
  };
  struct sock_fprog prog = {.len = sizeof f / sizeof f[0], .filter = f};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return -1;
  return (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog);
}

static void send_fd(int sock, int fd) {
  char data = 0, ctl[CMSG_SPACE(sizeof(int))] = {0};
  struct iovec iov = {.iov_base = &data, .iov_len = 1};
  struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof ctl};
  struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  memcpy(CMSG_DATA(c), &fd, sizeof(int));
  sendmsg(sock, &msg, 0);
}

static int recv_fd(int sock) {
  char data, ctl[CMSG_SPACE(sizeof(int))];
  struct iovec iov = {.iov_base = &data, .iov_len = 1};
  struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof ctl};
  if (recvmsg(sock, &msg, 0) <= 0) return -1;
  struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
  if (!c) return -1;
  int fd;
  memcpy(&fd, CMSG_DATA(c), sizeof(int));
  return fd;
}

/* A string at addr in the caller's memory (mem: its /proc/<pid>/mem). */
static ssize_t read_string(int mem, unsigned long addr, char *buf, size_t size) {
  ssize_t n = pread(mem, buf, size - 1, (off_t)addr);
  if (n <= 0) return -1;
  buf[n] = 0;
  return (ssize_t)strlen(buf);
}

/* argv and the named file of a blocked execve/execveat. */
static void capture(struct seccomp_notif *req, int notify) {
  char path[96], name[4096], arg[4096];
  snprintf(path, sizeof path, "/proc/%d/mem", req->pid);
  int mem = open(path, O_RDONLY | O_CLOEXEC);
  int ok = mem >= 0;
  int at = req->data.nr == __NR_execveat;
  unsigned long file = req->data.args[at ? 1 : 0], vec = req->data.args[at ? 2 : 1];
  if (ok) ok = read_string(mem, file, name, sizeof name) >= 0;
  for (int i = 0; ok && i < 4096; i++) {
    unsigned long p;
    if (pread(mem, &p, sizeof p, (off_t)(vec + i * sizeof p)) != sizeof p) ok = 0;
    else if (p == 0) break;
    else if (read_string(mem, p, arg, sizeof arg) < 0) ok = 0;
  }
  if (mem >= 0) close(mem);
  /* Still the same blocked call: what was read is its own. */
  if (ioctl(notify, SECCOMP_IOCTL_NOTIF_ID_VALID, &req->id) != 0) ok = 0;
  if (ok) C.argv_ok++;
  else C.argv_missed++;
  if (!ok) return;
  char full[4300];
  if (name[0] == '/') snprintf(full, sizeof full, "/proc/%d/root%s", req->pid, name);
  else snprintf(full, sizeof full, "/proc/%d/cwd/%s", req->pid, name);
  read_head(open(full, O_RDONLY | O_CLOEXEC | O_NONBLOCK));
}

int main(int argc, char **argv) {
  if (argc < 2) return 2;
  double t0 = now_s();
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) return 3;
  pid_t root = fork();
  if (root == 0) {
    close(sv[0]);
    int fd = install_filter();
    if (fd < 0) {
      perror("seccomp");
      _exit(126);
    }
    send_fd(sv[1], fd);
    close(fd);
    close(sv[1]);
    execvp(argv[1], argv + 1);
    _exit(127);
  }
  close(sv[1]);
  int notify = recv_fd(sv[0]);
  if (notify < 0) {
    waitpid(root, NULL, 0);
    fprintf(stderr, "seccomp-notify: no listener\n");
    return 3;
  }
  struct seccomp_notif_sizes sizes;
  syscall(SYS_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &sizes);
  struct seccomp_notif *req = calloc(1, sizes.seccomp_notif > sizeof *req ? sizes.seccomp_notif : sizeof *req);
  struct seccomp_notif_resp *resp = calloc(1, sizes.seccomp_notif_resp > sizeof *resp ? sizes.seccomp_notif_resp : sizeof *resp);
  int root_done = 0;
  for (;;) {
    struct pollfd p = {.fd = notify, .events = POLLIN};
    int r = poll(&p, 1, 100);
    if (!root_done) {
      int st;
      if (waitpid(root, &st, WNOHANG) == root) {
        root_done = 1;
        C.exits++;
        C.exit_status++;
        C.root_status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      }
    }
    if (r > 0 && (p.revents & POLLIN)) {
      memset(req, 0, sizes.seccomp_notif);
      if (ioctl(notify, SECCOMP_IOCTL_NOTIF_RECV, req) != 0) continue;
      C.execs++;
      capture(req, notify);
      memset(resp, 0, sizes.seccomp_notif_resp);
      resp->id = req->id;
      resp->flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
      ioctl(notify, SECCOMP_IOCTL_NOTIF_SEND, resp);
    } else if (r > 0 && (p.revents & (POLLHUP | POLLERR))) {
      if (root_done) break; /* no process holds the filter any more */
    }
  }
  print_counts("seccomp-notify", now_s() - t0);
  return (int)C.root_status;
}
