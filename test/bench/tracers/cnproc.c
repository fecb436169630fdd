/*
 * The kernel's proc connector (netlink NETLINK_CONNECTOR, CN_IDX_PROC): fork, exec and exit events
 * of every process on the machine arrive as datagrams after the fact; the command's tree is followed
 * from its fork events, and at each exec event its argv (/proc/<pid>/cmdline) and image
 * (/proc/<pid>/exe) are read -- by then the program is already running, and may have exec'd again
 * or ended. Exit events carry the status. A full socket buffer drops events (ENOBUFS, counted).
 *
 * usage: cnproc CMD ARGS...
 */
#include "common.h"
#include <linux/cn_proc.h>
#include <linux/connector.h>
#include <linux/netlink.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>

#define MAX_PID (1 << 22)
static unsigned char *in_tree;
static long tree_size, lost;

static int listen_proc(int sock, enum proc_cn_mcast_op op) {
  char buf[NLMSG_SPACE(sizeof(struct cn_msg) + sizeof op)] = {0};
  struct nlmsghdr *nl = (struct nlmsghdr *)buf;
  struct cn_msg *cn = NLMSG_DATA(nl);
  nl->nlmsg_len = sizeof buf;
  nl->nlmsg_type = NLMSG_DONE;
  nl->nlmsg_pid = getpid();
  cn->id.idx = CN_IDX_PROC;
  cn->id.val = CN_VAL_PROC;
  cn->len = sizeof op;
  memcpy(cn->data, &op, sizeof op);
  return send(sock, buf, sizeof buf, 0) == (ssize_t)sizeof buf ? 0 : -1;
}

int main(int argc, char **argv) {
  if (argc < 2) return 2;
  double t0 = now_s();
  in_tree = calloc(MAX_PID, 1);
  int sock = socket(PF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_CONNECTOR);
  if (sock < 0) {
    perror("socket(NETLINK_CONNECTOR)");
    return 3;
  }
  int rcv = 32 << 20;
  setsockopt(sock, SOL_SOCKET, SO_RCVBUFFORCE, &rcv, sizeof rcv);
  struct sockaddr_nl addr = {.nl_family = AF_NETLINK, .nl_groups = CN_IDX_PROC, .nl_pid = getpid()};
  if (bind(sock, (struct sockaddr *)&addr, sizeof addr) != 0 || listen_proc(sock, PROC_CN_MCAST_LISTEN) != 0) {
    perror("proc connector");
    return 3;
  }
  int gate[2];
  if (pipe(gate) != 0) return 3;
  pid_t root = fork();
  if (root == 0) {
    char c;
    close(gate[1]);
    if (read(gate[0], &c, 1) < 0) _exit(126); /* started once the listener follows it */
    execvp(argv[1], argv + 1);
    _exit(127);
  }
  in_tree[root] = 1;
  tree_size = 1;
  close(gate[0]);
  close(gate[1]);
  char buf[64 * 1024] __attribute__((aligned(NLMSG_ALIGNTO)));
  int root_reaped = 0;
  while (tree_size > 0) {
    ssize_t n = recv(sock, buf, sizeof buf, 0);
    if (n < 0) {
      if (errno == ENOBUFS) {
        lost++;
        continue;
      }
      if (errno == EINTR) continue;
      break;
    }
    for (struct nlmsghdr *nl = (struct nlmsghdr *)buf; NLMSG_OK(nl, n); nl = NLMSG_NEXT(nl, n)) {
      struct proc_event *ev = (struct proc_event *)((struct cn_msg *)NLMSG_DATA(nl))->data;
      if (ev->what == PROC_EVENT_FORK) {
        int parent = ev->event_data.fork.parent_tgid, child = ev->event_data.fork.child_pid;
        if (parent < MAX_PID && in_tree[parent] && child == ev->event_data.fork.child_tgid && child < MAX_PID) {
          C.forks++;
          in_tree[child] = 1;
          tree_size++;
        }
      } else if (ev->what == PROC_EVENT_EXEC) {
        int pid = ev->event_data.exec.process_tgid;
        if (pid < MAX_PID && in_tree[pid]) {
          C.execs++;
          read_cmdline(pid);
          read_exe(pid);
        }
      } else if (ev->what == PROC_EVENT_EXIT) {
        int pid = ev->event_data.exit.process_pid;
        if (pid == ev->event_data.exit.process_tgid && pid < MAX_PID && in_tree[pid]) {
          C.exits++;
          C.exit_status++;
          in_tree[pid] = 0;
          tree_size--;
          if (pid == root) {
            int st;
            waitpid(root, &st, 0);
            root_reaped = 1;
            C.root_status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
          }
        }
      }
    }
  }
  if (!root_reaped) waitpid(root, NULL, 0);
  listen_proc(sock, PROC_CN_MCAST_IGNORE);
  if (lost) fprintf(stderr, "cnproc: %ld overruns (events lost)\n", lost);
  print_counts("cnproc", now_s() - t0);
  return (int)C.root_status;
}
