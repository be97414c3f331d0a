/* sandbox/lang/lexer: tokenizer of the managed-evaluation language, following
 * CPython 3.11's Parser/tokenizer.c for what is accepted and rejected (see
 * lexer.h). Owns nothing: tokens and decoded strings live in the caller's
 * arena. */
#include "sandbox/lang/lexer.h"
#include "sandbox/lang/utf8.h"

#include "sandbox/lang/unicode_names.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#define MAXLEVEL 200

typedef struct {
    ast_arena *ar;
    const char *s; /* normalised source, NUL-terminated */
    size_t len;
    size_t i;
    lex_token *toks;
    size_t n, cap;
    fps_err *err;   /* borrowed, may be NULL */
    size_t *errpos; /* borrowed: where a syntax error was found */
    int oom;
} lexer;

static int fail(lexer *L, const char *fmt, ...)
{
    if (L->errpos) *L->errpos = L->i;
    va_list ap;
    va_start(ap, fmt);
    fps_err_vset(L->err, LEX_ESYNTAX, 0, "syntax_error", fmt, ap);
    va_end(ap);
    return LEX_ESYNTAX;
}

static lex_token *push(lexer *L, int type, int op, size_t pos, const char *text, size_t len)
{
    if (L->n == L->cap) {
        /* small sources (f-string fields) start small: at most len + 3 tokens */
        size_t nc = L->cap ? L->cap * 2 : (L->len < 253 ? L->len + 3 : 256);
        lex_token *t = ast_arena_alloc(L->ar, nc * sizeof *t);
        if (!t) {
            L->oom = 1;
            return NULL;
        }
        if (L->n) memcpy(t, L->toks, L->n * sizeof *t);
        L->toks = t;
        L->cap = nc;
    }
    lex_token *t = &L->toks[L->n++];
    t->type = (uint8_t)type;
    t->op = (uint8_t)op;
    t->pos = (uint32_t)pos;
    t->text = text;
    t->len = (uint32_t)len;
    return t;
}

/* Strict UTF-8 validation (no surrogates, no overlongs). */
static int valid_utf8(const unsigned char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        utf8proc_int32_t cp;
        utf8proc_ssize_t k = utf8proc_iterate(s + i, (utf8proc_ssize_t)(n - i), &cp);
        if (k <= 0) return 0;
        i += (size_t)k;
    }
    return 1;
}

static const struct {
    const char *w;
    int kw;
} keywords[] = {
    {"False", KW_False},
    {"None", KW_None},
    {"True", KW_True},
    {"and", KW_and},
    {"as", KW_as},
    {"assert", KW_assert},
    {"async", KW_async},
    {"await", KW_await},
    {"break", KW_break},
    {"class", KW_class},
    {"continue", KW_continue},
    {"def", KW_def},
    {"del", KW_del},
    {"elif", KW_elif},
    {"else", KW_else},
    {"except", KW_except},
    {"finally", KW_finally},
    {"for", KW_for},
    {"from", KW_from},
    {"global", KW_global},
    {"if", KW_if},
    {"import", KW_import},
    {"in", KW_in},
    {"is", KW_is},
    {"lambda", KW_lambda},
    {"nonlocal", KW_nonlocal},
    {"not", KW_not},
    {"or", KW_or},
    {"pass", KW_pass},
    {"raise", KW_raise},
    {"return", KW_return},
    {"try", KW_try},
    {"while", KW_while},
    {"with", KW_with},
    {"yield", KW_yield},
};

static int keyword_of(const char *s, size_t n)
{
    if (n < 2 || n > 8) return 0;
    for (size_t i = 0; i < sizeof keywords / sizeof keywords[0]; i++)
        if (strlen(keywords[i].w) == n && !memcmp(keywords[i].w, s, n)) return keywords[i].kw;
    return 0;
}

static int is_id_start_ascii(int c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c >= 128;
}

static int is_id_char_ascii(int c)
{
    return is_id_start_ascii(c) || (c >= '0' && c <= '9');
}

static int in_ranges(const uint32_t (*r)[2], size_t n, uint32_t cp)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cp < r[mid][0])
            hi = mid;
        else if (cp > r[mid][1])
            lo = mid + 1;
        else
            return 1;
    }
    return 0;
}

