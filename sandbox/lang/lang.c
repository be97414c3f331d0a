/* sandbox/lang/lang: entry points of the managed-evaluation language (lang.h):
 * the source checks of LANGUAGE.md in the reference's order (empty, size,
 * parse, tree checks) and the evaluation of one source into the outcome JSON
 * line. Owns the per-call arena of the front end. */
#include "sandbox/lang/lang.h"

#include "common/strbuf.h"
#include "sandbox/lang/ast.h"
#include "sandbox/lang/checker.h"
#include "sandbox/lang/eval.h"
#include "sandbox/lang/parser.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#define MAX_CONDITION_BYTES (16 * 1024)
#define MAX_EVALUATOR_BYTES (128 * 1024)
#define FRONTEND_ARENA_CAP ((size_t)256 * 1024 * 1024)

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

/* Runs every source check. Returns 0 with *root set (arena memory), or 1
 * with the message in msg, or -1 when out of memory. */
static int front_end(lang_kind kind, const char *src, size_t len, ast_arena *ar, ast_node **root,
                     strbuf *msg)
{
    const char *field = kind == LANG_CONDITION ? "condition_source" : "evaluator_source";
    size_t max = kind == LANG_CONDITION ? MAX_CONDITION_BYTES : MAX_EVALUATOR_BYTES;
    if (!src || blank_source(src, len)) {
        strbuf_printf(msg, "%s must not be empty", field);
        return 1;
    }
    if (len > max) {
        strbuf_printf(msg, "%s exceeds %zu bytes", field, max);
        return 1;
    }
    char err[256];
    int rc = parser_parse(ar, src, len, root, err, sizeof err);
    if (rc != 0) {
        /* SyntaxError, and the MemoryError/RecursionError CPython's parser
         * raises on sources too deep to build, all read as a parse failure. */
        strbuf_printf(msg, "%s must be one expression", field);
        return 1;
    }
    rc = checker_check(*root, field, msg);
    return rc;
}

int lang_check(lang_kind kind, const char *src, size_t len, char *msg, size_t msgcap)
{
    ast_arena ar;
    ast_arena_init(&ar, FRONTEND_ARENA_CAP);
    strbuf m;
    strbuf_init(&m);
    ast_node *root = NULL;
    int rc = front_end(kind, src, len, &ar, &root, &m);
    if (rc < 0) {
        strbuf_reset(&m);
        strbuf_puts(&m, kind == LANG_CONDITION ? "condition_source must be one expression"
                                               : "evaluator_source must be one expression");
        rc = 1;
    }
    if (msgcap) snprintf(msg, msgcap, "%s", rc ? m.data : "");
    strbuf_free(&m);
    ast_arena_free(&ar);
    return rc ? 1 : 0;
}

char *lang_eval(lang_kind kind, const char *src, size_t len, const char *eval_key, const void *img,
                size_t img_len, const lang_limits *limits)
{
    ast_arena ar;
    ast_arena_init(&ar, FRONTEND_ARENA_CAP);
    strbuf out, m;
    strbuf_init(&out);
    strbuf_init(&m);
    ast_node *root = NULL;
    int rc = front_end(kind, src, len, &ar, &root, &m);
    if (rc != 0) {
        if (rc < 0) {
            strbuf_reset(&m);
            strbuf_puts(&m, kind == LANG_CONDITION ? "condition_source must be one expression"
                                                   : "evaluator_source must be one expression");
        }
        strbuf_puts(&out, "{\"ok\": false, \"stage\": \"compile\", \"message\": ");
        strbuf_json_strn(&out, m.data, m.len);
        strbuf_putc(&out, '}');
    } else {
        eval_run(kind, root, eval_key ? eval_key : "q", img, img_len, limits, &out);
    }
    strbuf_free(&m);
    ast_arena_free(&ar);
    return strbuf_detach(&out, NULL);
}
