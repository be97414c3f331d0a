/* sandbox/jail/sbx_io: talking to a child: the request hand-off (header, image fd, source)
 * and the bounded read-back of its outcome. Shared
 * structures and threading: sbx_int.h. */
#include "sandbox/jail/sbx_int.h"

#include <errno.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <stdlib.h>
#include <unistd.h>

/* ---- reading a child's output ---- */

/* Reads the child's outcome until EOF, the deadline, cancellation or more
 * than JAIL_MAX_OUTCOME bytes in all, appending at *buf + *len; with `line`, also stops (RD_LINE)
 * as soon as what was read ends in a newline (the child writes its outcome line in one write, then
 * exits: no need to wait for that). *buf (owned, *cap bytes, at least OUTCOME_BUF_MIN) grows as
 * it fills, to JAIL_MAX_OUTCOME + 1 bytes at most: an outcome is usually a few hundred bytes,
 * and a 1 MiB block per evaluation made malloc grow and trim the heap every time. */
read_end sbx_read_outcome(int fd, char **buf, size_t *cap, size_t *len, double deadline,
                          atomic_int *cancel, int line, sbx_run *watch)
{
    int tick = cancel != NULL || sbx_watched(watch);
    for (;;) {
        if (cancel != NULL && atomic_load(cancel)) return RD_CANCEL;
        if (sbx_watch_stop(watch)) return RD_STOP;
        double left = deadline - now_ms();
        if (left <= 0) return RD_DEADLINE;
        int wait = left > CANCEL_TICK_MS && tick ? CANCEL_TICK_MS : (int)ceil(left);
        struct pollfd p = {fd, POLLIN, 0};
        int r = poll(&p, 1, wait);
        if (r < 0 && errno != EINTR) return RD_ERROR;
        if (r <= 0) continue;
        if (*len == *cap) {
            size_t ncap = *cap * 2 < JAIL_MAX_OUTCOME + 1 ? *cap * 2 : JAIL_MAX_OUTCOME + 1;
            char *nb = realloc(*buf, ncap);
            if (nb == NULL) return RD_ERROR;
            *buf = nb;
            *cap = ncap;
        }
        ssize_t n = read(fd, *buf + *len, *cap - *len);
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN) continue;
            return RD_ERROR;
        }
        if (n == 0) return RD_EOF;
        *len += (size_t)n;
        if (*len > JAIL_MAX_OUTCOME) return RD_OVERFLOW;
        if (line && (*buf)[*len - 1] == '\n') return RD_LINE;
    }
}

/* Sends the request (header + image fd, source, key) to a child, in one
 * sendmsg when it fits the socket buffer, bounded by the deadline. Returns
 * 0, -1 on a dead child (EPIPE etc.), -2 deadline, -3 cancelled. */
int sbx_send_request(child_t *c, const jail_request *hdr, int img_fd, const char *src,
                     const char *key, double deadline, atomic_int *cancel)
{
    struct iovec iov[3] = {{(void *)hdr, sizeof *hdr},
                           {(void *)src, (size_t)hdr->source_len},
                           {(void *)key, hdr->key_len}};
    /* The first call always carries at least the header (the socket buffer
     * is empty); whatever did not fit follows as the child reads. */
    ssize_t n = jail_send_fds(c->sock, iov, 3, &img_fd, img_fd >= 0 ? 1 : 0, MSG_DONTWAIT);
    if (n < (ssize_t)sizeof *hdr) return -1;
    size_t sent = (size_t)n - sizeof *hdr;
    for (int i = 1; i < 3; i++) {
        size_t off = sent < iov[i].iov_len ? sent : iov[i].iov_len;
        sent -= off;
        while (off < iov[i].iov_len) {
            n = send(c->sock, (const char *)iov[i].iov_base + off, iov[i].iov_len - off,
                     MSG_NOSIGNAL | MSG_DONTWAIT);
            if (n > 0) {
                off += (size_t)n;
                continue;
            }
            if (n < 0 && errno == EINTR) continue;
            if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) return -1;
            if (cancel != NULL && atomic_load(cancel)) return -3;
            double left = deadline - now_ms();
            if (left <= 0) return -2;
            struct pollfd p = {c->sock, POLLOUT, 0};
            (void)poll(&p, 1, left > CANCEL_TICK_MS ? CANCEL_TICK_MS : (int)ceil(left));
        }
    }
    return 0;
}
