/* sandbox/lang/parser: recursive-descent parser for CPython 3.11's expression
 * grammar (Grammar/python.gram, eval mode) and its f-string sub-grammar
 * (Parser/string_parser.c). See parser.h. The AST lives in the caller's
 * arena. */
#include "sandbox/lang/parser.h"

#include "sandbox/lang/lexer.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_RECURSION 600 /* nested expression() calls (brackets, lambdas, f-strings) */
#define MAX_INT_DIGITS 4300

typedef struct {
    ast_arena *ar;
    lex_token *t;
    size_t n, pos;
    fps_err *err; /* borrowed, may be NULL */
    int depth;
    int oom;
    int failed;
    /* Where the first error was found (byte offset in the normalised source)
     * and the outermost string token being decoded, whose start stands for
     * any error inside it (f-string fields are parsed from copies). */
    size_t errpos;
    const lex_token *in_string;
} parser;

/* Marks the parse failed at the current token (or the enclosing string). */
static void set_failed(parser *P)
{
    if (P->failed) return;
    P->failed = 1;
    if (P->in_string)
        P->errpos = P->in_string->pos;
    else if (P->t)
        P->errpos = P->t[P->pos < P->n ? P->pos : P->n - 1].pos;
}

/* A growable list of node pointers in the arena. */
typedef struct {
    ast_node **v;
    uint32_t n, cap;
} nvec;

static void *perr(parser *P, const char *fmt, ...)
{
    if (!P->failed) {
        set_failed(P);
        va_list ap;
        va_start(ap, fmt);
        fps_err_vset(P->err, PARSER_ESYNTAX, 0, "syntax_error", fmt, ap);
        va_end(ap);
    }
    return NULL;
}

static void *poom(parser *P)
{
    P->oom = 1;
    return perr(P, "out of memory");
}

static int nv_push(parser *P, nvec *v, ast_node *x)
{
    if (v->n == v->cap) {
        uint32_t nc = v->cap ? v->cap * 2 : 4;
        ast_node **nvv = ast_arena_alloc(P->ar, nc * sizeof *nvv);
        if (!nvv) {
            poom(P);
            return -1;
        }
        if (v->n) memcpy(nvv, v->v, v->n * sizeof *nvv);
        v->v = nvv;
        v->cap = nc;
    }
    v->v[v->n++] = x;
    return 0;
}

/* Sets depth = 1 + max(child depths); fails past the AST construction cap. */
static ast_node *fin(parser *P, ast_node *x)
{
    if (!x) return NULL;
    uint32_t d = 0;
    if (x->a && x->a->depth > d) d = x->a->depth;
    if (x->b && x->b->depth > d) d = x->b->depth;
    if (x->c && x->c->depth > d) d = x->c->depth;
    for (uint32_t i = 0; i < x->n && x->items; i++)
        if (x->items[i] && x->items[i]->depth > d) d = x->items[i]->depth;
    for (uint32_t i = 0; i < x->n2 && x->items2; i++)
        if (x->items2[i] && x->items2[i]->depth > d) d = x->items2[i]->depth;
    x->depth = d + 1;
    if (x->depth > PARSER_MAX_DEPTH)
        return perr(P, "maximum recursion depth exceeded during ast construction");
    return x;
}

static ast_node *mk(parser *P, ast_kind k)
{
    ast_node *x = ast_new(P->ar, k);
    if (!x) return poom(P);
    return x;
}

/* ---- token helpers ---------------------------------------------------- */
static lex_token *cur(parser *P)
{
    return &P->t[P->pos];
}
static lex_token *peekn(parser *P, size_t k)
{
    size_t i = P->pos + k;
    return &P->t[i < P->n ? i : P->n - 1];
}
static int is_op(lex_token *t, int op)
{
    return t->type == TK_OP && t->op == op;
}
static int is_kw(lex_token *t, int kw)
{
    return t->type == TK_NAME && t->op == kw;
}
static int at_op(parser *P, int op)
{
    return is_op(cur(P), op);
}
static int at_kw(parser *P, int kw)
{
    return is_kw(cur(P), kw);
}
static int accept_op(parser *P, int op)
{
    if (at_op(P, op)) {
        P->pos++;
        return 1;
    }
    return 0;
}
static int accept_kw(parser *P, int kw)
{
    if (at_kw(P, kw)) {
        P->pos++;
        return 1;
    }
    return 0;
}
static int expect_op(parser *P, int op)
{
    if (accept_op(P, op)) return 1;
    perr(P, "invalid syntax");
    return 0;
}
static int at_plain_name(parser *P)
{
    return cur(P)->type == TK_NAME && cur(P)->op == KW_NONE;
}
static int at_comp_for(parser *P)
{
    return at_kw(P, KW_for) || (at_kw(P, KW_async) && is_kw(peekn(P, 1), KW_for));
}

static ast_node *expression(parser *P);
static ast_node *disjunction(parser *P);
static ast_node *bitwise_or(parser *P);
static ast_node *subexpr(parser *P, int limit);
static ast_node *named_expression(parser *P);
static ast_node *star_named_expression(parser *P);
static ast_node *primary(parser *P);
static ast_node *parse_source(parser *P, const char *src, size_t len, int fstring_mode);

/* ---- atoms ------------------------------------------------------------ */

static ast_node *number_const(parser *P, lex_token *t)
{
    ast_node *x = mk(P, AST_Constant);
    if (!x) return NULL;
    const char *s = t->text;
    size_t n = t->len;
    char *clean = ast_arena_alloc(P->ar, n + 1);
    if (!clean) return poom(P);
    size_t k = 0;
    int base = 10;
    if (n >= 2 && s[0] == '0' && strchr("xXoObB", s[1])) {
        int c = s[1] | 0x20;
        base = c == 'x' ? 16 : c == 'o' ? 8 : 2;
        s += 2;
        n -= 2;
    }
    int is_float = 0, is_imag = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == '_') continue;
        if (base == 10 && (c == '.' || c == 'e' || c == 'E')) is_float = 1;
        if (base == 10 && (c == 'j' || c == 'J')) {
            is_imag = 1;
            continue;
        }
        clean[k++] = c;
    }
    clean[k] = 0;
    if (is_imag) {
        x->op = CONST_IMAG;
        x->f = strtod(clean, NULL);
    } else if (is_float) {
        x->op = CONST_FLOAT;
        x->f = strtod(clean, NULL);
    } else {
        /* Strip leading zeros (keep one digit). */
        size_t z = 0;
        while (z + 1 < k && clean[z] == '0')
            z++;
        if (base == 10 && k - z > MAX_INT_DIGITS && !(k - z == 1 && clean[z] == '0'))
            return perr(P, "Exceeds the limit (4300 digits) for integer string conversion");
        x->op = CONST_INT;
        x->flags = (uint8_t)base;
        x->str = clean + z;
        x->len = k - z;
    }
    return fin(P, x);
}