/* XID_Start / XID_Continue as CPython's str.isidentifier() has them. */
static int xid_start(utf8proc_int32_t cp)
{
    if (cp < 128) return is_id_start_ascii(cp) && cp != 0;
    return in_ranges(unicode_id_start, unicode_id_start_len, (uint32_t)cp);
}

static int xid_continue(utf8proc_int32_t cp)
{
    if (cp < 128) return is_id_char_ascii(cp);
    return in_ranges(unicode_id_continue, unicode_id_continue_len, (uint32_t)cp);
}

/* Validates and NFKC-normalises a non-ASCII identifier. */
static int finish_identifier(lexer *L, size_t start, size_t end, const char **text, size_t *tlen)
{
    const unsigned char *p = (const unsigned char *)L->s + start;
    size_t n = end - start, i = 0;
    int first = 1;
    while (i < n) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t k = utf8proc_iterate(p + i, (utf8proc_ssize_t)(n - i), &cp);
        if (k <= 0) return fail(L, "invalid character");
        if (first ? !xid_start(cp) : !xid_continue(cp))
            return fail(L, "invalid character '%.*s' (U+%04X)", (int)k, p + i, (unsigned)cp);
        first = 0;
        i += (size_t)k;
    }
    utf8proc_uint8_t *norm = NULL;
    utf8proc_ssize_t r = utf8proc_map(p, (utf8proc_ssize_t)n, &norm,
                                      UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT);
    if (r < 0) return fail(L, "invalid identifier");
    char *t = ast_arena_strndup(L->ar, (const char *)norm, (size_t)r);
    free(norm);
    if (!t) {
        L->oom = 1;
        return -1;
    }
    *text = t;
    *tlen = (size_t)r;
    return 0;
}

static int lookahead(const char *p, const char *w)
{
    return strncmp(p, w, strlen(w)) == 0;
}

/* verify_end_of_number: p points at the character after the literal. */
static int end_of_number(lexer *L, const char *p, const char *kind)
{
    int c = (unsigned char)*p, r = 0;
    if (c == 'a')
        r = lookahead(p + 1, "nd");
    else if (c == 'e')
        r = lookahead(p + 1, "lse");
    else if (c == 'f')
        r = lookahead(p + 1, "or");
    else if (c == 'i')
        r = p[1] == 'f' || p[1] == 'n' || p[1] == 's';
    else if (c == 'o')
        r = lookahead(p + 1, "r");
    else if (c == 'n')
        r = lookahead(p + 1, "ot");
    if (r) return 0;
    if (is_id_char_ascii(c)) return fail(L, "invalid %s literal", kind);
    return 0;
}

/* tok_decimal_tail: *p is a digit. */
static int decimal_tail(lexer *L, const char **pp)
{
    const char *p = *pp;
    for (;;) {
        while (isdigit((unsigned char)*p))
            p++;
        if (*p != '_') break;
        p++;
        if (!isdigit((unsigned char)*p)) return fail(L, "invalid decimal literal");
    }
    *pp = p;
    return 0;
}

static int radix_digits(lexer *L, const char **pp, int radix, const char *kind)
{
    const char *p = *pp;
    int c;
    do {
        if (*p == '_') p++;
        c = (unsigned char)*p;
        int ok = radix == 16 ? isxdigit(c) : (c >= '0' && c < '0' + radix);
        if (!ok) {
            if (isdigit(c)) return fail(L, "invalid digit '%c' in %s literal", c, kind);
            return fail(L, "invalid %s literal", kind);
        }
        for (;;) {
            c = (unsigned char)*++p;
            int more = radix == 16 ? isxdigit(c) : (c >= '0' && c < '0' + radix);
            if (!more) break;
        }
    } while (*p == '_');
    if (radix != 16 && isdigit((unsigned char)*p))
        return fail(L, "invalid digit '%c' in %s literal", *p, kind);
    *pp = p;
    return end_of_number(L, p, kind);
}

