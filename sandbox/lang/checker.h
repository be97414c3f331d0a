/* sandbox/lang/checker: the source checks of docs/LANGUAGE.md over a parsed tree, in
 * the reference's order: nodes visited breadth-first exactly as CPython's
 * ast.walk visits them (operator and Load/Store context nodes included), and
 * for each node in turn the node ceiling, the allowed classes, the `**`
 * exponent rule, the attribute rules and the private-name rule. */
#ifndef FPS_CHECKER_H
#define FPS_CHECKER_H
#include "common/strbuf.h"
#include "sandbox/lang/ast.h"

#define CHECKER_MAX_NODES 5000
#define CHECKER_MAX_POW 64

/* Returns 0 if `root` (an Expression) passes; otherwise 1 with the message
 * (prefixed by `field`, e.g. "evaluator_source may not access private names")
 * appended to msg, or -1 on allocation failure. */
int checker_check(ast_node *root, const char *field, strbuf *msg);

/* 1 if `name` is an allowlisted data attribute / method name. */
int checker_is_data_attr(const char *name);
int checker_is_method_attr(const char *name);

#endif
