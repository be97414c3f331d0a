/* common/secret: see secret.h. */
#include "common/secret.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

secret *secret_from_file(const char *path, char *err, size_t errcap)
{
    char buf[4097];
    secret *s = NULL;
    FILE *f = fopen(path, "re");
    if (f == NULL) {
        snprintf(err, errcap, "cannot read secret file %s: %s", path, strerror(errno));
        return NULL;
    }
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    if (n > 4096) {
        snprintf(err, errcap, "secret file %s is larger than 4096 bytes", path);
        goto done;
    }
    s = make(buf, n);
    if (s == NULL) snprintf(err, errcap, "secret file %s is empty", path);
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
