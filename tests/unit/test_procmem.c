/* Unit tests for common/procmem: a child's touched memory and a memfd held
 * by two processes of the tree (counted once) show in the tree's sample. */
#include "common/procmem.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define MIB ((uint64_t)1 << 20)

static void test_tree_counts_child_and_memfd_once(void **state)
{
    (void)state;
    procmem_sample before, after;
    assert_int_equal(procmem_tree(getpid(), &before), 0);
    assert_true(before.processes >= 1);
    assert_true(before.rss > 0);
    int mfd = memfd_create("procmem-test", MFD_CLOEXEC);
    assert_true(mfd >= 0);
    char *blk = calloc(1, 1 << 20);
    assert_non_null(blk);
    memset(blk, 1, 1 << 20);
    for (int i = 0; i < 16; i++) /* 16 MiB written, never mapped */
        assert_int_equal(write(mfd, blk, 1 << 20), 1 << 20);
    int go[2];
    assert_int_equal(pipe(go), 0);
    pid_t kid = fork();
    assert_true(kid >= 0);
    if (kid == 0) { /* holds the memfd too, and 48 MiB of its own */
        char *m = malloc(48 << 20);
        memset(m, 2, 48 << 20);
        char c = 0;
        if (write(go[1], &c, 1) != 1) _exit(1);
        pause();
        _exit(0);
    }
    char c;
    assert_int_equal(read(go[0], &c, 1), 1);
    assert_int_equal(procmem_tree(getpid(), &after), 0);
    kill(kid, SIGKILL);
    waitpid(kid, NULL, 0);
    assert_true(after.processes >= before.processes + 1);
    assert_true(after.rss >= before.rss + 48 * MIB);
    /* one memfd of 16 MiB, held by both: counted once */
    assert_true(after.memfd >= before.memfd + 16 * MIB);
    assert_true(after.memfd < before.memfd + 24 * MIB);
    close(mfd);
    free(blk);
    assert_int_equal(procmem_tree(999999999, &after), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_tree_counts_child_and_memfd_once)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
