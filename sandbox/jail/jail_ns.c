/* sandbox/jail/jail_ns: the identity layers of a sandbox child (called by
 * jail_child.c and jail_zygote.c before rlimits and seccomp): off root, into
 * optional namespaces, and out of every capability.
 *
 * Started by root, a child first gives up root for good: the capability
 * bounding set is emptied while root still holds CAP_SETPCAP, then groups,
 * gid and uid all become 65534 (nobody). Unprivileged user + network
 * namespaces then isolate it further where the kernel allows them; they are
 * never required. A new user namespace hands its creator a full capability
 * set inside it, so the bounding set is emptied again there before the
 * effective, permitted, inheritable and ambient sets are cleared. Where no
 * user namespace is possible and the sidecar is not root, the bounding set
 * cannot be touched (that needs CAP_SETPCAP): best effort, reported. */
#include "sandbox/jail/jail.h"

#include <grp.h>
#include <linux/capability.h>
#include <sched.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#define JAIL_NOBODY 65534

/* Empties the bounding set as far as this process may; 1 if it is empty. */
static int drop_bounding(void)
{
    int empty = 1;
    for (int c = 0; c < 64; c++) {
        int r = prctl(PR_CAPBSET_READ, c, 0, 0, 0);
        if (r < 0) break; /* past the kernel's last capability */
        if (r == 1 && prctl(PR_CAPBSET_DROP, c, 0, 0, 0) != 0) empty = 0;
    }
    return empty;
}

/* Root gives up root: bounding set, groups, gid, uid. 0, or -1 (fail closed). */
static int drop_root(void)
{
    uid_t r, e, s;
    if (getresuid(&r, &e, &s) != 0) return -1;
    if (r != 0 && e != 0 && s != 0) return 0;
    (void)drop_bounding();
    if (setgroups(0, NULL) != 0 || setresgid(JAIL_NOBODY, JAIL_NOBODY, JAIL_NOBODY) != 0 ||
        setresuid(JAIL_NOBODY, JAIL_NOBODY, JAIL_NOBODY) != 0)
        return -1;
    gid_t gr, ge, gs;
    if (getresuid(&r, &e, &s) != 0 || getresgid(&gr, &ge, &gs) != 0 || r != JAIL_NOBODY ||
        e != JAIL_NOBODY || s != JAIL_NOBODY || gr != JAIL_NOBODY || ge != JAIL_NOBODY ||
        gs != JAIL_NOBODY || getgroups(0, NULL) != 0)
        return -1;
    return 0;
}

int jail_ns_enter(int want_user, int want_net, jail_layers *got)
{
    got->user_ns = 0;
    got->net_ns = 0;
    if (drop_root() != 0) return -1;
    got->unprivileged = 1;
    if (want_user && unshare(CLONE_NEWUSER) == 0) got->user_ns = 1;
    /* A network namespace needs CAP_SYS_ADMIN, which the new user namespace
     * grants (or the caller already has). No interfaces but a down loopback. */
    if (want_net && unshare(CLONE_NEWNET) == 0) got->net_ns = 1;
    return 0;
}

int jail_drop_caps(int *bounding_empty)
{
    struct __user_cap_header_struct hdr;
    struct __user_cap_data_struct data[2];
    int empty = drop_bounding(); /* first: it needs CAP_SETPCAP */
    if (bounding_empty) *bounding_empty = empty;
    (void)prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
    memset(&hdr, 0, sizeof hdr);
    memset(data, 0, sizeof data);
    hdr.version = _LINUX_CAPABILITY_VERSION_3;
    hdr.pid = 0;
    if (syscall(SYS_capset, &hdr, data) != 0) return -1;
    /* Verify: nothing effective or permitted is left. */
    memset(data, 0xff, sizeof data);
    if (syscall(SYS_capget, &hdr, data) != 0) return -1;
    for (int i = 0; i < 2; i++)
        if (data[i].effective || data[i].permitted || data[i].inheritable) return -1;
    return 0;
}