/* Scans a number starting at s[i]; sets *end. */
static int scan_number(lexer *L, size_t i, size_t *end)
{
    const char *p = L->s + i;
    if (*p == '0' &&
        (p[1] == 'x' || p[1] == 'X' || p[1] == 'o' || p[1] == 'O' || p[1] == 'b' || p[1] == 'B')) {
        int c = p[1] | 0x20;
        p += 2;
        int rc = c == 'x'   ? radix_digits(L, &p, 16, "hexadecimal")
                 : c == 'o' ? radix_digits(L, &p, 8, "octal")
                            : radix_digits(L, &p, 2, "binary");
        if (rc) return rc;
        *end = (size_t)(p - L->s);
        return 0;
    }
    if (*p == '.') goto fraction_start;
    if (*p == '0') {
        int nonzero = 0;
        p++;
        for (;;) {
            if (*p == '_') {
                p++;
                if (!isdigit((unsigned char)*p)) return fail(L, "invalid decimal literal");
            }
            if (*p != '0') break;
            p++;
        }
        if (isdigit((unsigned char)*p)) {
            nonzero = 1;
            if (decimal_tail(L, &p)) return -1;
        }
        if (*p == '.') goto fraction_start;
        if (*p == 'e' || *p == 'E') goto exponent;
        if (*p == 'j' || *p == 'J') goto imaginary;
        if (nonzero) return fail(L, "leading zeros in decimal integer literals are not permitted");
        if (end_of_number(L, p, "decimal")) return -1;
        *end = (size_t)(p - L->s);
        return 0;
    }
    if (decimal_tail(L, &p)) return -1;
    if (*p == '.') {
    fraction_start:
        p++;
        if (isdigit((unsigned char)*p) && decimal_tail(L, &p)) return -1;
    }
    if (*p == 'e' || *p == 'E') {
    exponent:;
        const char *e = p;
        p++;
        if (*p == '+' || *p == '-') {
            p++;
            if (!isdigit((unsigned char)*p)) return fail(L, "invalid decimal literal");
        } else if (!isdigit((unsigned char)*p)) {
            if (end_of_number(L, e, "decimal")) return -1;
            *end = (size_t)(e - L->s);
            return 0;
        }
        if (decimal_tail(L, &p)) return -1;
    }
    if (*p == 'j' || *p == 'J') {
    imaginary:
        p++;
        if (end_of_number(L, p, "imaginary")) return -1;
    } else if (end_of_number(L, p, "decimal")) {
        return -1;
    }
    *end = (size_t)(p - L->s);
    return 0;
}

/* Recognises a string prefix; returns STRF_* flags or -1. */
static int string_prefix(const char *s, size_t n)
{
    int f = 0;
    if (n > 2) return -1;
    for (size_t i = 0; i < n; i++) {
        int c = s[i] | 0x20, bit;
        if (c == 'r')
            bit = STRF_RAW;
        else if (c == 'b')
            bit = STRF_BYTES;
        else if (c == 'f')
            bit = STRF_F;
        else if (c == 'u')
            bit = STRF_U;
        else
            return -1;
        if (f & bit) return -1;
        f |= bit;
    }
    if ((f & STRF_U) && n != 1) return -1;
    if ((f & STRF_BYTES) && (f & STRF_F)) return -1;
    return f;
}

static int scan_string(lexer *L, size_t i, int flags, size_t prefix_start)
{
    const char *s = L->s;
    char q = s[i];
    int triple = s[i + 1] == q && s[i + 2] == q;
    size_t body = i + (triple ? 3 : 1), j = body;
    for (;;) {
        if (j >= L->len)
            return fail(L, triple ? "unterminated triple-quoted string literal"
                                  : "unterminated string literal");
        char c = s[j];
        if (c == '\\') {
            if (j + 1 >= L->len) return fail(L, "unterminated string literal");
            j += 2;
            continue;
        }
        if (c == '\n' && !triple) return fail(L, "unterminated string literal");
        if (c == q) {
            if (!triple) break;
            if (s[j + 1] == q && s[j + 2] == q) break;
        }
        j++;
    }
    size_t blen = j - body;
    if (!push(L, TK_STRING, flags, prefix_start, s + body, blen)) return -2;
    L->i = j + (triple ? 3 : 1);
    return 0;
}

