/* sandbox/lang/eval: the tree-walking evaluator of the managed-evaluation
 * language over a checked AST (checker.h), with the values of value.h. */
#ifndef FPS_EVAL_H
#define FPS_EVAL_H
#include "common/strbuf.h"
#include "sandbox/lang/ast.h"
#include "sandbox/lang/lang.h"

/* Evaluates a checked Expression tree against the session image and appends
 * the outcome JSON object (docs/LANGUAGE.md's format, no newline) to out. The
 * tree's evaluator fields (slot, cache) are written. */
void eval_run(lang_kind kind, ast_node *root, const char *eval_key, const void *img, size_t img_len,
              const lang_limits *limits, strbuf *out);

#endif