/* ---- f-strings (Parser/string_parser.c, 3.11) ---------------------------- */

typedef struct {
    nvec parts; /* Constant / FormattedValue */
    char *lit;  /* pending literal text (arena, grown by doubling) */
    size_t lit_len, lit_cap;
    int fmode; /* an f-string was seen */
} fbuilder;

static int fb_lit(parser *P, fbuilder *b, const char *s, size_t n)
{
    if (!n) return 0;
    if (!b->lit || b->lit_len + n + 1 > b->lit_cap) {
        size_t nc = b->lit_cap ? b->lit_cap * 2 : 64;
        while (nc < b->lit_len + n + 1)
            nc *= 2;
        char *nl = ast_arena_alloc(P->ar, nc);
        if (!nl) {
            poom(P);
            return -1;
        }
        if (b->lit) memcpy(nl, b->lit, b->lit_len);
        b->lit = nl;
        b->lit_cap = nc;
    }
    memcpy(b->lit + b->lit_len, s, n);
    b->lit_len += n;
    b->lit[b->lit_len] = 0;
    return 0;
}

static ast_node *str_const(parser *P, const char *s, size_t n, int bytes)
{
    ast_node *c = mk(P, AST_Constant);
    if (!c) return NULL;
    c->op = bytes ? CONST_BYTES : CONST_STR;
    c->str = ast_arena_strndup(P->ar, s ? s : "", n);
    if (!c->str) return poom(P);
    c->len = n;
    return fin(P, c);
}

static int fb_flush(parser *P, fbuilder *b)
{
    if (!b->lit_len) return 0;
    ast_node *c = str_const(P, b->lit, b->lit_len, 0);
    if (!c || nv_push(P, &b->parts, c)) return -1;
    b->lit_len = 0;
    return 0;
}

static ast_node *fb_joined(parser *P, fbuilder *b)
{
    if (fb_flush(P, b)) return NULL;
    ast_node *j = mk(P, AST_JoinedStr);
    if (!j) return NULL;
    j->items = b->parts.v;
    j->n = b->parts.n;
    return fin(P, j);
}

static int fstring_parse(parser *P, const char **str, const char *end, int raw, int lvl,
                         fbuilder *b);

static int decode_lit(parser *P, fbuilder *b, const char *s, size_t n, int raw)
{
    if (!n) return 0;
    char *out;
    size_t olen;
    int rc = lex_unescape(P->ar, s, n, raw ? STRF_RAW : 0, &out, &olen, P->err);
    if (rc == LEX_ENOMEM) {
        poom(P);
        return -1;
    }
    if (rc) {
        set_failed(P);
        return -1;
    }
    return fb_lit(P, b, out, olen);
}

/* fstring_find_literal: returns 1 when a doubled brace was consumed (the
 * caller keeps scanning), 0 otherwise, -1 on error. */
static int find_literal(parser *P, const char **str, const char *end, int raw, int lvl, fbuilder *b)
{
    const char *s = *str, *start = s;
    int result = 0;
    while (s < end) {
        char ch = *s++;
        if (!raw && ch == '\\' && s < end) {
            ch = *s++;
            if (ch == 'N') {
                if (s < end && *s++ == '{') {
                    while (s < end && *s++ != '}') {
                    }
                    continue;
                }
                continue;
            }
        }
        if (ch == '{' || ch == '}') {
            if (lvl == 0) {
                if (s < end && *s == ch) {
                    *str = s + 1;
                    result = 1;
                    goto done;
                }
                if (ch == '}') {
                    perr(P, "f-string: single '}' is not allowed");
                    return -1;
                }
            }
            s--;
            break;
        }
    }
    *str = s;
done:
    if (s != start && decode_lit(P, b, start, (size_t)(s - start), raw)) return -1;
    return result;
}