static const struct {
    const char *s;
    int op;
} ops3[] = {{"**=", OP_AUGASSIGN},
            {"//=", OP_AUGASSIGN},
            {">>=", OP_AUGASSIGN},
            {"<<=", OP_AUGASSIGN},
            {"...", OP_ELLIPSIS}},
  ops2[] = {
      {"!=", OP_NOTEQUAL},    {"%=", OP_AUGASSIGN}, {"&=", OP_AUGASSIGN},  {"**", OP_DOUBLESTAR},
      {"*=", OP_AUGASSIGN},   {"+=", OP_AUGASSIGN}, {"-=", OP_AUGASSIGN},  {"->", OP_RARROW},
      {"//", OP_DOUBLESLASH}, {"/=", OP_AUGASSIGN}, {":=", OP_COLONEQUAL}, {"<<", OP_LEFTSHIFT},
      {"<=", OP_LESSEQUAL},   {"<>", OP_LTGT},      {"==", OP_EQEQUAL},    {">=", OP_GREATEREQUAL},
      {">>", OP_RIGHTSHIFT},  {"@=", OP_AUGASSIGN}, {"^=", OP_AUGASSIGN},  {"|=", OP_AUGASSIGN}};

static int op1(int c)
{
    switch (c) {
    case '(':
        return OP_LPAR;
    case ')':
        return OP_RPAR;
    case '[':
        return OP_LSQB;
    case ']':
        return OP_RSQB;
    case '{':
        return OP_LBRACE;
    case '}':
        return OP_RBRACE;
    case ':':
        return OP_COLON;
    case ',':
        return OP_COMMA;
    case ';':
        return OP_SEMI;
    case '+':
        return OP_PLUS;
    case '-':
        return OP_MINUS;
    case '*':
        return OP_STAR;
    case '/':
        return OP_SLASH;
    case '|':
        return OP_VBAR;
    case '&':
        return OP_AMPER;
    case '<':
        return OP_LESS;
    case '>':
        return OP_GREATER;
    case '=':
        return OP_EQUAL;
    case '.':
        return OP_DOT;
    case '%':
        return OP_PERCENT;
    case '~':
        return OP_TILDE;
    case '^':
        return OP_CIRCUMFLEX;
    case '@':
        return OP_AT;
    default:
        return 0;
    }
}

