/* tests/unit/tmpdir: the directory a unit test program makes its files in:
 * g_dir, made fresh under /tmp by the cmocka group setup setup_dir
 * ("/tmp/fps-test-<TMPDIR_NAME>-XXXXXX", mode TMPDIR_MODE, 0700 unless the
 * including file defines it first) and removed with everything below it by
 * the group teardown teardown_dir, read-only directories a test left
 * behind included. g_seq numbers the files a test names in it. Included by
 * one test program each (its definitions are static). */
#ifndef FPS_TEST_TMPDIR_H
#define FPS_TEST_TMPDIR_H
#include <ftw.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef TMPDIR_NAME
#error "define TMPDIR_NAME before including tmpdir.h"
#endif
#ifndef TMPDIR_MODE
#define TMPDIR_MODE 0700
#endif

static char g_dir[256];
static int g_seq;

static int setup_dir(void **state)
{
    (void)state;
    snprintf(g_dir, sizeof g_dir, "/tmp/fps-test-" TMPDIR_NAME "-XXXXXX");
    if (!mkdtemp(g_dir)) return -1;
    return chmod(g_dir, TMPDIR_MODE);
}

/* nftw visitors: directories writable first (pre-order), then everything
 * removed bottom-up */
static int tmpdir_writable(const char *path, const struct stat *sb, int type, struct FTW *f)
{
    (void)f;
    if (type == FTW_D) chmod(path, (sb->st_mode & 07777) | S_IRWXU);
    return 0;
}

static int tmpdir_remove(const char *path, const struct stat *sb, int type, struct FTW *f)
{
    (void)sb;
    (void)f;
    return (type == FTW_DP ? rmdir(path) : unlink(path)) == 0 ? 0 : -1;
}

static int teardown_dir(void **state)
{
    (void)state;
    nftw(g_dir, tmpdir_writable, 16, FTW_PHYS);
    return nftw(g_dir, tmpdir_remove, 16, FTW_DEPTH | FTW_PHYS);
}

#endif
