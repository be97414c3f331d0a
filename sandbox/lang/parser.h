/* sandbox/lang/parser: CPython 3.11's expression grammar (eval mode) over the
 * lexer's tokens, producing the AST of ast.h: every construct CPython's
 * ast.parse accepts is accepted (so the checker can reject it by class name),
 * everything it rejects is a syntax error. Recursion is bounded (bracket
 * nesting is capped by the lexer, chains of unary/binary/postfix operators are
 * parsed iteratively) and the tree depth is capped as CPython's AST
 * construction caps it. */
#ifndef FPS_PARSER_H
#define FPS_PARSER_H
#include "common/err.h"
#include "sandbox/lang/ast.h"

#include <stddef.h>

/* Maximum tree depth (Expression node included) ast.parse builds: deeper
 * sources make CPython raise RecursionError ("maximum recursion depth
 * exceeded during ast construction"; the exact ceiling moves with the
 * caller's stack depth), reported here as a parse failure. */
#define PARSER_MAX_DEPTH 2983
/* compile() of a tree deeper than this raises RecursionError after the
 * reference's checks passed (checker.c applies it last). */
#define COMPILE_MAX_DEPTH 992

/* Parses `src` as one expression. On success returns 0 and *out is the
 * Expression node (arena memory). Returns PARSER_ESYNTAX on a syntax error
 * (or any other error CPython's ast.parse raises: too deep, too complex)
 * with err (may be NULL) filled, name "syntax_error", and, in *errpos (may
 * be NULL), the byte offset in the newline-normalised source of the token
 * where it was found (an error inside a string literal: the literal's
 * start). PARSER_ENOMEM when the arena is exhausted. */
enum { PARSER_ESYNTAX = -1, PARSER_ENOMEM = -2 };
int parser_parse(ast_arena *ar, const char *src, size_t len, ast_node **out, fps_err *err,
                 size_t *errpos);

#endif