int lex_tokenize(ast_arena *ar, const char *src, size_t len, lex_token **out, size_t *n,
                 fps_err *err)
{
    lexer L = {.ar = ar, .err = err, .errpos = n};
    char parens[MAXLEVEL];
    int level = 0, rc = 0;
    if (memchr(src, 0, len)) return fail(&L, "source code string cannot contain null bytes");
    if (!valid_utf8((const unsigned char *)src, len)) return fail(&L, "invalid utf-8");
    /* Normalise newlines; pad with NULs so lookahead never reads past the end. */
    char *s = ast_arena_alloc(ar, len + 8);
    if (!s) return -2;
    size_t m = 0;
    for (size_t i = 0; i < len; i++) {
        if (src[i] == '\r') {
            s[m++] = '\n';
            if (i + 1 < len && src[i + 1] == '\n') i++;
        } else {
            s[m++] = src[i];
        }
    }
    L.s = s;
    L.len = m;
    int at_line_start = 1, line_has_tokens = 0;
    for (;;) {
        if (L.oom) return -2;
        if (at_line_start && level == 0) {
            /* Indentation of a new logical line. */
            int col = 0;
            while (L.i < L.len && (s[L.i] == ' ' || s[L.i] == '\t' || s[L.i] == '\f')) {
                if (s[L.i] == ' ')
                    col++;
                else if (s[L.i] == '\t')
                    col = (col / 8 + 1) * 8;
                else
                    col = 0;
                L.i++;
            }
            at_line_start = 0;
            if (L.i < L.len && (s[L.i] == '#' || s[L.i] == '\n')) {
                while (L.i < L.len && s[L.i] != '\n')
                    L.i++;
                if (L.i < L.len) L.i++;
                at_line_start = 1;
                continue;
            }
            if (col != 0) return fail(&L, "unexpected indent");
        }
        while (L.i < L.len && (s[L.i] == ' ' || s[L.i] == '\t' || s[L.i] == '\f'))
            L.i++;
        if (L.i >= L.len) {
            if (level > 0) return fail(&L, "unexpected EOF in multi-line statement");
            if (line_has_tokens && !push(&L, TK_NEWLINE, 0, L.i, NULL, 0)) return -2;
            if (!push(&L, TK_END, 0, L.i, NULL, 0)) return -2;
            break;
        }
        size_t start = L.i;
        int c = (unsigned char)s[L.i];
        if (c == '#') {
            while (L.i < L.len && s[L.i] != '\n')
                L.i++;
            continue;
        }
        if (c == '\n') {
            L.i++;
            if (level > 0) continue;
            if (line_has_tokens && !push(&L, TK_NEWLINE, 0, start, NULL, 0)) return -2;
            line_has_tokens = 0;
            at_line_start = 1;
            continue;
        }
        if (c == '\\') {
            if (L.i + 1 >= L.len) return fail(&L, "unexpected EOF while parsing");
            if (s[L.i + 1] != '\n')
                return fail(&L, "unexpected character after line continuation character");
            L.i += 2;
            continue;
        }
        line_has_tokens = 1;
        if (is_id_start_ascii(c)) {
            size_t j = L.i, nonascii = 0;
            while (j < L.len && is_id_char_ascii((unsigned char)s[j])) {
                if ((unsigned char)s[j] >= 128) nonascii = 1;
                j++;
            }
            if (s[j] == '"' || s[j] == '\'') {
                int flags = string_prefix(s + L.i, j - L.i);
                if (flags >= 0) {
                    rc = scan_string(&L, j, flags, start);
                    if (rc) return rc;
                    continue;
                }
            }
            const char *text = s + L.i;
            size_t tlen = j - L.i;
            if (nonascii && (rc = finish_identifier(&L, L.i, j, &text, &tlen)) != 0)
                return L.oom ? -2 : rc;
            if (!push(&L, TK_NAME, nonascii ? 0 : keyword_of(text, tlen), start, text, tlen))
                return -2;
            L.i = j;
            continue;
        }
        if (isdigit(c) || (c == '.' && isdigit((unsigned char)s[L.i + 1]))) {
            size_t end = L.i;
            if (scan_number(&L, L.i, &end)) return -1;
            if (!push(&L, TK_NUMBER, 0, start, s + L.i, end - L.i)) return -2;
            L.i = end;
            continue;
        }
        if (c == '"' || c == '\'') {
            rc = scan_string(&L, L.i, 0, start);
            if (rc) return rc;
            continue;
        }
        int op = 0;
        size_t w = 0;
        for (size_t k = 0; !op && k < sizeof ops3 / sizeof ops3[0]; k++)
            if (!strncmp(s + L.i, ops3[k].s, 3)) op = ops3[k].op, w = 3;
        for (size_t k = 0; !op && k < sizeof ops2 / sizeof ops2[0]; k++)
            if (!strncmp(s + L.i, ops2[k].s, 2)) op = ops2[k].op, w = 2;
        if (!op && (op = op1(c)) != 0) w = 1;
        if (!op) {
            if (c < 32 || c == 127) return fail(&L, "invalid non-printable character U+%04X", c);
            return fail(&L, "invalid character '%c'", c);
        }
        if (op == OP_LPAR || op == OP_LSQB || op == OP_LBRACE) {
            if (level >= MAXLEVEL) return fail(&L, "too many nested parentheses");
            parens[level++] = (char)c;
        } else if (op == OP_RPAR || op == OP_RSQB || op == OP_RBRACE) {
            if (level == 0) return fail(&L, "unmatched '%c'", c);
            char o = parens[--level];
            if ((o == '(' && c != ')') || (o == '[' && c != ']') || (o == '{' && c != '}'))
                return fail(&L, "closing parenthesis '%c' does not match opening parenthesis '%c'",
                            c, o);
        }
        if (!push(&L, TK_OP, op, start, s + L.i, w)) return -2;
        L.i += w;
    }
    if (L.oom) return -2;
    *out = L.toks;
    *n = L.n;
    return 0;
}

