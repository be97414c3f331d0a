/* sandbox/lang/lang: entry points of the managed-evaluation language (lang.h):
 * the source checks of docs/LANGUAGE.md in the reference's order (empty, size,
 * parse, tree checks) and the evaluation of one source into the outcome JSON
 * line. Owns the per-call arena of the front end. */
#include "sandbox/lang/lang.h"

#include "common/strbuf.h"
#include "sandbox/lang/ast.h"
#include "sandbox/lang/checker.h"
#include "sandbox/lang/eval.h"
#include "sandbox/lang/parser.h"
#include "sandbox/lang/siphash.h"
#include "sandbox/lang/value_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#define MAX_CONDITION_BYTES (16 * 1024)
#define MAX_EVALUATOR_BYTES (128 * 1024)
#define FRONTEND_ARENA_CAP ((size_t)256 * 1024 * 1024)

int lang_hash_seed(void)
{
    return siphash_seed();
}

void lang_hash_set_key(uint64_t k0, uint64_t k1)
{
    siphash_set_key(k0, k1);
}

void lang_recycle(void)
{
    vs_recycle();
    vi_recycle();
}

size_t lang_heap_bytes(void)
{
    return vi_heap_bytes();
}

int lang_kind_parse(const char *s, lang_kind *out)
{
    if (!strcmp(s, "raw"))
        *out = LANG_RAW;
    else if (!strcmp(s, "condition"))
        *out = LANG_CONDITION;
    else if (!strcmp(s, "evaluator"))
        *out = LANG_EVALUATOR;
    else
        return -1;
    return 0;
}

/* Python's str.isspace() code points (what str.strip() removes). */
static int py_space(int32_t cp)
{
    if (cp == ' ' || (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x1F)) return 1;
    switch (cp) {
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
        return 1;
    default:
        return cp >= 0x2000 && cp <= 0x200A;
    }
}

static int blank_source(const char *src, size_t len)
{
    size_t i = 0;
    while (i < len) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t k =
            utf8proc_iterate((const utf8proc_uint8_t *)src + i, (utf8proc_ssize_t)(len - i), &cp);
        if (k <= 0 || !py_space(cp)) return 0;
        i += (size_t)k;
    }
    return 1;
}

/* A compile error: the message and, for a syntax error, where it was found
 * (1-based line and column in code points, as CPython's SyntaxError
 * lineno/offset; 0 when the error has no position). */
typedef struct {
    strbuf msg;
    size_t line, column;
} compile_error;

/* Maps a byte offset in the newline-normalised source (the lexer's) to a
 * 1-based line and code-point column of the original `src`. */
static void locate(const char *src, size_t len, size_t pos, compile_error *ce)
{
    size_t line = 1, column = 1, i = 0;
    for (size_t m = 0; i < len && m < pos; m++) {
        unsigned char c = (unsigned char)src[i];
        if (c == '\r' || c == '\n') {
            i += (c == '\r' && i + 1 < len && src[i + 1] == '\n') ? 2 : 1;
            line++;
            column = 1;
        } else {
            column += (c & 0xC0) != 0x80; /* a code point's lead byte */
            i++;
        }
    }
    ce->line = line;
    ce->column = column;
}

/* Runs every source check. Returns 0 with *root set (arena memory), or 1
 * with the error in ce, or -1 when out of memory. */
static int front_end(lang_kind kind, const char *src, size_t len, ast_arena *ar, ast_node **root,
                     compile_error *ce)
{
    const char *field = kind == LANG_CONDITION ? "condition_source" : "evaluator_source";
    size_t max = kind == LANG_CONDITION ? MAX_CONDITION_BYTES : MAX_EVALUATOR_BYTES;
    if (!src || blank_source(src, len)) {
        strbuf_printf(&ce->msg, "%s must not be empty", field);
        return 1;
    }
    if (len > max) {
        strbuf_printf(&ce->msg, "%s exceeds %zu bytes", field, max);
        return 1;
    }
    size_t errpos = 0;
    int rc = parser_parse(ar, src, len, root, NULL, &errpos); /* the diagnostic is not reported */
    if (rc != 0) {
        /* SyntaxError, and the MemoryError/RecursionError CPython's parser
         * raises on sources too deep to build, all read as a parse failure. */
        strbuf_printf(&ce->msg, "%s must be one expression", field);
        if (rc == PARSER_ESYNTAX) locate(src, len, errpos, ce);
        return 1;
    }
    rc = checker_check(*root, field, &ce->msg);
    return rc;
}

/* Runs the front end; returns 0 (accepted, *root set) or 1 with ce filled
 * (out of memory reads as a parse failure without position). */
static int compile_source(lang_kind kind, const char *src, size_t len, ast_arena *ar,
                          ast_node **root, compile_error *ce)
{
    strbuf_init(&ce->msg);
    ce->line = ce->column = 0;
    int rc = front_end(kind, src, len, ar, root, ce);
    if (rc < 0) {
        strbuf_reset(&ce->msg);
        strbuf_puts(&ce->msg, kind == LANG_CONDITION ? "condition_source must be one expression"
                                                     : "evaluator_source must be one expression");
        ce->line = ce->column = 0;
    }
    return rc ? 1 : 0;
}

/* Appends the compile outcome object of docs/LANGUAGE.md to out. */
static void compile_outcome(strbuf *out, const compile_error *ce)
{
    strbuf_puts(out, "{\"ok\": false, \"stage\": \"compile\", \"message\": ");
    strbuf_json_strn(out, ce->msg.data, ce->msg.len);
    if (ce->line > 0) strbuf_printf(out, ", \"line\": %zu, \"column\": %zu", ce->line, ce->column);
    strbuf_putc(out, '}');
}

int lang_check(lang_kind kind, const char *src, size_t len, fps_err *e)
{
    ast_arena ar;
    ast_arena_init(&ar, FRONTEND_ARENA_CAP);
    ast_node *root = NULL;
    compile_error ce;
    int rc = 0;
    if (compile_source(kind, src, len, &ar, &root, &ce) != 0)
        rc = fps_err_set(e, LANG_EREJECTED, 0, "source_rejected", "%s", ce.msg.data);
    strbuf_free(&ce.msg);
    ast_arena_free(&ar);
    return rc;
}

/* Compiles src and returns the owned outcome line: the compile error, or, when
 * eval_key is NULL, {"ok": true}, else the evaluation of the compiled tree. */
static char *compile_then_eval(lang_kind kind, const char *src, size_t len, const char *eval_key,
                               const void *img, size_t img_len, const lang_limits *limits)
{
    ast_arena ar;
    ast_arena_init(&ar, FRONTEND_ARENA_CAP);
    strbuf out;
    strbuf_init(&out);
    ast_node *root = NULL;
    compile_error ce;
    if (compile_source(kind, src, len, &ar, &root, &ce))
        compile_outcome(&out, &ce);
    else if (!eval_key)
        strbuf_puts(&out, "{\"ok\": true}");
    else
        eval_run(kind, root, eval_key, img, img_len, limits, &out);
    strbuf_free(&ce.msg);
    ast_arena_free(&ar);
    return strbuf_detach(&out, NULL);
}

char *lang_check_line(lang_kind kind, const char *src, size_t len)
{
    return compile_then_eval(kind, src, len, NULL, NULL, 0, NULL);
}

char *lang_eval(lang_kind kind, const char *src, size_t len, const char *eval_key, const void *img,
                size_t img_len, const lang_limits *limits)
{
    return compile_then_eval(kind, src, len, eval_key ? eval_key : "q", img, img_len, limits);
}
