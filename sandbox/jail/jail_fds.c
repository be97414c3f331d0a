/* sandbox/jail/jail_fds: descriptor passing over unix sockets (SCM_RIGHTS), the
 * one place that builds and reads the control messages for the jail's three
 * hand-offs: the parent's request to a child (the session image), the
 * parent's FORK message to the zygote (a child's two channels) and their
 * receiving ends. */
#include "sandbox/jail/jail.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

ssize_t jail_send_fds(int sock, const struct iovec *iov, int iovcnt, const int *fds, int nfds,
                      int flags)
{
    union {
        struct cmsghdr h;
        char buf[CMSG_SPACE(JAIL_MAX_PASSED_FDS * sizeof(int))];
    } ctl;
    struct msghdr msg;
    memset(&msg, 0, sizeof msg);
    memset(&ctl, 0, sizeof ctl);
    msg.msg_iov = (struct iovec *)iov;
    msg.msg_iovlen = (size_t)iovcnt;
    if (nfds > JAIL_MAX_PASSED_FDS) {
        errno = EINVAL;
        return -1;
    }
    if (nfds > 0) {
        msg.msg_control = ctl.buf;
        msg.msg_controllen = CMSG_SPACE((size_t)nfds * sizeof(int));
        struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN((size_t)nfds * sizeof(int));
        memcpy(CMSG_DATA(cm), fds, (size_t)nfds * sizeof(int));
    }
    ssize_t n;
    do
        n = sendmsg(sock, &msg, flags | MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    return n;
}

ssize_t jail_recv_fds(int sock, void *buf, size_t len, int *fds, int maxfds, int *nfds)
{
    union {
        struct cmsghdr h;
        char buf[CMSG_SPACE(JAIL_MAX_PASSED_FDS * sizeof(int))];
    } ctl;
    struct iovec iov = {buf, len};
    struct msghdr msg;
    memset(&msg, 0, sizeof msg);
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = ctl.buf;
    msg.msg_controllen = sizeof ctl.buf;
    *nfds = 0;
    ssize_t n;
    do
        n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
    while (n < 0 && errno == EINTR);
    if (n < 0) return -1;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c != NULL; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
        size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < k; i++) {
            int fd;
            memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
            if (*nfds < maxfds)
                fds[(*nfds)++] = fd;
            else
                close(fd);
        }
    }
    if (msg.msg_flags & (MSG_CTRUNC | MSG_TRUNC)) {
        for (int i = 0; i < *nfds; i++)
            close(fds[i]);
        *nfds = 0;
        errno = EMSGSIZE;
        return -1;
    }
    return n;
}
