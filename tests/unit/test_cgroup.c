/* Unit tests for common/cgroup: the limit files of v1 and v2 ("max",
 * unlimited, garbage), /proc/self/cgroup and mountinfo, and the limit found
 * in a fake tree (nested cgroups, a hybrid v1 + v2 host, no cgroup). */
#include "common/cgroup.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void test_limit_v2(void **state)
{
    (void)state;
    uint64_t b = 0;
    fps_err e;
    assert_int_equal(cgroup_parse_limit("536870912\n", 2, &b, &e), CGROUP_LIMIT);
    assert_true(b == 536870912u);
    assert_int_equal(cgroup_parse_limit("max\n", 2, &b, &e), CGROUP_NONE);
    assert_int_equal(cgroup_parse_limit("max", 2, &b, &e), CGROUP_NONE);
}

static void test_limit_v1(void **state)
{
    (void)state;
    uint64_t b = 0;
    fps_err e;
    assert_int_equal(cgroup_parse_limit("1073741824\n", 1, &b, &e), CGROUP_LIMIT);
    assert_true(b == 1073741824u);
    /* v1's "unlimited": LONG_MAX rounded to the page */
    assert_int_equal(cgroup_parse_limit("9223372036854771712\n", 1, &b, &e), CGROUP_NONE);
    /* "max" is v2's word only */
    assert_int_equal(cgroup_parse_limit("max\n", 1, &b, &e), CGROUP_EINVALID);
}

static void test_limit_garbage(void **state)
{
    (void)state;
    uint64_t b = 7;
    fps_err e;
    const char *bad[] = {"",      "\n",  "12k",     "-1",
                         "0x100", "1 2", "maximum", "99999999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(cgroup_parse_limit(bad[i], 2, &b, &e), CGROUP_EINVALID);
        assert_string_equal(e.name, "invalid_cgroup");
    }
    assert_true(b == 7); /* untouched */
}

static void test_self(void **state)
{
    (void)state;
    char p[256];
    fps_err e;
    assert_int_equal(cgroup_parse_self("0::/kubepods/pod1/c1\n", p, sizeof p, &e), 2);
    assert_string_equal(p, "/kubepods/pod1/c1");
    /* hybrid: the v1 memory controller wins */
    assert_int_equal(
        cgroup_parse_self("5:cpu,cpuacct:/a\n4:memory:/docker/x\n0::/\n", p, sizeof p, &e), 1);
    assert_string_equal(p, "/docker/x");
    assert_int_equal(cgroup_parse_self("5:cpu:/a\n", p, sizeof p, &e), 0);
    assert_int_equal(cgroup_parse_self("garbage\n", p, sizeof p, &e), CGROUP_EINVALID);
}

static const char MOUNTINFO[] =
    "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
    "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
    "35 31 0:32 /docker/x /sys/fs/cgroup/memory rw,relatime shared:9 - cgroup cgroup rw,memory\n"
    "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";

static void test_mountinfo(void **state)
{
    (void)state;
    char root[256], mnt[256];
    assert_int_equal(cgroup_parse_mountinfo(MOUNTINFO, 1, root, sizeof root, mnt, sizeof mnt), 1);
    assert_string_equal(root, "/docker/x");
    assert_string_equal(mnt, "/sys/fs/cgroup/memory");
    assert_int_equal(cgroup_parse_mountinfo(MOUNTINFO, 2, root, sizeof root, mnt, sizeof mnt), 1);
    assert_string_equal(mnt, "/sys/fs/cgroup/unified");
    assert_int_equal(cgroup_parse_mountinfo("1 2 3 / /x rw - ext4 /dev/sda rw\n", 2, root,
                                            sizeof root, mnt, sizeof mnt),
                     0);
}

static void put(const char *dir, const char *rel, const char *text)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    for (char *s = path + strlen(dir) + 1; (s = strchr(s, '/')) != NULL; s++) {
        *s = '\0';
        mkdir(path, 0700);
        *s = '/';
    }
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void rm_tree(const char *dir)
{
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

static void test_tree_v2_nested(void **state)
{
    (void)state;
    char dir[] = "/tmp/fps-cgroup-XXXXXX";
    assert_non_null(mkdtemp(dir));
    put(dir, "proc/self/cgroup", "0::/pod/c1\n");
    put(dir, "proc/self/mountinfo", "41 31 0:38 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n");
    put(dir, "sys/fs/cgroup/pod/c1/memory.max", "max\n");
    put(dir, "sys/fs/cgroup/pod/memory.max", "268435456\n"); /* the pod's limit binds */
    uint64_t b = 0;
    char src[256];
    fps_err e;
    assert_int_equal(cgroup_memory_limit(dir, &b, src, sizeof src, &e), CGROUP_LIMIT);
    assert_true(b == 268435456u);
    assert_string_equal(src, "/sys/fs/cgroup/pod/memory.max");
    put(dir, "sys/fs/cgroup/pod/c1/memory.max", "104857600\n");
    assert_int_equal(cgroup_memory_limit(dir, &b, src, sizeof src, &e), CGROUP_LIMIT);
    assert_true(b == 104857600u);
    put(dir, "sys/fs/cgroup/pod/c1/memory.max", "lots\n");
    assert_int_equal(cgroup_memory_limit(dir, &b, src, sizeof src, &e), CGROUP_EINVALID);
    rm_tree(dir);
}

static void test_tree_v1_namespaced(void **state)
{
    (void)state;
    char dir[] = "/tmp/fps-cgroup-XXXXXX";
    assert_non_null(mkdtemp(dir));
    /* the cgroup path lies outside the mount's root: the mount is ours */
    put(dir, "proc/self/cgroup", "4:memory:/elsewhere/y\n0::/\n");
    put(dir, "proc/self/mountinfo", MOUNTINFO);
    put(dir, "sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");
    uint64_t b = 0;
    fps_err e;
    assert_int_equal(cgroup_memory_limit(dir, &b, NULL, 0, &e), CGROUP_NONE);
    put(dir, "sys/fs/cgroup/memory/memory.limit_in_bytes", "2147483648\n");
    assert_int_equal(cgroup_memory_limit(dir, &b, NULL, 0, &e), CGROUP_LIMIT);
    assert_true(b == 2147483648u);
    rm_tree(dir);
}

static void test_tree_none(void **state)
{
    (void)state;
    char dir[] = "/tmp/fps-cgroup-XXXXXX";
    assert_non_null(mkdtemp(dir));
    uint64_t b = 0;
    fps_err e;
    assert_int_equal(cgroup_memory_limit(dir, &b, NULL, 0, &e), CGROUP_NONE);
    rm_tree(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_limit_v2),           cmocka_unit_test(test_limit_v1),
        cmocka_unit_test(test_limit_garbage),      cmocka_unit_test(test_self),
        cmocka_unit_test(test_mountinfo),          cmocka_unit_test(test_tree_v2_nested),
        cmocka_unit_test(test_tree_v1_namespaced), cmocka_unit_test(test_tree_none),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
