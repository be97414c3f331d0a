/* common/secret: see secret.h. */
#include "common/secret.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

/* One value: immutable once published. */
typedef struct value {
    size_t len;
    char bytes[];
} value;

/* Values replaced by a rotation stay readable (a reader may hold a view
 * taken just before) until this many newer rotations have passed; a view
 * lives for the few microseconds of one header or comparison. */
#define RETIRED_KEPT 8

struct secret {
    _Atomic(value *) cur;
    pthread_mutex_t mu; /* guards retired, and serializes rotations */
    value *retired[RETIRED_KEPT];
    unsigned nretired;
};

static void value_free(value *v)
{
    if (v == NULL) return;
    explicit_bzero(v->bytes, v->len);
    free(v);
}

/* `v` trimmed of trailing whitespace/newlines, or NULL if that leaves nothing. */
static value *value_make(const char *v, size_t len)
{
    while (len > 0 &&
           (v[len - 1] == '\n' || v[len - 1] == '\r' || v[len - 1] == ' ' || v[len - 1] == '\t'))
        len--;
    if (len == 0) return NULL;
    value *x = malloc(sizeof *x + len + 1);
    if (x == NULL) return NULL;
    x->len = len;
    memcpy(x->bytes, v, len);
    x->bytes[len] = '\0';
    return x;
}

static secret *make(const char *v, size_t len)
{
    value *x = value_make(v, len);
    if (x == NULL) return NULL;
    secret *s = calloc(1, sizeof *s);
    if (s == NULL) {
        value_free(x);
        return NULL;
    }
    pthread_mutex_init(&s->mu, NULL);
    atomic_store(&s->cur, x);
    return s;
}

/* Reads a secret file into buf (4097 bytes); its length, or -1 with err. */
static long read_secret_file(const char *path, char *buf, fps_err *err)
{
    FILE *f = fopen(path, "re");
    if (f == NULL) {
        fps_err_set(err, SECRET_EIO, 0, "cannot_read", "cannot read secret file %s: %s", path,
                    strerror(errno));
        return -1;
    }
    size_t n = fread(buf, 1, 4097, f);
    fclose(f);
    if (n > 4096) {
        fps_err_set(err, SECRET_EINVALID, 0, "invalid_secret",
                    "secret file %s is larger than 4096 bytes", path);
        return -1;
    }
    return (long)n;
}

secret *secret_from_str(const char *value)
{
    return value ? make(value, strlen(value)) : NULL;
}

secret *secret_from_file(const char *path, fps_err *err)
{
    char buf[4097];
    secret *s = NULL;
    long n = read_secret_file(path, buf, err);
    if (n < 0) goto done;
    s = make(buf, (size_t)n);
    if (s == NULL)
        fps_err_set(err, SECRET_EINVALID, 0, "invalid_secret", "secret file %s is empty", path);
done:
    explicit_bzero(buf, sizeof buf);
    return s;
}

int secret_reload(secret *s, const char *path, fps_err *err)
{
    char buf[4097];
    int rc = -1;
    long n = read_secret_file(path, buf, err);
    if (n < 0) goto done;
    value *x = value_make(buf, (size_t)n);
    if (x == NULL) {
        fps_err_set(err, SECRET_EINVALID, 0, "invalid_secret", "secret file %s is empty", path);
        goto done;
    }
    pthread_mutex_lock(&s->mu);
    value *old = atomic_load(&s->cur);
    if (old->len == x->len && memcmp(old->bytes, x->bytes, x->len) == 0) {
        pthread_mutex_unlock(&s->mu);
        value_free(x);
        rc = 0;
        goto done;
    }
    atomic_store(&s->cur, x);
    unsigned slot = s->nretired++ % RETIRED_KEPT;
    value_free(s->retired[slot]); /* RETIRED_KEPT rotations old: no reader left */
    s->retired[slot] = old;
    pthread_mutex_unlock(&s->mu);
    rc = 1;
done:
    explicit_bzero(buf, sizeof buf);
    return rc;
}

const char *secret_view(const secret *s, size_t *len)
{
    if (s == NULL) {
        if (len) *len = 0;
        return NULL;
    }
    const value *x = atomic_load(&((secret *)s)->cur);
    if (len) *len = x->len;
    return x->bytes;
}

const char *secret_expose(const secret *s)
{
    return secret_view(s, NULL);
}

size_t secret_len(const secret *s)
{
    size_t len = 0;
    (void)secret_view(s, &len);
    return len;
}

int secret_equals(const secret *s, const char *candidate, size_t len)
{
    if (s == NULL || candidate == NULL) return 0;
    size_t slen;
    const char *bytes = secret_view(s, &slen);
    /* Compare over the secret's length whatever the candidate's, so timing
     * reveals neither the bytes nor where they first differ. */
    unsigned char diff = (unsigned char)(len != slen);
    for (size_t i = 0; i < slen; i++) {
        unsigned char c = i < len ? (unsigned char)candidate[i] : 0;
        diff |= (unsigned char)(c ^ (unsigned char)bytes[i]);
    }
    return diff == 0;
}

void secret_free(secret *s)
{
    if (s == NULL) return;
    value_free(atomic_load(&s->cur));
    for (unsigned i = 0; i < RETIRED_KEPT; i++)
        value_free(s->retired[i]);
    pthread_mutex_destroy(&s->mu);
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
