/* common/secret: see secret.h. */
#include "common/secret.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

struct secret {
    size_t len;
    char bytes[];
};

static secret *make(const char *v, size_t len)
{
    while (len > 0 &&
           (v[len - 1] == '\n' || v[len - 1] == '\r' || v[len - 1] == ' ' || v[len - 1] == '\t'))
        len--;
    if (len == 0) return NULL;
    secret *s = malloc(sizeof *s + len + 1);
    if (s == NULL) return NULL;
    s->len = len;
    memcpy(s->bytes, v, len);
    s->bytes[len] = '\0';
    return s;
}

secret *secret_from_str(const char *value)
{
    return value ? make(value, strlen(value)) : NULL;
}

secret *secret_from_file(const char *path, fps_err *err)
{
    char buf[4097];
    secret *s = NULL;
    FILE *f = fopen(path, "re");
    if (f == NULL) {
        fps_err_set(err, SECRET_EIO, 0, "cannot_read", "cannot read secret file %s: %s", path,
                    strerror(errno));
        return NULL;
    }
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    if (n > 4096) {
        fps_err_set(err, SECRET_EINVALID, 0, "invalid_secret",
                    "secret file %s is larger than 4096 bytes", path);
        goto done;
    }
    s = make(buf, n);
    if (s == NULL)
        fps_err_set(err, SECRET_EINVALID, 0, "invalid_secret", "secret file %s is empty", path);
done:
    explicit_bzero(buf, sizeof buf);
    return s;
}

const char *secret_expose(const secret *s)
{
    return s ? s->bytes : NULL;
}

size_t secret_len(const secret *s)
{
    return s ? s->len : 0;
}

int secret_equals(const secret *s, const char *candidate, size_t len)
{
    if (s == NULL || candidate == NULL) return 0;
    /* Compare over the secret's length whatever the candidate's, so timing
     * reveals neither the bytes nor where they first differ. */
    unsigned char diff = (unsigned char)(len != s->len);
    for (size_t i = 0; i < s->len; i++) {
        unsigned char c = i < len ? (unsigned char)candidate[i] : 0;
        diff |= (unsigned char)(c ^ (unsigned char)s->bytes[i]);
    }
    return diff == 0;
}

void secret_free(secret *s)
{
    if (s == NULL) return;
    explicit_bzero(s->bytes, s->len);
    free(s);
}

int secret_random_hex(char *out, size_t nbytes)
{
    static const char hex[] = "0123456789abcdef";
    unsigned char raw[64];
    if (nbytes == 0 || nbytes > sizeof raw) return -1;
    size_t got = 0;
    while (got < nbytes) {
        ssize_t n = getrandom(raw + got, nbytes - got, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return -1;
        got += (size_t)n;
    }
    for (size_t i = 0; i < nbytes; i++) {
        out[2 * i] = hex[raw[i] >> 4];
        out[2 * i + 1] = hex[raw[i] & 15];
    }
    out[2 * nbytes] = '\0';
    explicit_bzero(raw, sizeof raw);
    return 0;
}

secret *secret_load_or_create(const char *path, int *created, fps_err *err)
{
    char value[66];
    *created = 0;
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0 && errno != EEXIST) {
        fps_err_set(err, SECRET_EIO, 0, "cannot_write", "cannot create secret file %s: %s", path,
                    strerror(errno));
        return NULL;
    }
    if (fd >= 0) {
        int ok = secret_random_hex(value, 32) == 0;
        value[64] = '\n';
        ok = ok && write(fd, value, 65) == 65;
        ok = fsync(fd) == 0 && ok;
        close(fd);
        explicit_bzero(value, sizeof value);
        if (!ok) {
            unlink(path);
            fps_err_set(err, SECRET_EIO, 0, "cannot_write", "cannot write secret file %s", path);
            return NULL;
        }
        *created = 1;
    }
    return secret_from_file(path, err);
}