static int find_expr(parser *P, const char **str, const char *end, int raw, int lvl, fbuilder *b)
{
    const char *s = *str;
    char quote = 0, stack[200];
    int string_type = 0, nested = 0;
    if (lvl >= 2) {
        perr(P, "f-string: expressions nested too deeply");
        return -1;
    }
    s++; /* the '{' */
    const char *expr_start = s;
    while (s < end) {
        char ch = *s;
        if (ch == '\\') {
            perr(P, "f-string expression part cannot include a backslash");
            return -1;
        }
        if (quote) {
            if (ch == quote) {
                if (string_type == 3) {
                    if (s + 2 < end && s[1] == ch && s[2] == ch) {
                        s += 3;
                        string_type = 0;
                        quote = 0;
                        continue;
                    }
                } else {
                    s++;
                    string_type = 0;
                    quote = 0;
                    continue;
                }
            }
            s++;
            continue;
        }
        if (ch == '\'' || ch == '"') {
            if (s + 2 < end && s[1] == ch && s[2] == ch) {
                string_type = 3;
                s += 2;
            } else {
                string_type = 1;
            }
            quote = ch;
            s++;
            continue;
        }
        if (ch == '[' || ch == '{' || ch == '(') {
            if (nested >= 200) {
                perr(P, "f-string: too many nested parenthesis");
                return -1;
            }
            stack[nested++] = ch;
            s++;
            continue;
        }
        if (ch == '#') {
            perr(P, "f-string expression part cannot include '#'");
            return -1;
        }
        if (nested == 0 &&
            (ch == '!' || ch == ':' || ch == '}' || ch == '=' || ch == '>' || ch == '<')) {
            if (s + 1 < end) {
                char nx = s[1];
                if ((ch == '!' && nx == '=') || (ch == '=' && nx == '=') ||
                    (ch == '<' && nx == '=') || (ch == '>' && nx == '=')) {
                    s += 2;
                    continue;
                }
            }
            if (ch == '>' || ch == '<') {
                s++;
                continue;
            }
            break;
        }
        if (ch == ']' || ch == '}' || ch == ')') {
            if (!nested) {
                perr(P, "f-string: unmatched '%c'", ch);
                return -1;
            }
            char o = stack[--nested];
            if (!((o == '(' && ch == ')') || (o == '[' && ch == ']') || (o == '{' && ch == '}'))) {
                perr(P, "f-string: closing parenthesis does not match");
                return -1;
            }
        }
        s++;
    }
    const char *expr_end = s;
    if (quote) {
        perr(P, "f-string: unterminated string");
        return -1;
    }
    if (nested) {
        perr(P, "f-string: unmatched '%c'", stack[nested - 1]);
        return -1;
    }
    if (s >= end) goto unexpected_end;
    /* Compile the expression: empty is an error, else "(expr)" in fstring mode. */
    {
        const char *q = expr_start;
        while (q < expr_end && (*q == ' ' || *q == '\t' || *q == '\n' || *q == '\f' || *q == '\r'))
            q++;
        if (q == expr_end) {
            perr(P, "f-string: empty expression not allowed");
            return -1;
        }
    }
    size_t elen = (size_t)(expr_end - expr_start);
    char *wrapped = ast_arena_alloc(P->ar, elen + 3);
    if (!wrapped) {
        poom(P);
        return -1;
    }
    wrapped[0] = '(';
    memcpy(wrapped + 1, expr_start, elen);
    wrapped[elen + 1] = ')';
    ast_node *value = parse_source(P, wrapped, elen + 2, 1);
    if (!value) return -1;
    int conversion = 0, debug = 0;
    const char *dbg_end = NULL;
    if (*s == '=') {
        s++;
        while (s < end &&
               (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r' || *s == '\f' || *s == '\v'))
            s++;
        if (s >= end) goto unexpected_end;
        debug = 1;
        dbg_end = s;
    }
    if (*s == '!') {
        s++;
        if (s >= end) goto unexpected_end;
        conversion = (unsigned char)*s++;
        if (!(conversion == 's' || conversion == 'r' || conversion == 'a')) {
            perr(P, "f-string: invalid conversion character: expected 's', 'r', or 'a'");
            return -1;
        }
    }
    ast_node *spec = NULL;
    if (s >= end) goto unexpected_end;
    if (*s == ':') {
        s++;
        if (s >= end) goto unexpected_end;
        fbuilder sb = {0};
        sb.fmode = 1;
        if (fstring_parse(P, &s, end, raw, lvl + 1, &sb)) return -1;
        spec = fb_joined(P, &sb);
        if (!spec) return -1;
    }
    if (s >= end || *s != '}') {
        perr(P, "f-string: expecting '}'");
        return -1;
    }
    s++;
    if (debug) {
        if (fb_lit(P, b, expr_start, (size_t)(dbg_end - expr_start))) return -1;
        if (!spec && !conversion) conversion = 'r';
    }
    if (fb_flush(P, b)) return -1;
    ast_node *fv = mk(P, AST_FormattedValue);
    if (!fv) return -1;
    fv->a = value;
    fv->op = (uint8_t)conversion;
    fv->b = spec;
    if (!fin(P, fv) || nv_push(P, &b->parts, fv)) return -1;
    *str = s;
    return 0;
unexpected_end:
    perr(P, "f-string: expecting '}'");
    return -1;
}

static int fstring_parse(parser *P, const char **str, const char *end, int raw, int lvl,
                         fbuilder *b)
{
    for (;;) {
        int r = find_literal(P, str, end, raw, lvl, b);
        if (r < 0) return -1;
        if (r == 1) continue;
        if (*str >= end || **str == '}') break;
        if (find_expr(P, str, end, raw, lvl, b)) return -1;
    }
    return 0;
}

static ast_node *strings(parser *P)
{
    fbuilder b = {0};
    int bytes = -1;
    while (cur(P)->type == TK_STRING) {
        lex_token *t = cur(P);
        int isb = (t->op & STRF_BYTES) != 0;
        if (bytes >= 0 && bytes != isb) return perr(P, "cannot mix bytes and nonbytes literals");
        bytes = isb;
        P->pos++;
        const lex_token *outer = P->in_string;
        if (outer == NULL) P->in_string = t;
        if (t->op & STRF_F) {
            b.fmode = 1;
            const char *s = t->text;
            int rc = fstring_parse(P, &s, t->text + t->len, (t->op & STRF_RAW) != 0, 0, &b);
            P->in_string = outer;
            if (rc) return NULL;
        } else {
            char *out;
            size_t olen;
            int rc = lex_unescape(P->ar, t->text, t->len, t->op, &out, &olen, P->err);
            if (rc) set_failed(P);
            P->in_string = outer;
            if (rc == LEX_ENOMEM) return poom(P);
            if (rc) return NULL;
            if (fb_lit(P, &b, out, olen)) return NULL;
        }
    }
    if (b.fmode) return fb_joined(P, &b);
    return str_const(P, b.lit, b.lit_len, bytes == 1);
}

/* ---- comprehensions and targets --------------------------------------- */

static int set_store(parser *P, ast_node *x)
{
    switch (x->kind) {
    case AST_Name:
    case AST_Attribute:
    case AST_Subscript:
        x->ctx = CTX_STORE;
        return 0;
    case AST_Starred:
        x->ctx = CTX_STORE;
        return set_store(P, x->a);
    case AST_Tuple:
    case AST_List:
        x->ctx = CTX_STORE;
        for (uint32_t i = 0; i < x->n; i++)
            if (set_store(P, x->items[i])) return -1;
        return 0;
    default:
        perr(P, "cannot assign to expression");
        return -1;
    }
}

static ast_node *star_target(parser *P)
{
    if (accept_op(P, OP_STAR)) {
        if (at_op(P, OP_STAR)) return perr(P, "invalid syntax");
        ast_node *v = star_target(P);
        if (!v) return NULL;
        ast_node *s = mk(P, AST_Starred);
        if (!s) return NULL;
        s->a = v;
        return fin(P, s);
    }
    return bitwise_or(P);
}

static ast_node *star_targets(parser *P)
{
    ast_node *first = star_target(P);
    if (!first) return NULL;
    ast_node *res = first;
    if (at_op(P, OP_COMMA)) {
        nvec v = {0};
        if (nv_push(P, &v, first)) return NULL;
        while (accept_op(P, OP_COMMA)) {
            if (at_kw(P, KW_in)) break;
            ast_node *e = star_target(P);
            if (!e || nv_push(P, &v, e)) return NULL;
        }
        res = mk(P, AST_Tuple);
        if (!res) return NULL;
        res->items = v.v;
        res->n = v.n;
        if (!fin(P, res)) return NULL;
    }
    if (set_store(P, res)) return NULL;
    return res;
}

static int for_if_clauses(parser *P, nvec *gens)
{
    while (at_comp_for(P)) {
        int is_async = accept_kw(P, KW_async);
        P->pos++; /* for */
        ast_node *target = star_targets(P);
        if (!target) return -1;
        if (!accept_kw(P, KW_in)) {
            perr(P, "invalid syntax");
            return -1;
        }
        ast_node *iter = disjunction(P);
        if (!iter) return -1;
        nvec ifs = {0};
        while (accept_kw(P, KW_if)) {
            ast_node *c = disjunction(P);
            if (!c || nv_push(P, &ifs, c)) return -1;
        }
        ast_node *g = mk(P, AST_comprehension);
        if (!g) return -1;
        g->a = target;
        g->b = iter;
        g->items = ifs.v;
        g->n = ifs.n;
        g->flags = (uint8_t)is_async;
        if (!fin(P, g) || nv_push(P, gens, g)) return -1;
    }
    if (!gens->n) {
        perr(P, "invalid syntax");
        return -1;
    }
    return 0;
}

static ast_node *comp(parser *P, ast_kind k, ast_node *elt, ast_node *val)
{
    if (elt->kind == AST_Starred)
        return perr(P, "iterable unpacking cannot be used in comprehension");
    nvec gens = {0};
    if (for_if_clauses(P, &gens)) return NULL;
    ast_node *x = mk(P, k);
    if (!x) return NULL;
    x->a = elt;
    x->b = val;
    x->items = gens.v;
    x->n = gens.n;
    return fin(P, x);
}

static ast_node *seq_node(parser *P, ast_kind k, nvec *v)
{
    ast_node *x = mk(P, k);
    if (!x) return NULL;
    x->items = v->v;
    x->n = v->n;
    return fin(P, x);
}

/* Elements after the first of a list/tuple/set display, up to `close`. */
static int more_elts(parser *P, nvec *v, int close)
{
    while (accept_op(P, OP_COMMA)) {
        if (at_op(P, close)) break;
        ast_node *e = star_named_expression(P);
        if (!e || nv_push(P, v, e)) return -1;
    }
    return 0;
}

static ast_node *yield_expr(parser *P)
{
    P->pos++; /* yield */
    if (accept_kw(P, KW_from)) {
        ast_node *v = expression(P);
        if (!v) return NULL;
        ast_node *y = mk(P, AST_YieldFrom);
        if (!y) return NULL;
        y->a = v;
        return fin(P, y);
    }
    ast_node *y = mk(P, AST_Yield);
    if (!y) return NULL;
    if (!at_op(P, OP_RPAR) && !at_op(P, OP_RBRACE) && !at_op(P, OP_RSQB) &&
        cur(P)->type != TK_NEWLINE && cur(P)->type != TK_END) {
        /* star_expressions */
        nvec v = {0};
        if (at_plain_name(P) && is_op(peekn(P, 1), OP_COLONEQUAL)) return perr(P, "invalid syntax");
        ast_node *first = star_named_expression(P);
        if (!first) return NULL;
        if (at_op(P, OP_COMMA)) {
            if (nv_push(P, &v, first)) return NULL;
            while (accept_op(P, OP_COMMA)) {
                if (at_op(P, OP_RPAR)) break;
                ast_node *e = star_named_expression(P);
                if (!e || nv_push(P, &v, e)) return NULL;
            }
            first = seq_node(P, AST_Tuple, &v);
            if (!first) return NULL;
        } else if (first->kind == AST_Starred) {
            return perr(P, "invalid syntax");
        }
        y->a = first;
    }
    return fin(P, y);
}

static ast_node *paren_atom(parser *P)
{
    P->pos++; /* ( */
    if (accept_op(P, OP_RPAR)) {
        nvec v = {0};
        return seq_node(P, AST_Tuple, &v);
    }
    if (at_kw(P, KW_yield)) {
        ast_node *y = yield_expr(P);
        if (!y || !expect_op(P, OP_RPAR)) return NULL;
        return y;
    }
    ast_node *first = star_named_expression(P);
    if (!first) return NULL;
    if (at_comp_for(P)) {
        ast_node *g = comp(P, AST_GeneratorExp, first, NULL);
        if (!g || !expect_op(P, OP_RPAR)) return NULL;
        return g;
    }
    if (at_op(P, OP_COMMA)) {
        nvec v = {0};
        if (nv_push(P, &v, first) || more_elts(P, &v, OP_RPAR)) return NULL;
        if (!expect_op(P, OP_RPAR)) return NULL;
        return seq_node(P, AST_Tuple, &v);
    }
    if (first->kind == AST_Starred) return perr(P, "cannot use starred expression here");
    if (!expect_op(P, OP_RPAR)) return NULL;
    return first;
}

static ast_node *list_atom(parser *P)
{
    P->pos++;
    nvec v = {0};
    if (accept_op(P, OP_RSQB)) return seq_node(P, AST_List, &v);
    ast_node *first = star_named_expression(P);
    if (!first) return NULL;
    if (at_comp_for(P)) {
        ast_node *c = comp(P, AST_ListComp, first, NULL);
        if (!c || !expect_op(P, OP_RSQB)) return NULL;
        return c;
    }
    if (nv_push(P, &v, first) || more_elts(P, &v, OP_RSQB)) return NULL;
    if (!expect_op(P, OP_RSQB)) return NULL;
    return seq_node(P, AST_List, &v);
}

static ast_node *brace_atom(parser *P)
{
    P->pos++;
    nvec keys = {0}, vals = {0};
    if (accept_op(P, OP_RBRACE)) {
        ast_node *d = mk(P, AST_Dict);
        return d ? fin(P, d) : NULL;
    }
    int dict_mode = 0;
    if (accept_op(P, OP_DOUBLESTAR)) {
        ast_node *v = bitwise_or(P);
        if (!v || nv_push(P, &keys, NULL) || nv_push(P, &vals, v)) return NULL;
        dict_mode = 1;
    } else {
        int walrus = at_plain_name(P) && is_op(peekn(P, 1), OP_COLONEQUAL);
        ast_node *first = star_named_expression(P);
        if (!first) return NULL;
        if (at_op(P, OP_COLON) && !walrus && first->kind != AST_Starred) {
            P->pos++;
            ast_node *v = expression(P);
            if (!v) return NULL;
            if (at_comp_for(P)) {
                ast_node *c = comp(P, AST_DictComp, first, v);
                if (!c || !expect_op(P, OP_RBRACE)) return NULL;
                return c;
            }
            if (nv_push(P, &keys, first) || nv_push(P, &vals, v)) return NULL;
            dict_mode = 1;
        } else {
            if (at_comp_for(P)) {
                ast_node *c = comp(P, AST_SetComp, first, NULL);
                if (!c || !expect_op(P, OP_RBRACE)) return NULL;
                return c;
            }
            nvec v = {0};
            if (nv_push(P, &v, first) || more_elts(P, &v, OP_RBRACE)) return NULL;
            if (!expect_op(P, OP_RBRACE)) return NULL;
            return seq_node(P, AST_Set, &v);
        }
    }
    (void)dict_mode;
    while (accept_op(P, OP_COMMA)) {
        if (at_op(P, OP_RBRACE)) break;
        if (accept_op(P, OP_DOUBLESTAR)) {
            ast_node *v = bitwise_or(P);
            if (!v || nv_push(P, &keys, NULL) || nv_push(P, &vals, v)) return NULL;
            continue;
        }
        ast_node *k = expression(P);
        if (!k) return NULL;
        if (!expect_op(P, OP_COLON)) return NULL;
        ast_node *v = expression(P);
        if (!v || nv_push(P, &keys, k) || nv_push(P, &vals, v)) return NULL;
    }
    if (!expect_op(P, OP_RBRACE)) return NULL;
    ast_node *d = mk(P, AST_Dict);
    if (!d) return NULL;
    d->items = keys.v;
    d->n = keys.n;
    d->items2 = vals.v;
    d->n2 = vals.n;
    return fin(P, d);
}

static ast_node *atom(parser *P)
{
    lex_token *t = cur(P);
    switch (t->type) {
    case TK_NAME: {
        ast_node *x;
        switch (t->op) {
        case KW_NONE:
            x = mk(P, AST_Name);
            if (!x) return NULL;
            x->str = ast_arena_strndup(P->ar, t->text, t->len);
            if (!x->str) return poom(P);
            x->len = t->len;
            P->pos++;
            return fin(P, x);
        case KW_True:
        case KW_False:
        case KW_None:
            x = mk(P, AST_Constant);
            if (!x) return NULL;
            x->op = t->op == KW_True ? CONST_TRUE : t->op == KW_False ? CONST_FALSE : CONST_NONE;
            P->pos++;
            return fin(P, x);
        default:
            return perr(P, "invalid syntax");
        }
    }
    case TK_NUMBER:
        P->pos++;
        return number_const(P, t);
    case TK_STRING:
        return strings(P);
    case TK_OP:
        switch (t->op) {
        case OP_LPAR:
            return paren_atom(P);
        case OP_LSQB:
            return list_atom(P);
        case OP_LBRACE:
            return brace_atom(P);
        case OP_ELLIPSIS: {
            ast_node *x = mk(P, AST_Constant);
            if (!x) return NULL;
            x->op = CONST_ELLIPSIS;
            P->pos++;
            return fin(P, x);
        }
        default:
            break;
        }
        break;
    default:
        break;
    }
    return perr(P, "invalid syntax");
}

/* ---- calls and subscripts -------------------------------------------- */

static ast_node *call_args(parser *P, ast_node *func)
{
    P->pos++; /* ( */
    nvec args = {0}, kws = {0};
    int seen_kw = 0, seen_dstar = 0;
    ast_node *call = mk(P, AST_Call);
    if (!call) return NULL;
    while (!at_op(P, OP_RPAR)) {
        if (accept_op(P, OP_STAR)) {
            if (seen_dstar)
                return perr(P, "iterable argument unpacking follows keyword argument unpacking");
            ast_node *v = expression(P);
            if (!v) return NULL;
            ast_node *s = mk(P, AST_Starred);
            if (!s) return NULL;
            s->a = v;
            if (!fin(P, s) || nv_push(P, &args, s)) return NULL;
        } else if (accept_op(P, OP_DOUBLESTAR)) {
            ast_node *v = expression(P);
            if (!v) return NULL;
            ast_node *k = mk(P, AST_keyword);
            if (!k) return NULL;
            k->a = v;
            if (!fin(P, k) || nv_push(P, &kws, k)) return NULL;
            seen_kw = seen_dstar = 1;
        } else if (cur(P)->type == TK_NAME && is_op(peekn(P, 1), OP_EQUAL)) {
            lex_token *t = cur(P);
            if (t->op != KW_NONE) return perr(P, "cannot assign to keyword");
            P->pos += 2;
            ast_node *v = expression(P);
            if (!v) return NULL;
            ast_node *k = mk(P, AST_keyword);
            if (!k) return NULL;
            k->str = ast_arena_strndup(P->ar, t->text, t->len);
            if (!k->str) return poom(P);
            k->len = t->len;
            k->a = v;
            if (!fin(P, k) || nv_push(P, &kws, k)) return NULL;
            seen_kw = 1;
        } else {
            if (seen_kw) {
                if (seen_dstar)
                    return perr(P, "positional argument follows keyword argument unpacking");
                return perr(P, "positional argument follows keyword argument");
            }
            ast_node *v = named_expression(P);
            if (!v) return NULL;
            if (at_comp_for(P)) {
                ast_node *g = comp(P, AST_GeneratorExp, v, NULL);
                if (!g) return NULL;
                if (args.n || !at_op(P, OP_RPAR))
                    return perr(P, "Generator expression must be parenthesized");
                v = g;
            }
            if (at_op(P, OP_EQUAL)) return perr(P, "expression cannot contain assignment");
            if (nv_push(P, &args, v)) return NULL;
        }
        if (!accept_op(P, OP_COMMA)) break;
    }
    if (!expect_op(P, OP_RPAR)) return NULL;
    call->a = func;
    call->items = args.v;
    call->n = args.n;
    call->items2 = kws.v;
    call->n2 = kws.n;
    return fin(P, call);
}

static ast_node *slice_item(parser *P)
{
    ast_node *lower = NULL, *upper = NULL, *step = NULL;
    if (!at_op(P, OP_COLON)) {
        int walrus = at_plain_name(P) && is_op(peekn(P, 1), OP_COLONEQUAL);
        ast_node *e = named_expression(P);
        if (!e) return NULL;
        if (!at_op(P, OP_COLON)) return e;
        if (walrus) return perr(P, "invalid syntax");
        lower = e;
    }
    P->pos++; /* : */
    if (!at_op(P, OP_COLON) && !at_op(P, OP_COMMA) && !at_op(P, OP_RSQB)) {
        upper = expression(P);
        if (!upper) return NULL;
    }
    if (accept_op(P, OP_COLON)) {
        if (!at_op(P, OP_COMMA) && !at_op(P, OP_RSQB)) {
            step = expression(P);
            if (!step) return NULL;
        }
    }
    ast_node *s = mk(P, AST_Slice);
    if (!s) return NULL;
    s->a = lower;
    s->b = upper;
    s->c = step;
    return fin(P, s);
}

static ast_node *subscript(parser *P, ast_node *value)
{
    P->pos++; /* [ */
    nvec v = {0};
    int tuple = 0;
    for (;;) {
        ast_node *e;
        if (accept_op(P, OP_STAR)) {
            ast_node *inner = bitwise_or(P);
            if (!inner) return NULL;
            e = mk(P, AST_Starred);
            if (!e) return NULL;
            e->a = inner;
            if (!fin(P, e)) return NULL;
            tuple = 1;
        } else {
            e = slice_item(P);
            if (!e) return NULL;
        }
        if (nv_push(P, &v, e)) return NULL;
        if (!accept_op(P, OP_COMMA)) break;
        tuple = 1;
        if (at_op(P, OP_RSQB)) break;
    }
    if (!expect_op(P, OP_RSQB)) return NULL;
    ast_node *sl = tuple ? seq_node(P, AST_Tuple, &v) : v.v[0];
    if (!sl) return NULL;
    ast_node *x = mk(P, AST_Subscript);
    if (!x) return NULL;
    x->a = value;
    x->b = sl;
    return fin(P, x);
}

static ast_node *primary(parser *P)
{
    ast_node *x = atom(P);
    while (x) {
        if (at_op(P, OP_DOT)) {
            P->pos++;
            if (!at_plain_name(P)) return perr(P, "invalid syntax");
            lex_token *t = cur(P);
            P->pos++;
            ast_node *a = mk(P, AST_Attribute);
            if (!a) return NULL;
            a->a = x;
            a->str = ast_arena_strndup(P->ar, t->text, t->len);
            if (!a->str) return poom(P);
            a->len = t->len;
            x = fin(P, a);
        } else if (at_op(P, OP_LPAR)) {
            x = call_args(P, x);
        } else if (at_op(P, OP_LSQB)) {
            x = subscript(P, x);
        } else {
            break;
        }
    }
    return x;
}

/* ---- operators ---------------------------------------------------------- */

static ast_node *unary(parser *P, ast_kind k, int op, ast_node *operand)
{
    ast_node *u = mk(P, k);
    if (!u) return NULL;
    u->op = (uint8_t)op;
    u->a = operand;
    return fin(P, u);
}

static ast_node *binop(parser *P, ast_node *l, int op, ast_node *r)
{
    ast_node *b = mk(P, AST_BinOp);
    if (!b) return NULL;
    b->a = l;
    b->op = (uint8_t)op;
    b->b = r;
    return fin(P, b);
}

/* await_primary: ['await'] primary. */
static ast_node *await_primary(parser *P)
{
    int aw = accept_kw(P, KW_await);
    ast_node *x = primary(P);
    if (x && aw) x = unary(P, AST_Await, 0, x);
    return x;
}

/* The prefix operator ('+' '-' '~') at the current token, not consumed; -1
 * when there is none. */
static int prefix_op(parser *P)
{
    if (at_op(P, OP_PLUS)) return OPK_UAdd;
    if (at_op(P, OP_MINUS)) return OPK_USub;
    if (at_op(P, OP_TILDE)) return OPK_Invert;
    return -1;
}

/* Prefix operators ('+' | '-' | '~')* at the current token, consumed, into
 * *ops (arena memory, outermost first) and *cnt. Collected iteratively, so a
 * long chain costs no recursion; past the nesting cap it is a syntax error. */
static int prefix_ops(parser *P, uint8_t **ops, size_t *cnt)
{
    size_t n = 0, cap = 16;
    uint8_t *v = ast_arena_alloc(P->ar, cap);
    if (!v) return poom(P), -1;
    int o;
    while ((o = prefix_op(P)) >= 0) {
        P->pos++;
        if (n + 1 >= cap) {
            if (cap > PARSER_MAX_DEPTH) return perr(P, "too deeply nested"), -1;
            uint8_t *v2 = ast_arena_alloc(P->ar, cap * 2);
            if (!v2) return poom(P), -1;
            memcpy(v2, v, n);
            v = v2;
            cap *= 2;
        }
        v[n++] = (uint8_t)o;
    }
    *ops = v;
    *cnt = n;
    return 0;
}

/* factor: ('+'|'-'|'~')* power; power: await_primary ['**' factor]: the
 * operand of every binary operator of subexpr's table. Both chains are
 * right-recursive; they are collected and folded from the right instead. */
static ast_node *factor(parser *P)
{
    /* Common case: no prefix and no '**'. */
    if (prefix_op(P) < 0) {
        ast_node *x = await_primary(P);
        if (!x || !at_op(P, OP_DOUBLESTAR)) return x;
        /* fall into the general path with x as the first primary */
        nvec prims = {0};
        nvec pre = {0}; /* per segment: a node-sized slot holding prefix ops as an arena string */
        if (nv_push(P, &prims, x)) return NULL;
        while (accept_op(P, OP_DOUBLESTAR)) {
            /* collect prefixes of the right operand */
            uint8_t *ops;
            size_t cnt;
            if (prefix_ops(P, &ops, &cnt)) return NULL;
            ast_node *holder = mk(P, AST_Constant); /* carrier for the prefix list */
            if (!holder) return NULL;
            holder->ops = ops;
            holder->n = (uint32_t)cnt;
            ast_node *y = await_primary(P);
            if (!y || nv_push(P, &prims, y) || nv_push(P, &pre, holder)) return NULL;
        }
        /* fold from the right: r = prefixes_k(p_k); r = p_{k-1} ** r ... */
        ast_node *r = prims.v[prims.n - 1];
        for (uint32_t i = pre.n; i >= 1; i--) { /* pre.n == prims.n - 1 */
            ast_node *h = pre.v[i - 1];
            for (uint32_t j = h->n; j-- > 0;) {
                r = unary(P, AST_UnaryOp, h->ops[j], r);
                if (!r) return NULL;
            }
            r = binop(P, prims.v[i - 1], OPK_Pow, r);
            if (!r) return NULL;
        }
        return r;
    }
    /* prefixes, then a power */
    uint8_t *ops;
    size_t cnt;
    if (prefix_ops(P, &ops, &cnt)) return NULL;
    ast_node *x = factor(P); /* no prefix now: bounded recursion (one level) */
    for (size_t j = cnt; x && j-- > 0;)
        x = unary(P, AST_UnaryOp, ops[j], x);
    return x;
}

/* Priorities of Grammar/python.gram's expression levels, lowest first. An
 * operator continues an expression whose limit is below its left priority;
 * its right operand is parsed with its right priority as the limit (equal to
 * the left one: every operator of the table associates to the left, or
 * chains). 'not' is a prefix at PRI_NOT: its operand is a comparison.
 * Above PRI_TERM, factor() parses prefix '+' '-' '~' and right-associative
 * '**' (whose left operand binds tighter than a prefix: -2**2 == -(2**2),
 * and whose right operand is a factor: 2**-1). */
enum {
    PRI_NONE,  /* a whole disjunction */
    PRI_OR,    /* or: one BoolOp per chain */
    PRI_AND,   /* and: likewise */
    PRI_NOT,   /* prefix not */
    PRI_CMP,   /* == != < <= > >= in, not in, is, is not: one Compare per chain */
    PRI_BOR,   /* | */
    PRI_BXOR,  /* ^ */
    PRI_BAND,  /* & */
    PRI_SHIFT, /* << >> */
    PRI_SUM,   /* + - */
    PRI_TERM,  /* * / // % @ */
};

/* Per operator, as Lua's lparser.c has it: {left, right}; 0 = not binary. */
static const struct {
    uint8_t left, right;
} priority[OPK_COUNT] = {
    [OPK_Or] = {PRI_OR, PRI_OR},           [OPK_And] = {PRI_AND, PRI_AND},
    [OPK_Eq] = {PRI_CMP, PRI_CMP},         [OPK_NotEq] = {PRI_CMP, PRI_CMP},
    [OPK_Lt] = {PRI_CMP, PRI_CMP},         [OPK_LtE] = {PRI_CMP, PRI_CMP},
    [OPK_Gt] = {PRI_CMP, PRI_CMP},         [OPK_GtE] = {PRI_CMP, PRI_CMP},
    [OPK_In] = {PRI_CMP, PRI_CMP},         [OPK_NotIn] = {PRI_CMP, PRI_CMP},
    [OPK_Is] = {PRI_CMP, PRI_CMP},         [OPK_IsNot] = {PRI_CMP, PRI_CMP},
    [OPK_BitOr] = {PRI_BOR, PRI_BOR},      [OPK_BitXor] = {PRI_BXOR, PRI_BXOR},
    [OPK_BitAnd] = {PRI_BAND, PRI_BAND},   [OPK_LShift] = {PRI_SHIFT, PRI_SHIFT},
    [OPK_RShift] = {PRI_SHIFT, PRI_SHIFT}, [OPK_Add] = {PRI_SUM, PRI_SUM},
    [OPK_Sub] = {PRI_SUM, PRI_SUM},        [OPK_Mult] = {PRI_TERM, PRI_TERM},
    [OPK_Div] = {PRI_TERM, PRI_TERM},      [OPK_FloorDiv] = {PRI_TERM, PRI_TERM},
    [OPK_Mod] = {PRI_TERM, PRI_TERM},      [OPK_MatMult] = {PRI_TERM, PRI_TERM},
};

/* The binary operator at the current token, not consumed: its ast_opkind
 * and, in *ntok, how many tokens spell it ('not in', 'is not': two); -1
 * when the token continues no expression. */
static int binary_op(parser *P, int *ntok)
{
    lex_token *t = cur(P);
    *ntok = 1;
    if (t->type == TK_OP) {
        switch (t->op) {
        case OP_VBAR:
            return OPK_BitOr;
        case OP_CIRCUMFLEX:
            return OPK_BitXor;
        case OP_AMPER:
            return OPK_BitAnd;
        case OP_LEFTSHIFT:
            return OPK_LShift;
        case OP_RIGHTSHIFT:
            return OPK_RShift;
        case OP_PLUS:
            return OPK_Add;
        case OP_MINUS:
            return OPK_Sub;
        case OP_STAR:
            return OPK_Mult;
        case OP_SLASH:
            return OPK_Div;
        case OP_DOUBLESLASH:
            return OPK_FloorDiv;
        case OP_PERCENT:
            return OPK_Mod;
        case OP_AT:
            return OPK_MatMult;
        case OP_EQEQUAL:
            return OPK_Eq;
        case OP_NOTEQUAL:
            return OPK_NotEq;
        case OP_LESS:
            return OPK_Lt;
        case OP_LESSEQUAL:
            return OPK_LtE;
        case OP_GREATER:
            return OPK_Gt;
        case OP_GREATEREQUAL:
            return OPK_GtE;
        default:
            return -1;
        }
    }
    if (t->type != TK_NAME) return -1;
    switch (t->op) {
    case KW_or:
        return OPK_Or;
    case KW_and:
        return OPK_And;
    case KW_in:
        return OPK_In;
    case KW_not:
        if (!is_kw(peekn(P, 1), KW_in)) return -1;
        *ntok = 2;
        return OPK_NotIn;
    case KW_is:
        if (!is_kw(peekn(P, 1), KW_not)) return OPK_Is;
        *ntok = 2;
        return OPK_IsNot;
    default:
        return -1;
    }
}

/* The rest of a chain of comparisons after `left`, whose first operator
 * `op` has been consumed: one Compare (a < b < c is not (a < b) < c). */
static ast_node *compare_chain(parser *P, ast_node *left, int op)
{
    nvec comps = {0};
    size_t nops = 0, capo = 4;
    uint8_t *ops = ast_arena_alloc(P->ar, capo);
    if (!ops) return poom(P);
    while (op >= 0) {
        if (nops == capo) {
            uint8_t *n2 = ast_arena_alloc(P->ar, capo * 2);
            if (!n2) return poom(P);
            memcpy(n2, ops, nops);
            ops = n2;
            capo *= 2;
        }
        ops[nops++] = (uint8_t)op;
        ast_node *r = subexpr(P, PRI_CMP);
        if (!r || nv_push(P, &comps, r)) return NULL;
        int ntok;
        op = binary_op(P, &ntok);
        if (op >= 0 && priority[op].left == PRI_CMP)
            P->pos += ntok;
        else
            op = -1;
    }
    ast_node *c = mk(P, AST_Compare);
    if (!c) return NULL;
    c->a = left;
    c->ops = ops;
    c->items = comps.v;
    c->n = comps.n;
    return fin(P, c);
}

/* The rest of a chain of `op` ('and' or 'or') after `first`, the keyword
 * not yet consumed: one BoolOp over every operand. */
static ast_node *bool_chain(parser *P, ast_node *first, int op)
{
    int kw = op == OPK_And ? KW_and : KW_or;
    nvec v = {0};
    if (nv_push(P, &v, first)) return NULL;
    while (accept_kw(P, kw)) {
        ast_node *r = subexpr(P, priority[op].right);
        if (!r || nv_push(P, &v, r)) return NULL;
    }
    ast_node *b = mk(P, AST_BoolOp);
    if (!b) return NULL;
    b->op = (uint8_t)op;
    b->items = v.v;
    b->n = v.n;
    return fin(P, b);
}

/* An expression of binary operators whose left priority is above `limit`
 * (Lua's subexpr): disjunction is subexpr(PRI_NONE), bitwise_or
 * subexpr(PRI_CMP). Each recursion raises the limit, so the depth is bounded
 * by the table; chains at one level are loops. */
static ast_node *subexpr(parser *P, int limit)
{
    ast_node *x;
    if (limit < PRI_NOT && at_kw(P, KW_not)) {
        size_t n = 0;
        while (accept_kw(P, KW_not))
            if (++n > PARSER_MAX_DEPTH) return perr(P, "too deeply nested");
        x = subexpr(P, PRI_NOT);
        while (x && n--)
            x = unary(P, AST_UnaryOp, OPK_Not, x);
    } else {
        x = factor(P);
    }
    int op, ntok;
    while (x && (op = binary_op(P, &ntok)) >= 0 && priority[op].left > limit) {
        if (op == OPK_And || op == OPK_Or) {
            x = bool_chain(P, x, op);
        } else if (priority[op].left == PRI_CMP) {
            P->pos += ntok;
            x = compare_chain(P, x, op);
        } else {
            P->pos += ntok;
            ast_node *r = subexpr(P, priority[op].right);
            if (!r) return NULL;
            x = binop(P, x, op, r);
        }
    }
    return x;
}

static ast_node *disjunction(parser *P)
{
    return subexpr(P, PRI_NONE);
}
static ast_node *bitwise_or(parser *P)
{
    return subexpr(P, PRI_CMP);
}

/* lambda_params per Grammar/python.gram (only validity matters: a Lambda is
 * always rejected by the checker). */
static int lambda_params(parser *P)
{
    int seen_default = 0, seen_slash = 0, seen_star = 0, seen_kwds = 0, nparams = 0;
    int star_bare = 0, after_star = 0;
    while (!at_op(P, OP_COLON)) {
        if (seen_kwds) return perr(P, "arguments cannot follow var-keyword argument"), -1;
        if (accept_op(P, OP_SLASH)) {
            if (seen_slash || seen_star || nparams == 0) return perr(P, "invalid syntax"), -1;
            seen_slash = 1;
        } else if (accept_op(P, OP_STAR)) {
            if (seen_star) return perr(P, "* argument may appear only once"), -1;
            seen_star = 1;
            if (at_plain_name(P)) {
                P->pos++;
            } else {
                star_bare = 1;
            }
        } else if (accept_op(P, OP_DOUBLESTAR)) {
            if (!at_plain_name(P)) return perr(P, "invalid syntax"), -1;
            P->pos++;
            if (at_op(P, OP_EQUAL))
                return perr(P, "var-keyword argument cannot have default value"), -1;
            seen_kwds = 1;
        } else if (at_plain_name(P)) {
            P->pos++;
            nparams++;
            if (seen_star) after_star++;
            if (accept_op(P, OP_EQUAL)) {
                if (!expression(P)) return -1;
                if (!seen_star) seen_default = 1;
            } else if (seen_default && !seen_star) {
                return perr(P, "non-default argument follows default argument"), -1;
            }
        } else {
            return perr(P, "invalid syntax"), -1;
        }
        if (!accept_op(P, OP_COMMA)) break;
    }
    if (star_bare && !after_star) return perr(P, "named arguments must follow bare *"), -1;
    if (!at_op(P, OP_COLON)) return perr(P, "invalid syntax"), -1;
    return 0;
}

static ast_node *lambdef(parser *P)
{
    P->pos++; /* lambda */
    if (lambda_params(P)) return NULL;
    P->pos++; /* : */
    ast_node *body = expression(P);
    if (!body) return NULL;
    ast_node *l = mk(P, AST_Lambda);
    if (!l) return NULL;
    l->a = body;
    return fin(P, l);
}

/* expression: disjunction ['if' disjunction 'else' expression] | lambdef.
 * Chains of conditional expressions are built iteratively. */
static ast_node *expression(parser *P)
{
    if (++P->depth > MAX_RECURSION) return perr(P, "too many nested expressions");
    ast_node *res;
    if (at_kw(P, KW_lambda)) {
        res = lambdef(P);
        P->depth--;
        return res;
    }
    ast_node *body = disjunction(P);
    if (!body || !at_kw(P, KW_if)) {
        P->depth--;
        return body;
    }
    nvec bodies = {0}, tests = {0};
    ast_node *tail = NULL;
    for (;;) {
        P->pos++; /* if */
        ast_node *test = disjunction(P);
        if (!test) return NULL;
        if (!accept_kw(P, KW_else)) return perr(P, "expected 'else' after 'if' expression");
        if (nv_push(P, &bodies, body) || nv_push(P, &tests, test)) return NULL;
        if (at_kw(P, KW_lambda)) {
            tail = lambdef(P);
            break;
        }
        ast_node *nx = disjunction(P);
        if (!nx) return NULL;
        if (!at_kw(P, KW_if)) {
            tail = nx;
            break;
        }
        body = nx;
    }
    res = tail;
    for (uint32_t i = bodies.n; res && i-- > 0;) {
        ast_node *ie = mk(P, AST_IfExp);
        if (!ie) return NULL;
        ie->a = tests.v[i];
        ie->b = bodies.v[i];
        ie->c = res;
        res = fin(P, ie);
    }
    P->depth--;
    return res;
}

static ast_node *named_expression(parser *P)
{
    if (at_plain_name(P) && is_op(peekn(P, 1), OP_COLONEQUAL)) {
        ast_node *target = atom(P);
        if (!target) return NULL;
        target->ctx = CTX_STORE;
        P->pos++; /* := */
        ast_node *v = expression(P);
        if (!v) return NULL;
        ast_node *ne = mk(P, AST_NamedExpr);
        if (!ne) return NULL;
        ne->a = target;
        ne->b = v;
        return fin(P, ne);
    }
    ast_node *e = expression(P);
    if (e && at_op(P, OP_COLONEQUAL)) return perr(P, "cannot use assignment expressions with this");
    return e;
}

static ast_node *star_named_expression(parser *P)
{
    if (accept_op(P, OP_STAR)) {
        ast_node *v = bitwise_or(P);
        if (!v) return NULL;
        ast_node *s = mk(P, AST_Starred);
        if (!s) return NULL;
        s->a = v;
        return fin(P, s);
    }
    return named_expression(P);
}

/* Top level. eval: expressions NEWLINE* ENDMARKER; the f-string form is
 * star_expressions over "(expr)". */
static ast_node *parse_source(parser *P, const char *src, size_t len, int fstring_mode)
{
    lex_token *toks;
    size_t ntoks;
    int rc = lex_tokenize(P->ar, src, len, &toks, &ntoks, P->err);
    if (rc == LEX_ENOMEM) return poom(P);
    if (rc) {
        if (!P->failed) P->errpos = P->in_string ? P->in_string->pos : ntoks;
        P->failed = 1;
        return NULL;
    }
    lex_token *st = P->t;
    size_t sn = P->n, sp = P->pos;
    P->t = toks;
    P->n = ntoks;
    P->pos = 0;
    ast_node *res = NULL;
    if (++P->depth > MAX_RECURSION) {
        perr(P, "too many nested expressions");
        goto out;
    }
    nvec v = {0};
    ast_node *first = fstring_mode ? star_named_expression(P) : expression(P);
    if (!first) goto out;
    res = first;
    if (at_op(P, OP_COMMA)) {
        if (nv_push(P, &v, first)) goto out;
        while (accept_op(P, OP_COMMA)) {
            if (cur(P)->type == TK_NEWLINE || cur(P)->type == TK_END) break;
            ast_node *e = fstring_mode ? star_named_expression(P) : expression(P);
            if (!e || nv_push(P, &v, e)) {
                res = NULL;
                goto out;
            }
        }
        res = seq_node(P, AST_Tuple, &v);
    } else if (first->kind == AST_Starred) {
        perr(P, "cannot use starred expression here");
        res = NULL;
        goto out;
    }
    if (!res) goto out;
    while (cur(P)->type == TK_NEWLINE)
        P->pos++;
    if (cur(P)->type != TK_END) {
        perr(P, "invalid syntax");
        res = NULL;
    }
out:
    P->depth--;
    P->t = st;
    P->n = sn;
    P->pos = sp;
    return res;
}

int parser_parse(ast_arena *ar, const char *src, size_t len, ast_node **out, fps_err *err,
                 size_t *errpos)
{
    parser P = {.ar = ar, .err = err};
    ast_node *body = parse_source(&P, src, len, 0);
    if (errpos) *errpos = P.errpos;
    if (!body) return P.oom ? -2 : -1;
    ast_node *e = mk(&P, AST_Expression);
    if (!e) return -2;
    e->a = body;
    if (!fin(&P, e)) return -1;
    *out = e;
    return 0;
}
