/* sandbox/jail/jail_ns: the optional namespace layer and the capability drop of
 * a sandbox child (called by jail_child.c before rlimits and seccomp).
 * Unprivileged user + network namespaces isolate the child further where the
 * kernel allows them; they are never required. */
#include "sandbox/jail/jail.h"

#include <linux/capability.h>
#include <sched.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

int jail_ns_enter(int want_user, int want_net, int *got_user, int *got_net)
{
    *got_user = 0;
    *got_net = 0;
    if (want_user && unshare(CLONE_NEWUSER) == 0) *got_user = 1;
    /* A network namespace needs CAP_SYS_ADMIN, which the new user namespace
     * grants (or the caller already has). No interfaces but a down loopback. */
    if (want_net && unshare(CLONE_NEWNET) == 0) *got_net = 1;
    return 0;
}

int jail_drop_caps(void)
{
    struct __user_cap_header_struct hdr;
    struct __user_cap_data_struct data[2];
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
