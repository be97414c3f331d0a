/* sandbox/jail/sbx_session: sessions and batches (sbx.h): the evaluations of
 * one transcript, in order, on one image. Each evaluation goes through
 * sbx_eval (its own slot wait, child, deadline and outcome), so outcomes,
 * budgets and state are those of an evaluation alone and a limit or crash
 * in one cannot touch the next. Shared structures: sbx_int.h. */
#include "sandbox/jail/sbx_int.h"

#include <stdlib.h>
#include <string.h>

struct sbx_session {
    sbx_pool *pool;   /* borrowed */
    sbx_image *image; /* borrowed; may be NULL */
};

sbx_session *sbx_session_open(sbx_pool *pool, sbx_image *image)
{
    sbx_session *s = calloc(1, sizeof *s);
    if (s == NULL) return NULL;
    s->pool = pool;
    s->image = image;
    return s;
}

void sbx_session_eval(sbx_session *s, const sbx_request *req, sbx_outcome *out)
{
    sbx_request r = *req;
    r.image = s->image;
    sbx_eval(s->pool, &r, out);
}

void sbx_session_close(sbx_session *s)
{
    free(s);
}

void sbx_eval_batch(sbx_pool *pool, sbx_image *image, const sbx_request *reqs, size_t n,
                    sbx_outcome *outs)
{
    sbx_session s = {pool, image};
    for (size_t i = 0; i < n; i++)
        sbx_session_eval(&s, &reqs[i], &outs[i]);
}