/* ---- \N{name}: unicodedata's name lookup (case-insensitive; no aliases) -- */

static const char *const hangul_l[] = {"G",  "GG", "N", "D",  "DD", "R", "M", "B", "BB", "S",
                                       "SS", "",   "J", "JJ", "C",  "K", "T", "P", "H"};
static const char *const hangul_v[] = {"A",   "AE", "YA", "YAE", "EO", "E",  "YEO",
                                       "YE",  "O",  "WA", "WAE", "OE", "YO", "U",
                                       "WEO", "WE", "WI", "YU",  "EU", "YI", "I"};
static const char *const hangul_t[] = {"",   "G",  "GG", "GS", "N",  "NJ", "NH", "D", "L",  "LG",
                                       "LM", "LB", "LS", "LT", "LP", "LH", "M",  "B", "BS", "S",
                                       "SS", "NG", "J",  "C",  "K",  "T",  "P",  "H"};

/* Longest entry of `tab` that prefixes s[0..n); returns its index or -1. */
static int longest(const char *const *tab, int count, const char *s, size_t n, size_t *used)
{
    int best = -1;
    size_t bl = 0;
    for (int i = 0; i < count; i++) {
        size_t l = strlen(tab[i]);
        if (l <= n && !memcmp(tab[i], s, l) && (best < 0 || l > bl)) best = i, bl = l;
    }
    *used = bl;
    return best;
}

static int unicode_name_lookup(const char *raw, size_t n, uint32_t *cp)
{
    char name[128];
    if (n == 0 || n >= sizeof name) return -1;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)raw[i];
        if (c >= 128) return -1;
        name[i] = (char)(c >= 'a' && c <= 'z' ? c - 32 : c);
    }
    name[n] = 0;
    if (n > 16 && !memcmp(name, "HANGUL SYLLABLE ", 16)) {
        const char *s = name + 16;
        size_t rest = n - 16, u;
        int l = longest(hangul_l, 19, s, rest, &u);
        s += u, rest -= u;
        int v = longest(hangul_v, 21, s, rest, &u);
        s += u, rest -= u;
        int t = longest(hangul_t, 28, s, rest, &u);
        rest -= u;
        if (l < 0 || v < 0 || t < 0 || rest) return -1;
        *cp = 0xAC00 + (uint32_t)((l * 21 + v) * 28 + t);
        return 0;
    }
    if ((n == 26 || n == 27) && !memcmp(name, "CJK UNIFIED IDEOGRAPH-", 22)) {
        uint32_t v = 0;
        for (size_t i = 22; i < n; i++) {
            int h = name[i] >= '0' && name[i] <= '9'   ? name[i] - '0'
                    : name[i] >= 'A' && name[i] <= 'F' ? name[i] - 'A' + 10
                                                       : -1;
            if (h < 0) return -1;
            v = v * 16 + (uint32_t)h;
        }
        for (size_t i = 0; i < unicode_names_cjk_len; i++)
            if (v >= unicode_names_cjk[i][0] && v <= unicode_names_cjk[i][1]) {
                *cp = v;
                return 0;
            }
        return -1;
    }
    char cur[128];
    size_t curlen = 0;
    const char *p = unicode_names_blob, *end = p + unicode_names_blob_len;
    while (p < end) {
        size_t keep = (size_t)(unsigned char)*p++ - 0x21;
        const char *semi = memchr(p, ';', (size_t)(end - p));
        if (!semi || keep > curlen) return -1;
        size_t add = (size_t)(semi - p);
        if (keep + add >= sizeof cur) return -1;
        memcpy(cur + keep, p, add);
        curlen = keep + add;
        p = semi + 1;
        uint32_t v = 0;
        while (p < end && *p != '\n') {
            v = v * 16 + (uint32_t)(*p >= 'A' ? *p - 'A' + 10 : *p - '0');
            p++;
        }
        p++;
        if (curlen == n && !memcmp(cur, name, n)) {
            *cp = v;
            return 0;
        }
    }
    return -1;
}

