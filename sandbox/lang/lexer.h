/* sandbox/lang/lexer: CPython 3.11 tokenization of one expression source (eval
 * mode): string prefixes and quotes, numeric literals, implicit and explicit
 * line joining, comments, bracket nesting (at most 200 levels, as CPython),
 * and the escape decoding of string literals. Every error CPython's tokenizer
 * raises is an error here (the exact message does not cross the wire: any
 * SyntaxError becomes "must be one expression"). */
#ifndef FPS_LEXER_H
#define FPS_LEXER_H
#include "common/err.h"
#include "sandbox/lang/ast.h"

#include <stddef.h>
#include <stdint.h>

typedef enum { TK_END = 0, TK_NEWLINE, TK_NAME, TK_NUMBER, TK_STRING, TK_OP } lex_type;

typedef enum {
    OP_NONE = 0,
    OP_LPAR,
    OP_RPAR,
    OP_LSQB,
    OP_RSQB,
    OP_LBRACE,
    OP_RBRACE,
    OP_COLON,
    OP_COMMA,
    OP_SEMI,
    OP_PLUS,
    OP_MINUS,
    OP_STAR,
    OP_SLASH,
    OP_VBAR,
    OP_AMPER,
    OP_LESS,
    OP_GREATER,
    OP_EQUAL,
    OP_DOT,
    OP_PERCENT,
    OP_EQEQUAL,
    OP_NOTEQUAL,
    OP_LESSEQUAL,
    OP_GREATEREQUAL,
    OP_TILDE,
    OP_CIRCUMFLEX,
    OP_LEFTSHIFT,
    OP_RIGHTSHIFT,
    OP_DOUBLESTAR,
    OP_DOUBLESLASH,
    OP_AT,
    OP_RARROW,
    OP_ELLIPSIS,
    OP_COLONEQUAL,
    OP_AUGASSIGN,
    OP_LTGT,
} lex_op;

/* Keywords (NAME tokens carry one of these in `op`, 0 for a plain name). */
typedef enum {
    KW_NONE = 0,
    KW_False,
    KW_None,
    KW_True,
    KW_and,
    KW_as,
    KW_assert,
    KW_async,
    KW_await,
    KW_break,
    KW_class,
    KW_continue,
    KW_def,
    KW_del,
    KW_elif,
    KW_else,
    KW_except,
    KW_finally,
    KW_for,
    KW_from,
    KW_global,
    KW_if,
    KW_import,
    KW_in,
    KW_is,
    KW_lambda,
    KW_nonlocal,
    KW_not,
    KW_or,
    KW_pass,
    KW_raise,
    KW_return,
    KW_try,
    KW_while,
    KW_with,
    KW_yield,
} lex_kw;

/* String token flags (in `op` of a TK_STRING). */
enum { STRF_RAW = 1, STRF_BYTES = 2, STRF_F = 4, STRF_U = 8 };

typedef struct {
    uint8_t type;     /* lex_type */
    uint8_t op;       /* lex_op, lex_kw or STRF_* flags */
    uint32_t pos;     /* byte offset in the normalised source */
    const char *text; /* NAME: identifier (NFKC); NUMBER: literal; STRING: body between quotes */
    uint32_t len;
} lex_token;

/* Tokenizes `src` (UTF-8, any newline convention). On success returns 0 and
 * sets *out (arena memory) and *n (the last token is TK_END). Returns
 * LEX_ESYNTAX on a syntax error (err, which may be NULL, filled: name
 * "syntax_error"; *n is then the byte offset in the normalised source where
 * it was found), LEX_ENOMEM if the arena is exhausted (err untouched). */
enum { LEX_ESYNTAX = -1, LEX_ENOMEM = -2 };
int lex_tokenize(ast_arena *ar, const char *src, size_t len, lex_token **out, size_t *n,
                 fps_err *err);

/* Decodes the escapes of a (non-f) string literal body. `flags` are STRF_*.
 * Output in arena memory: UTF-8 for str (lone surrogates encoded as 3-byte
 * sequences), raw bytes for bytes. Returns 0, LEX_ESYNTAX on a syntax error
 * (err filled), LEX_ENOMEM on arena exhaustion. */
int lex_unescape(ast_arena *ar, const char *body, size_t len, int flags, char **out, size_t *outlen,
                 fps_err *err);

#endif
