/* sandbox/jail/jail_zygote: the sandbox zygote (see jail.h for why it exists and
 * what it may hold). A fresh exec of the child image with --zygote: it enters
 * the optional namespaces, prepares the seccomp program once, jails itself
 * as far as forking allows (no capabilities, no_new_privs, no core files, no
 * file writes, 16 descriptors),
 * says HELLO, then answers each FORK message with one single-use child
 * cloned with CLONE_PARENT, so the child belongs to the sidecar, which waits
 * for it and kills it. Single-threaded; never evaluates anything. Exits when
 * the parent closes the control socket. */
#include "sandbox/jail/jail.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The zygote's own descriptor limit: fds 0-2 plus a child's two channels
 * while it forks. */
#define ZYGOTE_NOFILE 16

static int send_msg(uint32_t op, int32_t pid, int32_t value, const jail_layers *l)
{
    jail_zygote_msg m;
    memset(&m, 0, sizeof m);
    m.magic = JAIL_ZYG_MAGIC;
    m.op = op;
    m.pid = pid;
    m.value = value;
    if (l != NULL) {
        m.user_ns = (uint32_t)l->user_ns;
        m.net_ns = (uint32_t)l->net_ns;
        m.bounding = (uint32_t)l->bounding;
    }
    ssize_t n;
    do
        n = send(0, &m, sizeof m, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    return n == (ssize_t)sizeof m ? 0 : -1;
}

/* Receives one FORK message with its two fds. 0 = ok, 1 = the parent hung
 * up, -1 = a malformed message (its fds, if any, are closed). */
static int recv_fork(int fds[2])
{
    jail_zygote_msg m;
    int nfds;
    fds[0] = fds[1] = -1;
    ssize_t n = jail_recv_fds(0, &m, sizeof m, fds, 2, &nfds);
    if (n == 0 || (n < 0 && errno != EMSGSIZE)) return 1;
    if (n != (ssize_t)sizeof m || m.magic != JAIL_ZYG_MAGIC || m.op != JAIL_ZYG_FORK || nfds != 2) {
        for (int i = 0; i < nfds; i++)
            close(fds[i]);
        fds[0] = fds[1] = -1;
        return -1;
    }
    return 0;
}

/* In the new child: move the two channels to fds 0 and 1, close everything
 * else (the zygote's control socket included), jail, serve. */
__attribute__((noreturn)) static void become_child(const jail_opts *o, const jail_prepared *p,
                                                   jail_layers got, int fds[2])
{
    /* Its own process group, so that the parent's kill of the group would
     * also end anything it forked, were its jail broken (the parent kills
     * the pid too, for the moment before this call). */
    (void)setpgid(0, 0);
    if (dup2(fds[0], 0) != 0 || dup2(fds[1], 1) != 1) _exit(JAIL_EXIT_SETUP);
    if (close_range(3, ~0U, 0) != 0) {
        /* Kernels before 5.9: the zygote keeps RLIMIT_NOFILE at
         * ZYGOTE_NOFILE, so this is a short loop. */
        for (int fd = 3; fd < ZYGOTE_NOFILE; fd++)
            close(fd);
    }
    jail_enter(o, p, &got);
    jail_serve(o, p);
}

int jail_zygote_main(const jail_opts *o)
{
    jail_layers got;
    memset(&got, 0, sizeof got);
    /* Nothing here needs a capability once the namespaces exist: the
     * children it forks inherit no root, no capability, no bounding set. */
    if (jail_ns_enter(o->userns, o->netns, &got) != 0 || jail_drop_caps(&got.bounding) != 0) {
        send_msg(JAIL_ZYG_HELLO, getpid(), errno ? -errno : -EPERM, &got);
        return JAIL_EXIT_SETUP;
    }
    jail_prepared prep;
    if (jail_prepare(&prep) != 0) {
        send_msg(JAIL_ZYG_HELLO, getpid(), errno ? -errno : -EINVAL, &got);
        return JAIL_EXIT_SETUP;
    }
    /* The zygote's own bounds: it forks, so no seccomp or RLIMIT_NPROC here
     * (each child installs those), but nothing it does may write a file or
     * gain privileges. */
    struct rlimit zero = {0, 0}, nofile = {ZYGOTE_NOFILE, ZYGOTE_NOFILE};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || setrlimit(RLIMIT_FSIZE, &zero) != 0 ||
        setrlimit(RLIMIT_CORE, &zero) != 0 || setrlimit(RLIMIT_NOFILE, &nofile) != 0) {
        send_msg(JAIL_ZYG_HELLO, getpid(), errno ? -errno : -EINVAL, &got);
        return JAIL_EXIT_SETUP;
    }
    if (send_msg(JAIL_ZYG_HELLO, getpid(), 0, &got) != 0) return 0;
    for (;;) {
        int fds[2];
        int r = recv_fork(fds);
        if (r == 1) return 0;
        if (r < 0) {
            if (send_msg(JAIL_ZYG_FORKED, 0, -EPROTO, NULL) != 0) return 0;
            continue;
        }
        /* A raw clone: glibc's fork() cannot set CLONE_PARENT. The child
         * continues on a copy of this stack, like fork. */
        long pid =
            syscall(SYS_clone, (unsigned long)(CLONE_PARENT | SIGCHLD), NULL, NULL, NULL, NULL);
        if (pid == 0) become_child(o, &prep, got, fds);
        int e = errno;
        close(fds[0]);
        close(fds[1]);
        if (send_msg(JAIL_ZYG_FORKED, pid > 0 ? (int32_t)pid : 0, pid > 0 ? 0 : -e, NULL) != 0)
            return 0;
    }
}