static int hexval(int c)
{
    if (c >= '0' && c <= '9') return c - '0';
    c |= 0x20;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

int lex_unescape(ast_arena *ar, const char *body, size_t len, int flags, char **out, size_t *outlen,
                 fps_err *err)
{
    int bytes = (flags & STRF_BYTES) != 0, raw = (flags & STRF_RAW) != 0;
    if (bytes) {
        for (size_t i = 0; i < len; i++)
            if ((unsigned char)body[i] >= 128) {
                fps_err_set(err, LEX_ESYNTAX, 0, "syntax_error",
                            "bytes can only contain ASCII literal characters");
                return -1;
            }
    }
    if (raw || !memchr(body, '\\', len)) {
        *out = ast_arena_strndup(ar, body, len);
        *outlen = len;
        return *out ? 0 : -2;
    }
    char *o = ast_arena_alloc(ar, len + 1); /* escapes never grow the text */
    if (!o) return -2;
    size_t k = 0, i = 0;
    while (i < len) {
        char c = body[i];
        if (c != '\\') {
            o[k++] = c;
            i++;
            continue;
        }
        i++;
        if (i >= len) { /* only in an f-string chunk ending before '{': kept */
            o[k++] = '\\';
            break;
        }
        c = body[i++];
        switch (c) {
        case '\n':
            break;
        case '\\':
            o[k++] = '\\';
            break;
        case '\'':
            o[k++] = '\'';
            break;
        case '"':
            o[k++] = '"';
            break;
        case 'a':
            o[k++] = '\a';
            break;
        case 'b':
            o[k++] = '\b';
            break;
        case 'f':
            o[k++] = '\f';
            break;
        case 'n':
            o[k++] = '\n';
            break;
        case 'r':
            o[k++] = '\r';
            break;
        case 't':
            o[k++] = '\t';
            break;
        case 'v':
            o[k++] = '\v';
            break;
        case '0':
        case '1':
        case '2':
        case '3':
        case '4':
        case '5':
        case '6':
        case '7': {
            unsigned v = (unsigned)(c - '0');
            for (int d = 0; d < 2 && i < len && body[i] >= '0' && body[i] <= '7'; d++)
                v = v * 8 + (unsigned)(body[i++] - '0');
            if (bytes)
                o[k++] = (char)(v & 0xFF);
            else
                k += (size_t)utf8_encode(v, o + k);
            break;
        }
        case 'x':
        case 'u':
        case 'U': {
            if (bytes && c != 'x') {
                o[k++] = '\\';
                o[k++] = c;
                break;
            }
            int nd = c == 'x' ? 2 : c == 'u' ? 4 : 8;
            uint32_t v = 0;
            for (int d = 0; d < nd; d++) {
                int h = i < len ? hexval((unsigned char)body[i]) : -1;
                if (h < 0) {
                    fps_err_set(err, LEX_ESYNTAX, 0, "syntax_error", "truncated \\%c escape", c);
                    return -1;
                }
                v = v * 16 + (uint32_t)h;
                i++;
            }
            if (bytes) {
                o[k++] = (char)v;
            } else {
                if (v > 0x10FFFF) {
                    fps_err_set(err, LEX_ESYNTAX, 0, "syntax_error", "illegal Unicode character");
                    return -1;
                }
                k += (size_t)utf8_encode(v, o + k);
            }
            break;
        }
        case 'N':
            if (!bytes) {
                const char *close =
                    i < len && body[i] == '{' ? memchr(body + i, '}', len - i) : NULL;
                uint32_t cp;
                if (!close || close == body + i + 1 ||
                    unicode_name_lookup(body + i + 1, (size_t)(close - body - i - 1), &cp)) {
                    fps_err_set(err, LEX_ESYNTAX, 0, "syntax_error",
                                "malformed \\N character escape");
                    return -1;
                }
                k += (size_t)utf8_encode(cp, o + k);
                i = (size_t)(close - body) + 1;
                break;
            }
            /* fallthrough */
        default:
            o[k++] = '\\';
            o[k++] = c;
            break;
        }
    }
    o[k] = 0;
    *out = o;
    *outlen = k;
    return 0;
}
