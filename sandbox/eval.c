/* sandbox/eval: tree-walking evaluator (eval.h). */
#include "sandbox/eval.h"

void eval_run(lang_kind kind, ast_node *root, const char *eval_key, const void *img,
              size_t img_len, const lang_limits *limits, strbuf *out)
{
    (void)kind; (void)root; (void)eval_key; (void)img; (void)img_len; (void)limits;
    strbuf_puts(out, "{\"ok\": false, \"stage\": \"compile\", \"message\": \"evaluation is not supported yet\"}");
}
