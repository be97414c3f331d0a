/* Unit tests for the language front end: lexer, parser (AST shapes as
 * CPython's ast.parse builds them), checker (every docs/LANGUAGE.md message, node
 * counting as ast.walk, precedence) and adversarial sources; plus the
 * evaluator's own rules (scopes, evaluation order, outcome lines). Values
 * are covered by test_lang_values and the conformance corpus. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "common/strbuf.h"
#include "sandbox/lang/ast.h"
#include "sandbox/lang/checker.h"
#include "sandbox/lang/lang.h"
#include "sandbox/lang/lexer.h"
#include "sandbox/lang/parser.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static fps_err chk_err;

/* lang_check on an evaluator source; returns the message or "OK". */
static const char *chk_kind(lang_kind k, const char *src, size_t len)
{
    int rc = lang_check(k, src, len, &chk_err);
    if (rc != 0) assert_int_equal(rc, LANG_EREJECTED);
    return rc ? chk_err.msg : "OK";
}
static const char *chk(const char *src)
{
    return chk_kind(LANG_EVALUATOR, src, strlen(src));
}
static const char *chkc(const char *src)
{
    return chk_kind(LANG_CONDITION, src, strlen(src));
}

#define EXPECT(src, want) assert_string_equal(chk(src), want)

static void test_lexer_tokens(void **state)
{
    (void)state;
    ast_arena ar;
    ast_arena_init(&ar, 0);
    lex_token *t;
    size_t n;
    fps_err err;
    assert_int_equal(lex_tokenize(&ar, "a.b(1_0, 0x_F) # c\n", 19, &t, &n, &err), 0);
    assert_int_equal(n, 10); /* a . b ( 1_0 , 0x_F ) NEWLINE END */
    assert_int_equal(t[0].type, TK_NAME);
    assert_int_equal(t[1].op, OP_DOT);
    assert_int_equal(t[4].type, TK_NUMBER);
    assert_int_equal(t[4].len, 3);
    assert_int_equal(t[8].type, TK_NEWLINE);
    assert_int_equal(t[9].type, TK_END);
    /* string prefixes in any case, triple quotes, implicit joining */
    const char *s = "(Rb'x'\n f\"\"\"y\n\"\"\" u'z' not in is)";
    assert_int_equal(lex_tokenize(&ar, s, strlen(s), &t, &n, &err), 0);
    assert_int_equal(t[1].type, TK_STRING);
    assert_int_equal(t[1].op, STRF_RAW | STRF_BYTES);
    assert_int_equal(t[2].op, STRF_F);
    assert_int_equal(t[2].len, 2);
    assert_int_equal(t[3].op, STRF_U);
    assert_int_equal(t[4].op, KW_not);
    /* rejected literals */
    const char *bad[] = {"1__0", "1_",     "0x", "0b2",   "0o8", "0777", "1e",  "1e+", "1.__x",
                         "'abc", "'''abc", "$",  "a ! b", "(]",  ")",    "\\x", "1 \\"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_not_equal(lex_tokenize(&ar, bad[i], strlen(bad[i]), &t, &n, &err), 0);
    const char *good[] = {"0_0",  "00",          "09.5", "09j",     "1if x else 2", "0in x",
                          "1.e5", "1_0.0_1e1_0", ".5",   "1 .real", "x\\\n+1",      "\f1"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
        assert_int_equal(lex_tokenize(&ar, good[i], strlen(good[i]), &t, &n, &err), 0);
    ast_arena_free(&ar);
}

static void test_lexer_unescape(void **state)
{
    (void)state;
    ast_arena ar;
    ast_arena_init(&ar, 0);
    char *out;
    fps_err err;
    size_t n;
    const char *in = "a\\n\\x41\\u00e9\\U0001F600\\101\\777\\d\\\n";
    assert_int_equal(lex_unescape(&ar, in, strlen(in), 0, &out, &n, &err), 0);
    assert_int_equal(n, 1 + 1 + 1 + 2 + 4 + 1 + 2 + 2);
    assert_memory_equal(out,
                        "a\nA\xc3\xa9\xf0\x9f\x98\x80"
                        "A\xc7\xbf\\d",
                        n);
    /* bytes: \u is not an escape, \777 wraps to 0xff */
    in = "\\u0041\\777";
    assert_int_equal(lex_unescape(&ar, in, strlen(in), STRF_BYTES, &out, &n, &err), 0);
    assert_int_equal(n, 7);
    assert_memory_equal(out, "\\u0041\xff", 7);
    in = "\\x4";
    assert_int_equal(lex_unescape(&ar, in, strlen(in), 0, &out, &n, &err), -1);
    in = "\\U00110000";
    assert_int_equal(lex_unescape(&ar, in, strlen(in), 0, &out, &n, &err), -1);
    in = "\xc3\xa9";
    assert_int_equal(lex_unescape(&ar, in, strlen(in), STRF_BYTES, &out, &n, &err), -1);
    ast_arena_free(&ar);
}

static ast_node *parse(ast_arena *ar, const char *s)
{
    ast_node *root = NULL;
    fps_err err;
    int rc = parser_parse(ar, s, strlen(s), &root, &err, NULL);
    return rc == 0 ? root->a : NULL;
}

/* The operator structure of a parsed expression as text: BinOp, UnaryOp,
 * BoolOp and Compare as (Op x y ...), a Name as itself, anything else "?". */
static void shape(const ast_node *x, char *out, size_t cap)
{
    size_t n = strlen(out);
    switch (x->kind) {
    case AST_Name:
        snprintf(out + n, cap - n, "%s", x->str);
        return;
    case AST_BinOp:
        snprintf(out + n, cap - n, "(%s ", ast_op_name(x->op));
        shape(x->a, out, cap);
        strncat(out, " ", cap - strlen(out) - 1);
        shape(x->b, out, cap);
        break;
    case AST_UnaryOp:
        snprintf(out + n, cap - n, "(%s ", ast_op_name(x->op));
        shape(x->a, out, cap);
        break;
    case AST_BoolOp:
        snprintf(out + n, cap - n, "(%s", ast_op_name(x->op));
        for (uint32_t i = 0; i < x->n; i++) {
            strncat(out, " ", cap - strlen(out) - 1);
            shape(x->items[i], out, cap);
        }
        break;
    case AST_Compare:
        strncat(out, "(", cap - n - 1);
        shape(x->a, out, cap);
        for (uint32_t i = 0; i < x->n; i++) {
            n = strlen(out);
            snprintf(out + n, cap - n, " %s ", ast_op_name(x->ops[i]));
            shape(x->items[i], out, cap);
        }
        break;
    default:
        strncat(out, "?", cap - n - 1);
        return;
    }
    strncat(out, ")", cap - strlen(out) - 1);
}

/* Every level of the operator ladder (docs/LANGUAGE.md: CPython 3.11's
 * grammar), lowest first: or, and, not, comparisons (chained), |, ^, &,
 * shifts, + -, * / // % @, prefix + - ~, and ** (right-associative, binding
 * tighter than a prefix on its left). */
static void test_parser_precedence(void **state)
{
    (void)state;
    static const struct {
        const char *src, *want;
    } cases[] = {
        {"a or b and not c < d | e ^ f & g << h + i * -j ** k",
         "(Or a (And b (Not (c Lt (BitOr d (BitXor e (BitAnd f (LShift g (Add h (Mult i (USub "
         "(Pow j k))))))))))))"},
        {"a ** -b * c + d << e & f ^ g | h == i and j or k",
         "(Or (And ((BitOr (BitXor (BitAnd (LShift (Add (Mult (Pow a (USub b)) c) d) e) f) g) h) "
         "Eq i) j) k)"},
        {"a - b - c", "(Sub (Sub a b) c)"},
        {"a * b @ c // d % e / f", "(Div (Mod (FloorDiv (MatMult (Mult a b) c) d) e) f)"},
        {"a << b >> c", "(RShift (LShift a b) c)"},
        {"a | b | c ^ d", "(BitOr (BitOr a b) (BitXor c d))"},
        {"a ** b ** c", "(Pow a (Pow b c))"},
        {"-a ** -b ** ~c", "(USub (Pow a (USub (Pow b (Invert c)))))"},
        {"- + ~a", "(USub (UAdd (Invert a)))"},
        {"not not a == b", "(Not (Not (a Eq b)))"},
        {"not a and not b", "(And (Not a) (Not b))"},
        {"a and b or c and d or e", "(Or (And a b) (And c d) e)"},
        {"a or b and c or d", "(Or a (And b c) d)"},
        {"a | b < c | d is not e not in f", "((BitOr a b) Lt (BitOr c d) IsNot e NotIn f)"},
        {"(a < b) < c", "((a Lt b) Lt c)"},
        {"a < (b < c)", "(a Lt (b Lt c))"},
        {"a in b == c is d", "(a In b Eq c Is d)"},
    };
    ast_arena ar;
    ast_arena_init(&ar, 0);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ast_node *x = parse(&ar, cases[i].src);
        assert_non_null(x);
        char got[512] = "";
        shape(x, got, sizeof got);
        assert_string_equal(got, cases[i].want);
    }
    /* a prefix 'not' is an operand only where a comparison may stand */
    const char *bad[] = {"a < not b", "a * not b", "a | not b", "a not b", "a is not not b",
                         "not in b",  "a +",       "a or",      "not",     "a < < b",
                         "a ** not b"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_null(parse(&ar, bad[i]));
    ast_arena_free(&ar);
}

static void test_parser_shapes(void **state)
{
    (void)state;
    ast_arena ar;
    ast_arena_init(&ar, 0);
    /* -2**-2 == UnaryOp(USub, BinOp(2, Pow, UnaryOp(USub, 2))) */
    ast_node *x = parse(&ar, "-2**-2");
    assert_non_null(x);
    assert_int_equal(x->kind, AST_UnaryOp);
    assert_int_equal(x->op, OPK_USub);
    assert_int_equal(x->a->kind, AST_BinOp);
    assert_int_equal(x->a->op, OPK_Pow);
    assert_int_equal(x->a->b->kind, AST_UnaryOp);
    /* right associativity: 2**3**2 */
    x = parse(&ar, "2**3**2");
    assert_int_equal(x->b->kind, AST_BinOp);
    /* chained comparison is one Compare */
    x = parse(&ar, "a < b <= c not in d is not e");
    assert_int_equal(x->kind, AST_Compare);
    assert_int_equal(x->n, 4);
    assert_int_equal(x->ops[2], OPK_NotIn);
    assert_int_equal(x->ops[3], OPK_IsNot);
    /* conditional chains nest in orelse */
    x = parse(&ar, "a if b else c if d else e");
    assert_int_equal(x->kind, AST_IfExp);
    assert_int_equal(x->c->kind, AST_IfExp);
    /* BoolOp is flat */
    x = parse(&ar, "a or b or c and d");
    assert_int_equal(x->kind, AST_BoolOp);
    assert_int_equal(x->n, 3);
    /* comprehension with tuple target in Store context and two ifs */
    x = parse(&ar, "[k for k, v in d if k if v for z in k]");
    assert_int_equal(x->kind, AST_ListComp);
    assert_int_equal(x->n, 2);
    assert_int_equal(x->items[0]->a->kind, AST_Tuple);
    assert_int_equal(x->items[0]->a->ctx, CTX_STORE);
    assert_int_equal(x->items[0]->n, 2);
    /* call with keyword and ** */
    x = parse(&ar, "f(1, k=2, **m)");
    assert_int_equal(x->kind, AST_Call);
    assert_int_equal(x->n, 1);
    assert_int_equal(x->n2, 2);
    assert_null(x->items2[1]->str);
    /* f-strings: debug text, conversion, nested format spec */
    x = parse(&ar, "f'a{x=}b{y!r:>{w}}'");
    assert_int_equal(x->kind, AST_JoinedStr);
    assert_int_equal(x->n, 4);
    assert_string_equal(x->items[0]->str, "ax=");
    assert_int_equal(x->items[1]->op, 'r');
    assert_int_equal(x->items[3]->op, 'r');
    assert_int_equal(x->items[3]->b->kind, AST_JoinedStr);
    assert_int_equal(x->items[3]->b->n, 2);
    x = parse(&ar, "f'{x:}'");
    assert_int_equal(x->items[0]->b->n, 0);
    x = parse(&ar, "f'{{}}'");
    assert_string_equal(x->items[0]->str, "{}");
    /* slices and tuples in subscripts */
    x = parse(&ar, "x[1:2, ::3]");
    assert_int_equal(x->b->kind, AST_Tuple);
    assert_int_equal(x->b->items[1]->kind, AST_Slice);
    /* string concatenation and bytes */
    x = parse(&ar, "'a' \"b\" '''c'''");
    assert_int_equal(x->op, CONST_STR);
    assert_string_equal(x->str, "abc");
    x = parse(&ar, "1_000_000");
    assert_int_equal(x->op, CONST_INT);
    assert_string_equal(x->str, "1000000");
    /* rejected syntax */
    const char *bad[] = {"x := 1",
                         "*a, b",
                         "f(x for x in y, 1)",
                         "f(a=1, b)",
                         "f(**a, *b)",
                         "lambda x=1, y: 1",
                         "lambda *: 1",
                         "[x for x in y, z]",
                         "'a' b'b'",
                         "f'{x!z}'",
                         "f'{ }'",
                         "f'}'",
                         "f'{x:{y:{z}}}'",
                         "f'{*x}'",
                         "1;2",
                         "1\n2",
                         " 1",
                         "print 'x'",
                         "await await x",
                         "x[]",
                         "f(True=1)",
                         "[1 for f() in y]"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_null(parse(&ar, bad[i]));
    ast_arena_free(&ar);
}

static void test_checker_messages(void **state)
{
    (void)state;
    EXPECT("", "evaluator_source must not be empty");
    EXPECT(" \t\n\xe3\x80\x80", "evaluator_source must not be empty");
    assert_string_equal(chkc("  "), "condition_source must not be empty");
    EXPECT("1 +", "evaluator_source must be one expression");
    EXPECT("1\n2", "evaluator_source must be one expression");
    assert_string_equal(chkc("x = 1"), "condition_source must be one expression");
    EXPECT("lambda: 1", "evaluator_source contains disallowed syntax: Lambda");
    EXPECT("(x for x in y)", "evaluator_source contains disallowed syntax: GeneratorExp");
    EXPECT("sum(x for x in y)", "evaluator_source contains disallowed syntax: GeneratorExp");
    EXPECT("(x := 1)", "evaluator_source contains disallowed syntax: NamedExpr");
    EXPECT("[*a]", "evaluator_source contains disallowed syntax: Starred");
    EXPECT("f(*a)", "evaluator_source contains disallowed syntax: Starred");
    EXPECT("await x", "evaluator_source contains disallowed syntax: Await");
    EXPECT("(yield)", "evaluator_source contains disallowed syntax: Yield");
    EXPECT("1 | 2", "evaluator_source contains disallowed syntax: BitOr");
    EXPECT("1 & 2", "evaluator_source contains disallowed syntax: BitAnd");
    EXPECT("1 ^ 2", "evaluator_source contains disallowed syntax: BitXor");
    EXPECT("1 << 2", "evaluator_source contains disallowed syntax: LShift");
    EXPECT("1 >> 2", "evaluator_source contains disallowed syntax: RShift");
    EXPECT("a @ b", "evaluator_source contains disallowed syntax: MatMult");
    EXPECT("~1", "evaluator_source contains disallowed syntax: Invert");
    EXPECT("2 ** 65", "evaluator_source exponent must be an integer constant in 0..64");
    EXPECT("2 ** -1", "evaluator_source exponent must be an integer constant in 0..64");
    EXPECT("2 ** True", "evaluator_source exponent must be an integer constant in 0..64");
    EXPECT("2 ** x", "evaluator_source exponent must be an integer constant in 0..64");
    EXPECT("2 ** 2.0", "evaluator_source exponent must be an integer constant in 0..64");
    EXPECT("2 ** 64 + 2 ** 0 + 2 ** 0x40", "OK");
    EXPECT("x.__class__", "evaluator_source may not access private or dunder attributes");
    EXPECT("x._y", "evaluator_source may not access private or dunder attributes");
    EXPECT("'{}'.format(1)", "evaluator_source may not access attribute 'format'");
    EXPECT("x.gi_frame", "evaluator_source may not access attribute 'gi_frame'");
    EXPECT("str(x.lower)",
           "evaluator_source may reference method 'lower' only to call it; a bare bound method "
           "leaks a heap address when stringified");
    EXPECT("_x", "evaluator_source may not access private names");
    EXPECT("__import__('os')", "evaluator_source may not access private names");
    EXPECT("[1 for x.count in y]",
           "evaluator_source may reference method 'count' only to call it; a bare bound method "
           "leaks a heap address when stringified");
    EXPECT("f(a=1, a=2)", "evaluator_source must be one expression");
    EXPECT("[x async for x in y]", "evaluator_source must be one expression");
    EXPECT("EvalResult(score=Score(len(session.events_of_type('tool_use')) / 10))", "OK");
    EXPECT("f'{x!r:>{w}}' + '%s' % (y,)", "OK");
    EXPECT("{**a, 'b': [k for k, v in d.items() if v]}", "OK");
    EXPECT("enumerate(x)", "OK"); /* NameError at run time, not a compile error */
    /* precedence: breadth-first, first violation wins */
    EXPECT("[_a, lambda: 1]", "evaluator_source may not access private names");
    EXPECT("[[_a], lambda: 1]", "evaluator_source contains disallowed syntax: Lambda");
    EXPECT("f(x.foo)(lambda: 1)", "evaluator_source contains disallowed syntax: Lambda");
    EXPECT("_x + x.foo", "evaluator_source may not access private names");
    EXPECT("x.foo + _x", "evaluator_source may not access attribute 'foo'");
    EXPECT("x.foo.__y", "evaluator_source may not access private or dunder attributes");
    /* size limits */
    char *big = malloc(131073);
    memset(big, 'x', 131073);
    assert_string_equal(chk_kind(LANG_EVALUATOR, big, 131073),
                        "evaluator_source exceeds 131072 bytes");
    assert_string_equal(chk_kind(LANG_CONDITION, big, 16385),
                        "condition_source exceeds 16384 bytes");
    assert_string_equal(chk_kind(LANG_CONDITION, big, 16384), "OK");
    free(big);
}

/* "[1, 1, ...]" with n elements: Expression + List + n Constants + Load. */
static void test_node_counting(void **state)
{
    (void)state;
    strbuf b;
    strbuf_init(&b);
    for (int n = 4996; n <= 4998; n++) {
        strbuf_reset(&b);
        strbuf_putc(&b, '[');
        for (int i = 0; i < n; i++)
            strbuf_puts(&b, i ? ",1" : "1");
        strbuf_putc(&b, ']');
        assert_string_equal(chk(b.data), n + 3 <= 5000
                                             ? "OK"
                                             : "evaluator_source is too large (5000-node ceiling)");
    }
    /* Names count their Load context, breadth-first: in [x, ..., [lambda: 1]]
     * the Lambda is node 2 + n + 2 (level 2) + n + 1 = 2n + 5. */
    for (int n = 2497; n <= 2498; n++) {
        strbuf_reset(&b);
        strbuf_putc(&b, '[');
        for (int i = 0; i < n; i++)
            strbuf_puts(&b, i ? ",x" : "x");
        strbuf_puts(&b, ", [lambda: 1]]");
        assert_string_equal(chk(b.data), 2 * n + 5 <= 5000
                                             ? "evaluator_source contains disallowed syntax: Lambda"
                                             : "evaluator_source is too large (5000-node ceiling)");
    }
    /* operator nodes count: x==1==1...: Expression Compare Name k*Eq k*Constant Load */
    for (int k = 2498; k <= 2499; k++) {
        strbuf_reset(&b);
        strbuf_puts(&b, "x");
        for (int i = 0; i < k; i++)
            strbuf_puts(&b, "==1");
        assert_string_equal(chk(b.data), 2 * k + 4 <= 5000
                                             ? "OK"
                                             : "evaluator_source is too large (5000-node ceiling)");
    }
    strbuf_free(&b);
}

static char *repeat(const char *unit, size_t n, const char *tail)
{
    size_t u = strlen(unit), t = strlen(tail);
    char *s = malloc(u * n + t + 1);
    /* The units are copied unterminated on purpose: the tail copy writes the NUL. */
    for (size_t i = 0; i < n; i++)
        memcpy(s + i * u, unit, u); /* NOLINT(bugprone-not-null-terminated-result) */
    memcpy(s + u * n, tail, t + 1);
    return s;
}

static void test_adversarial(void **state)
{
    (void)state;
    const char *one = "evaluator_source must be one expression";
    char *s = repeat("(", 100000, "");
    assert_string_equal(chk(s), one);
    free(s);
    s = repeat("[", 100000, "");
    assert_string_equal(chk_kind(LANG_EVALUATOR, s, 100000), one);
    free(s);
    s = repeat("-", 200000, "1"); /* larger than 128 KiB: size rule first */
    assert_string_equal(chk(s), "evaluator_source exceeds 131072 bytes");
    free(s);
    s = repeat("-", 130000, "1");
    assert_string_equal(chk(s), one);
    free(s);
    s = repeat("not ", 30000, "1");
    assert_string_equal(chk(s), one);
    free(s);
    s = repeat("(", 200, "1");
    char *t = repeat(")", 200, "");
    strbuf b;
    strbuf_init(&b);
    strbuf_puts(&b, s);
    strbuf_puts(&b, t);
    assert_string_equal(chk(b.data), "OK"); /* 200 levels: CPython's limit */
    strbuf_reset(&b);
    strbuf_puts(&b, "(");
    strbuf_puts(&b, s);
    strbuf_puts(&b, t);
    strbuf_puts(&b, ")");
    assert_string_equal(chk(b.data), one);
    free(s);
    free(t);
    /* deep but small trees: ast.parse accepts, compile() overflows */
    s = repeat("()", 990, "");
    strbuf_reset(&b);
    strbuf_printf(&b, "f%s", s);
    assert_string_equal(chk(b.data), "OK");
    free(s);
    s = repeat("()", 1200, "");
    strbuf_reset(&b);
    strbuf_printf(&b, "f%s", s);
    assert_string_equal(chk(b.data), one);
    free(s);
    s = repeat("()", 40000, "");
    strbuf_reset(&b);
    strbuf_printf(&b, "f%s", s);
    assert_string_equal(chk(b.data), one);
    free(s);
    s = repeat("lambda:", 10000, "1");
    assert_string_equal(chk(s), one);
    free(s);
    s = repeat("1 if 1 else ", 10000, "1");
    assert_string_equal(chk(s), one);
    free(s);
    s = repeat("x.events", 1, "");
    free(s);
    strbuf_free(&b);
    /* invalid UTF-8, NUL bytes, lone surrogates encoded as UTF-8 */
    assert_string_equal(chk_kind(LANG_EVALUATOR, "'\xff'", 3), one);
    assert_string_equal(chk_kind(LANG_EVALUATOR, "1\0", 2), one);
    assert_string_equal(chk_kind(LANG_EVALUATOR, "\0", 1), one);
    assert_string_equal(chk_kind(LANG_EVALUATOR, "'\xed\xa0\x80'", 5), one);
    assert_string_equal(chk_kind(LANG_EVALUATOR, "\xc3", 1), one);
    /* 128 KiB of assorted junk and of a valid but huge flat expression */
    char *junk = malloc(131072);
    uint32_t r = 12345;
    for (size_t i = 0; i < 131072; i++) {
        r = r * 1103515245u + 12345u;
        junk[i] = "([{)]}'\"\\+-*/x1 .,:\n#f"[(r >> 16) % 23];
    }
    const char *m = chk_kind(LANG_EVALUATOR, junk, 131072);
    assert_true(strstr(m, "evaluator_source") == m);
    for (size_t i = 0; i < 131072; i++)
        junk[i] = (char)(r = r * 1103515245u + 12345u) >> 3;
    m = chk_kind(LANG_EVALUATOR, junk, 131072);
    assert_true(strstr(m, "evaluator_source") == m);
    /* 65536-deep BinOp chain: CPython's ast.parse raises RecursionError */
    for (size_t i = 0; i + 1 < 131072; i += 2)
        junk[i] = '1', junk[i + 1] = '+';
    junk[131071] = '1';
    assert_string_equal(chk_kind(LANG_EVALUATOR, junk, 131072), one);
    /* flat: [1,1,...] */
    junk[0] = '[';
    for (size_t i = 1; i + 1 < 131071; i += 2)
        junk[i] = '1', junk[i + 1] = ',';
    junk[131070] = '1';
    junk[131071] = ']';
    assert_string_equal(chk_kind(LANG_EVALUATOR, junk, 131072),
                        "evaluator_source is too large (5000-node ceiling)");
    /* 131072 quotes: empty triple-quoted strings and a final '' (valid) */
    memset(junk, '\'', 131072);
    assert_string_equal(chk_kind(LANG_EVALUATOR, junk, 131072), "OK");
    memset(junk, '\'', 131071);
    assert_string_equal(chk_kind(LANG_EVALUATOR, junk, 131071), one);
    free(junk);
}

static void expect_eval(lang_kind k, const char *src, const char *want)
{
    char *out = lang_eval(k, src, strlen(src), "q", NULL, 0, NULL);
    assert_non_null(out);
    assert_string_equal(out, want);
    free(out);
}

static void test_eval_outcomes(void **state)
{
    (void)state;
    const lang_kind R = LANG_RAW;
    expect_eval(R, "[y for x in [1, 2] for y in [x, x * 10] if y != 2]",
                "{\"ok\": true, \"repr\": \"[1, 10, 20]\"}");
    expect_eval(R, "{k: v for k, (v, w) in [(1, (2, 3)), (4, (5, 6))]}",
                "{\"ok\": true, \"repr\": \"{1: 2, 4: 5}\"}");
    expect_eval(R, "[[x for y in [1]] for x in [1, 2]]",
                "{\"ok\": true, \"repr\": \"[[1], [2]]\"}");
    expect_eval(R, "[x for x in [1]] + [x for x in [2]]", "{\"ok\": true, \"repr\": \"[1, 2]\"}");
    /* a comprehension's own names are unbound before assignment */
    expect_eval(R, "[y for x in [1] if y for y in [2]]",
                "{\"ok\": false, \"stage\": \"runtime\", \"error_type\": \"UnboundLocalError\"}");
    expect_eval(R, "[a for a, b in [(1, 2, 3)]]",
                "{\"ok\": false, \"stage\": \"runtime\", \"error_type\": \"ValueError\"}");
    expect_eval(R, "[a for a, b in [1]]",
                "{\"ok\": false, \"stage\": \"runtime\", \"error_type\": \"TypeError\"}");
    /* difference's copy-and-discard path rebuilds a table more than a quarter
     * dummies, as CPython does: that decides the result's order */
    expect_eval(R, "set(range(-3, 10)).difference(range(28))",
                "{\"ok\": true, \"repr\": \"{-2, -3, -1}\"}");
    expect_eval(R, "set(range(-3, 10)).difference([5, 6, 7, 8, 9, 0, 1, 2, 3, 4])",
                "{\"ok\": true, \"repr\": \"{-2, -3, -1}\"}");
    expect_eval(
        R, "{926, 374, 16, 998, 748}.symmetric_difference(range(165)).difference(range(157))",
        "{\"ok\": true, \"repr\": \"{157, 158, 159, 160, 161, 162, 163, 164, 926, 998, 748, "
        "374}\"}");
    /* no session image: `session` is not defined; unknown names are NameError */
    expect_eval(R, "session",
                "{\"ok\": false, \"stage\": \"runtime\", \"error_type\": \"NameError\"}");
    expect_eval(R, "enumerate([1])",
                "{\"ok\": false, \"stage\": \"runtime\", \"error_type\": \"NameError\"}");
    /* and/or return operands and short-circuit; chains short-circuit */
    expect_eval(R, "(0 or '' or 'x') + (1 and 'y')", "{\"ok\": true, \"repr\": \"'xy'\"}");
    expect_eval(R, "0 and undefined_name", "{\"ok\": true, \"repr\": \"0\"}");
    expect_eval(R, "2 > 3 < 'a'", "{\"ok\": true, \"repr\": \"False\"}");
    expect_eval(R, "1 < 'a' < 3",
                "{\"ok\": false, \"stage\": \"runtime\", \"error_type\": \"TypeError\"}");
    /* method looked up before its arguments are evaluated */
    expect_eval(R, "(1).lower(undefined_name)",
                "{\"ok\": false, \"stage\": \"runtime\", \"error_type\": \"AttributeError\"}");
    /* f-strings: debug text, conversions, nested spec evaluated before the conversion */
    expect_eval(R, "f'{1 + 1 = }|{\"a\"!r:>5}|{3.5:{\"^\"}{7}}'",
                "{\"ok\": true, \"repr\": \"\\\"1 + 1 = 2|  'a'|  3.5  \\\"\"}");
    /* keyword arguments and ** unpacking */
    expect_eval(R, "sorted([3, 1, 2], **{'reverse': True})",
                "{\"ok\": true, \"repr\": \"[3, 2, 1]\"}");
    expect_eval(R, "sorted([3, 1], reverse=True, **{'reverse': True})",
                "{\"ok\": false, \"stage\": \"runtime\", \"error_type\": \"TypeError\"}");
    expect_eval(R, "{**{1: 2}, 3: 4, **{1: 5}}", "{\"ok\": true, \"repr\": \"{1: 5, 3: 4}\"}");
    /* constant set displays iterate as CPython's folded frozenset */
    expect_eval(R, "{-5, 5, 13, 21}", "{\"ok\": true, \"repr\": \"{5, 13, -5, 21}\"}");
    /* outcome kinds */
    expect_eval(LANG_CONDITION, "1 < 2", "{\"ok\": true, \"applicable\": true}");
    expect_eval(LANG_CONDITION, "1",
                "{\"ok\": false, \"stage\": \"runtime\", \"error_type\": \"TypeError\"}");
    expect_eval(LANG_EVALUATOR, "1",
                "{\"ok\": false, \"stage\": \"runtime\", \"error_type\": \"TypeError\"}");
    expect_eval(LANG_EVALUATOR, "lambda: 1",
                "{\"ok\": false, \"stage\": \"compile\", \"message\": \"evaluator_source contains "
                "disallowed syntax: Lambda\"}");
    lang_limits lim = {.max_steps = 1000};
    const char *bomb = "len([x for x in range(10**6)])";
    char *out = lang_eval(R, bomb, strlen(bomb), "q", NULL, 0, &lim);
    assert_string_equal(out, "{\"ok\": false, \"stage\": \"limit\", \"error_type\": \"steps\"}");
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lexer_tokens),     cmocka_unit_test(test_lexer_unescape),
        cmocka_unit_test(test_parser_shapes),    cmocka_unit_test(test_parser_precedence),
        cmocka_unit_test(test_checker_messages), cmocka_unit_test(test_node_counting),
        cmocka_unit_test(test_adversarial),      cmocka_unit_test(test_eval_outcomes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
