/* common/rcbuf: see rcbuf.h. */
#include "common/rcbuf.h"

#include <stdatomic.h>
#include <stdlib.h>

struct rcbuf {
    atomic_int refs;
    size_t len;
    char *data; /* owned */
};

rcbuf *rcbuf_take(char *data, size_t len)
{
    if (data == NULL) return NULL;
    rcbuf *b = malloc(sizeof *b);
    if (b == NULL) {
        free(data);
        return NULL;
    }
    atomic_init(&b->refs, 1);
    b->len = len;
    b->data = data;
    return b;
}

rcbuf *rcbuf_ref(rcbuf *b)
{
    if (b != NULL) atomic_fetch_add(&b->refs, 1);
    return b;
}

void rcbuf_release(rcbuf *b)
{
    if (b == NULL || atomic_fetch_sub(&b->refs, 1) != 1) return;
    free(b->data);
    free(b);
}

const char *rcbuf_data(const rcbuf *b)
{
    return b->data;
}

size_t rcbuf_len(const rcbuf *b)
{
    return b->len;
}
