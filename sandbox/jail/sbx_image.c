/* sandbox/jail/sbx_image: session images: the simg bytes in a sealed memfd, which a child maps
 * read-only (sbx.h). Shared
 * structures and threading: sbx_int.h. */
#include "sandbox/jail/sbx_int.h"

#include "sandbox/lang/simg.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <stdlib.h>
#include <unistd.h>

/* ---- images ---- */

/* Bytes of a session image written into its memfd at a time. */
#define IMAGE_STEP ((size_t)4 << 20)

sbx_image *sbx_image_new(const char *json, size_t len, const char *assignment_id, unsigned flags,
                         fps_err *e)
{
    void *buf = NULL;
    size_t blen = 0;
    if (simg_build_text(json, len, assignment_id, flags, &buf, &blen, e) != 0) return NULL;
    return sbx_image_adopt(buf, blen, e);
}

sbx_image *sbx_image_adopt(void *simg, size_t len, fps_err *e)
{
    sbx_image *img = NULL;
    int fd = -1;
    if (simg == NULL || len == 0) {
        fps_err_set(e, SIMG_EINVALID, 0, "invalid_transcript", "session image is empty");
        goto fail;
    }
    fd = memfd_create("fps-session-image", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) {
        fps_err_set(e, SBX_JAIL_FAILURE, 0, "sandbox_error", "memfd_create: %s", strerror(errno));
        goto fail;
    }
    /* Copied in steps, each step's pages of the heap copy given back once
     * written (the copy is freed below whatever happens): the image is
     * resident about once while it moves into the memfd, not twice. */
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), at = (uintptr_t)simg;
    uintptr_t released = (at + page - 1) & ~(page - 1);
    for (size_t off = 0; off < len;) {
        size_t step = len - off < IMAGE_STEP ? len - off : IMAGE_STEP;
        ssize_t n = write(fd, (char *)simg + off, step);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            fps_err_set(e, SBX_JAIL_FAILURE, 0, "sandbox_error", "writing the session image: %s",
                        strerror(errno));
            goto fail;
        }
        off += (size_t)n;
        uintptr_t upto = (at + off) & ~(page - 1);
        if (upto > released) {
            // NOLINTNEXTLINE(performance-no-int-to-ptr): page arithmetic on our own copy
            (void)madvise((void *)released, upto - released, MADV_DONTNEED);
            released = upto;
        }
    }
    if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) != 0) {
        fps_err_set(e, SBX_JAIL_FAILURE, 0, "sandbox_error", "sealing the session image: %s",
                    strerror(errno));
        goto fail;
    }
    img = calloc(1, sizeof *img);
    if (img == NULL) {
        fps_err_set(e, SIMG_ETOO_LARGE, 0, "too_large", "out of memory");
        goto fail;
    }
    img->fd = fd;
    img->len = len;
    atomic_init(&img->refs, 1);
    free(simg);
    return img;
fail:
    if (fd >= 0) close(fd);
    free(simg);
    return NULL;
}

sbx_image *sbx_image_ref(sbx_image *img)
{
    if (img != NULL) atomic_fetch_add(&img->refs, 1);
    return img;
}

size_t sbx_image_len(const sbx_image *img)
{
    return img->len;
}

void sbx_image_release(sbx_image *img)
{
    if (img == NULL || atomic_fetch_sub(&img->refs, 1) != 1) return;
    close(img->fd);
    free(img);
}
