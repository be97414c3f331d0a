/* tests/unit/test_lang_values: the value runtime (sandbox/lang/value.h) against
 * CPython 3.11's behaviour: float repr, big ints, division/modulo signs,
 * Unicode string methods, format specs, % formatting, set order, result
 * type validation and wire items, and session images (simg.h), read in
 * place from a private file mapping whose pages the walk drops. Expected
 * strings were produced with CPython 3.11. */
#include "common/strbuf.h"
#include "sandbox/lang/lang.h"
#include "sandbox/lang/simg.h"
#include "sandbox/lang/siphash.h"
#include "sandbox/lang/value.h"

#include <gc/gc.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

static vctx *C;

static int setup(void **state)
{
    (void)state;
    C = vctx_new(NULL, NULL, 0);
    return C ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    vctx_free(C);
    return 0;
}

static val *S(const char *s)
{
    return v_strz(C, s);
}
static val *I(int64_t i)
{
    return v_int64(C, i);
}
static val *F(double d)
{
    return v_float(C, d);
}

/* repr of v as a NUL-terminated string in the arena */
static const char *R(val *v)
{
    assert_non_null(v);
    val *r = v_repr(C, v);
    assert_non_null(r);
    return v_strdup(C, r->u.s.s, r->u.s.blen);
}

static void expect_exc(val *r, const char *type)
{
    assert_null(r);
    assert_true(v_failed(C));
    assert_string_equal(v_exc_type(C), type);
    v_exc_clear(C);
}

static val *M(val *recv, const char *name, int n, ...)
{
    val *args[8];
    va_list ap;
    va_start(ap, n);
    for (int i = 0; i < n; i++)
        args[i] = va_arg(ap, val *); // NOLINT(clang-analyzer-valist.Uninitialized): va_start above
    va_end(ap);
    return v_call_method(C, recv, name, args, (size_t)n, NULL, 0);
}

static val *call(const char *fn, int n, val **args, const vkwarg *kw, size_t nkw)
{
    val *f = v_builtin_lookup(fn);
    assert_non_null(f);
    return v_call(C, f, args, (size_t)n, kw, nkw);
}

static void test_float_repr(void **state)
{
    (void)state;
    assert_string_equal(R(F(1e16)), "1e+16");
    assert_string_equal(R(F(1e15)), "1000000000000000.0");
    assert_string_equal(R(v_binop(C, BIN_ADD, F(0.1), F(0.2))), "0.30000000000000004");
    assert_string_equal(R(F(-0.0)), "-0.0");
    assert_string_equal(R(F(INFINITY)), "inf");
    assert_string_equal(R(F(-INFINITY)), "-inf");
    assert_string_equal(R(F(NAN)), "nan");
    assert_string_equal(R(F(0.0001)), "0.0001");
    assert_string_equal(R(F(0.00001)), "1e-05");
    assert_string_equal(R(F(5e-324)), "5e-324");
    assert_string_equal(R(F(ldexp(1.0, -44))), "5.684341886080802e-14");
    assert_string_equal(R(F(1.7976931348623157e308)), "1.7976931348623157e+308");
    assert_string_equal(R(F(123456789.0)), "123456789.0");
}

static void test_ints(void **state)
{
    (void)state;
    val *two = I(2);
    val *p = v_binop(C, BIN_POW, two, I(64));
    assert_string_equal(R(p), "18446744073709551616");
    val *q = v_binop(C, BIN_POW, I(10), I(40));
    assert_string_equal(R(v_binop(C, BIN_FLOORDIV, q, I(-7))),
                        "-1428571428571428571428571428571428571429");
    assert_string_equal(R(v_binop(C, BIN_MOD, q, I(-7))), "-3");
    assert_string_equal(R(v_binop(C, BIN_FLOORDIV, I(7), I(-2))), "-4");
    assert_string_equal(R(v_binop(C, BIN_MOD, I(-7), I(3))), "2");
    assert_string_equal(R(v_binop(C, BIN_MOD, I(7), I(-3))), "-2");
    assert_string_equal(R(v_binop(C, BIN_MOD, F(-7.5), I(2))), "0.5");
    assert_string_equal(R(v_binop(C, BIN_FLOORDIV, F(-7.5), I(2))), "-4.0");
    assert_string_equal(R(v_binop(C, BIN_MOD, F(7.0), F(-0.0 - 3.0))), "-2.0");
    assert_string_equal(R(v_binop(C, BIN_DIV, I(1), I(3))), "0.3333333333333333");
    /* correctly rounded big int true division */
    assert_string_equal(R(v_binop(C, BIN_DIV, v_binop(C, BIN_POW, I(10), I(30)), I(3))),
                        "3.333333333333333e+29");
    assert_string_equal(R(v_binop(C, BIN_ADD, v_true(), v_true())), "2");
    expect_exc(v_binop(C, BIN_DIV, I(1), I(0)), "ZeroDivisionError");
    expect_exc(v_binop(C, BIN_MOD, F(1.0), F(0.0)), "ZeroDivisionError");
    /* int == float exactly; hash(1) == hash(1.0) == hash(True) */
    assert_int_equal(v_eq(C, p, F(18446744073709551616.0)), 1);
    assert_int_equal(v_eq(C, v_binop(C, BIN_ADD, p, I(1)), F(18446744073709551616.0)), 0);
    int64_t h1, h2, h3;
    assert_int_equal(v_hash(C, I(1), &h1), 0);
    assert_int_equal(v_hash(C, F(1.0), &h2), 0);
    assert_int_equal(v_hash(C, v_true(), &h3), 0);
    assert_true(h1 == h2 && h2 == h3);
    assert_int_equal(v_hash(C, I(-1), &h1), 0);
    assert_true(h1 == -2);
    /* int(str) and the 4300-digit limit */
    val *a[2] = {S("  -0x_ff "), I(0)};
    assert_string_equal(R(call("int", 2, a, NULL, 0)), "-255");
    a[0] = S("1_000");
    assert_string_equal(R(call("int", 1, a, NULL, 0)), "1000");
    a[0] = S("1__0");
    expect_exc(call("int", 1, a, NULL, 0), "ValueError");
    char big[4400];
    memset(big, '7', 4301);
    big[4301] = 0;
    a[0] = S(big);
    expect_exc(call("int", 1, a, NULL, 0), "ValueError");
    a[0] = F(-3.99);
    assert_string_equal(R(call("int", 1, a, NULL, 0)), "-3");
}

/* Ints inside VTAG_MIN..VTAG_MAX are tagged words, the rest boxed: results
 * cross the edge in both directions with the same values, hashes, order and
 * identity rules as one int type. */
static void test_tagged_int_edges(void **state)
{
    (void)state;
    val *max = I(VTAG_MAX), *min = I(VTAG_MIN);
    assert_true(v_is_tagged(max) && v_is_tagged(min) && v_is_int(max));
    val *up = v_binop(C, BIN_ADD, max, I(1));
    assert_false(v_is_tagged(up));
    assert_string_equal(R(up), "4611686018427387904");
    assert_int_equal(v_eq(C, up, v_binop(C, BIN_POW, I(2), I(62))), 1);
    assert_true(v_is_tagged(v_binop(C, BIN_SUB, up, I(1))));
    assert_string_equal(R(v_unop(C, UN_NEG, min)), "4611686018427387904");
    assert_string_equal(R(v_binop(C, BIN_SUB, min, I(1))), "-4611686018427387905");
    assert_string_equal(R(v_binop(C, BIN_MUL, max, I(4))), "18446744073709551612");
    assert_string_equal(R(v_binop(C, BIN_ADD, I(INT64_MAX), I(1))), "9223372036854775808");
    int64_t x = 0;
    assert_true(v_as_i64(up, &x) && x == VTAG_MAX + 1);
    assert_true(v_as_i64(min, &x) && x == VTAG_MIN);
    /* CPython: hash(2**61 - 1) == 0, hash(2**62) == 2, hash(-2**62) == -2 */
    int64_t h = 1;
    assert_int_equal(v_hash(C, v_binop(C, BIN_SUB, v_binop(C, BIN_POW, I(2), I(61)), I(1)), &h), 0);
    assert_true(h == 0);
    assert_int_equal(v_hash(C, up, &h), 0);
    assert_true(h == 2);
    assert_int_equal(v_hash(C, min, &h), 0);
    assert_true(h == -2);
    /* order across the edge, and sorting a mix */
    assert_int_equal(v_compare(C, CMP_LT, max, up), 1);
    assert_int_equal(v_compare(C, CMP_GT, min, v_binop(C, BIN_SUB, min, I(1))), 1);
    val *items[5] = {up, I(-5), v_binop(C, BIN_SUB, min, I(1)), max, I(3000)};
    val *lst = v_list(C, items, 5);
    assert_string_equal(
        R(call("sorted", 1, &lst, NULL, 0)),
        "[-4611686018427387905, -5, 3000, 4611686018427387903, 4611686018427387904]");
    val *sum_args[1] = {lst};
    assert_string_equal(R(call("sum", 1, sum_args, NULL, 0)), "4611686018427390897");
    /* a set/dict key is found whichever representation built it */
    val *set = v_set_new(C, 0);
    assert_int_equal(v_set_add(C, set, up), 0);
    assert_int_equal(v_set_contains(C, set, v_binop(C, BIN_ADD, max, I(1))), 1);
    assert_int_equal(v_set_contains(C, set, F(4611686018427387904.0)), 1);
    /* an int equals itself by identity; True is not the int 1 */
    assert_true(v_is(I(100000), I(100000)));
    assert_false(v_is(v_true(), I(1)));
    assert_string_equal(v_type_name(I(7)), "int");
    assert_false(v_truthy(I(0)));
    assert_true(v_truthy(min));
}

/* v_alloc hands out zeroed memory: blocks come from the collector's
 * per-size lists, which it clears when it sweeps or takes fresh memory;
 * v_alloc clears only the link word. Dirty every block, drop it (a small
 * block is never freed explicitly: v_free), collect, and allocate again. */
static void test_alloc_zeroed(void **state)
{
    (void)state;
    for (int round = 0; round < 4; round++) {
        for (size_t i = 0; i < 20000; i++) {
            size_t size = 8 * (1 + i % 8);
            unsigned char *p = v_alloc(C, size);
            assert_non_null(p);
            for (size_t k = 0; k < size; k++)
                assert_int_equal(p[k], 0);
            memset(p, 0xAB, size);
        }
        GC_gcollect();
    }
}

/* A block's last word is scanned: v_alloc and a list's item array are
 * blocks of exactly the size asked for, with no padding after them (the
 * collector's own kind would not scan that word), so a value stored only
 * there must survive a collection. Fill each last word with a fresh float,
 * collect, allocate floats again (reusing whatever was reclaimed), check. */
static void test_alloc_last_word_scanned(void **state)
{
    (void)state;
    enum { SMALL = 127, NBLOCKS = SMALL + 4 };
    static const size_t large[] = {2048, 4096, 8000, 1 << 16};
    val ***blocks = v_alloc(C, NBLOCKS * sizeof *blocks);
    assert_non_null(blocks);
    for (size_t i = 0; i < NBLOCKS; i++) {
        size_t size = i < SMALL ? 16 * (i + 1) : large[i - SMALL];
        size_t n = size / sizeof(val *);
        blocks[i] = v_alloc(C, size);
        assert_non_null(blocks[i]);
        blocks[i][n - 1] = F((double)i + 0.5);
        if (i % 2) { /* the item array of a list copied from the block */
            val *l = v_list(C, blocks[i], n);
            assert_non_null(l);
            blocks[i] = l->u.seq.items;
        }
    }
    GC_gcollect();
    for (int i = 0; i < 100000; i++)
        assert_non_null(F(-1.0));
    for (size_t i = 0; i < NBLOCKS; i++) {
        size_t size = i < SMALL ? 16 * (i + 1) : large[i - SMALL];
        assert_string_equal(R(blocks[i][size / sizeof(val *) - 1]), R(F((double)i + 0.5)));
    }
}

/* A pointer-free block (a str's) is handed out once: the free lists it
 * comes from are not traced, so they must not outlive a collection. Keep
 * every other string, each of its own letter and length, through
 * collections and further allocation. */
static void test_alloc_bytes_distinct(void **state)
{
    (void)state;
    enum { N = 4000 };
    static char text[2100];
    val **kept = v_alloc(C, N * sizeof *kept);
    assert_non_null(kept);
    for (int round = 0; round < 3; round++) {
        for (size_t i = 0; i < N; i++) {
            size_t len = 2 + (i * 37) % 2090;
            memset(text, 'a' + (int)(i % 26), len);
            val *v = v_str(C, text, len);
            assert_non_null(v);
            if (i % 2 == 0) kept[i] = v;
            if (i % 500 == 0) GC_gcollect();
        }
        for (size_t i = 0; i < N; i += 2) {
            size_t len = 2 + (i * 37) % 2090;
            assert_int_equal(kept[i]->u.s.blen, len);
            for (size_t k = 0; k < len; k++)
                assert_int_equal(kept[i]->u.s.s[k], 'a' + (int)(i % 26));
        }
    }
}

static void test_round(void **state)
{
    (void)state;
    val *a[2];
    a[0] = F(2.675), a[1] = I(2);
    assert_string_equal(R(call("round", 2, a, NULL, 0)), "2.67");
    a[0] = F(2.5);
    assert_string_equal(R(call("round", 1, a, NULL, 0)), "2");
    a[0] = F(3.5);
    assert_string_equal(R(call("round", 1, a, NULL, 0)), "4");
    a[0] = F(1234.5678), a[1] = I(-2);
    assert_string_equal(R(call("round", 2, a, NULL, 0)), "1200.0");
    a[0] = I(1250), a[1] = I(-2);
    assert_string_equal(R(call("round", 2, a, NULL, 0)), "1200");
    a[0] = F(-0.4);
    assert_string_equal(R(call("round", 1, a, NULL, 0)), "0");
    a[0] = F(INFINITY);
    expect_exc(call("round", 1, a, NULL, 0), "OverflowError");
    a[0] = S(" 3.5 ");
    assert_string_equal(R(call("float", 1, a, NULL, 0)), "3.5");
    a[0] = S("-Infinity");
    assert_string_equal(R(call("float", 1, a, NULL, 0)), "-inf");
    a[0] = S("1e5");
    assert_string_equal(R(call("float", 1, a, NULL, 0)), "100000.0");
    a[0] = S("1e");
    expect_exc(call("float", 1, a, NULL, 0), "ValueError");
}

static void test_strings(void **state)
{
    (void)state;
    assert_string_equal(R(M(S("ß"), "upper", 0)), "'SS'");
    assert_string_equal(R(M(S("Straße"), "casefold", 0)), "'strasse'");
    assert_string_equal(R(M(S("ΟΔΟΣ"), "lower", 0)), "'οδος'");
    assert_string_equal(R(M(S("hello wORLD"), "title", 0)), "'Hello World'");
    assert_string_equal(R(M(S("ǆemal"), "capitalize", 0)), "'ǅemal'");
    assert_int_equal(v_len(C, S("héllo")), 5);
    assert_string_equal(R(v_getitem(C, S("héllo"), I(1))), "'é'");
    assert_string_equal(R(v_getitem(C, S("héllo"), v_slice(C, NULL, NULL, I(-1)))), "'olléh'");
    assert_string_equal(R(M(S("²"), "isdigit", 0)), "True");
    assert_string_equal(R(M(S("²"), "isdecimal", 0)), "False");
    assert_string_equal(R(M(S("½"), "isnumeric", 0)), "True");
    assert_string_equal(R(M(S("Hello World"), "istitle", 0)), "True");
    assert_string_equal(R(M(S("  a b  c  "), "split", 0)), "['a', 'b', 'c']");
    vkwarg kw[1] = {{"maxsplit", I(1)}};
    assert_string_equal(R(v_call_method(C, S("  a b  c  "), "rsplit", NULL, 0, kw, 1)),
                        "['  a b', 'c']");
    assert_string_equal(R(M(S("a,b,,c"), "split", 1, S(","))), "['a', 'b', '', 'c']");
    assert_string_equal(R(M(S("a\nb\r\nc"), "splitlines", 0)), "['a', 'b', 'c']");
    assert_string_equal(R(M(S("abc"), "replace", 2, S(""), S("-"))), "'-a-b-c-'");
    assert_string_equal(R(M(S("héllo"), "find", 1, S("l"))), "2");
    assert_string_equal(R(M(S("-42"), "zfill", 1, I(6))), "'-00042'");
    assert_string_equal(R(M(S("ab"), "center", 2, I(7), S("*"))), "'***ab**'");
    assert_string_equal(R(M(S("a.b.c"), "rpartition", 1, S("."))), "('a.b', '.', 'c')");
    val *t[2] = {S("x"), S("he")};
    assert_string_equal(R(M(S("hello"), "startswith", 1, v_tuple(C, t, 2))), "True");
    assert_string_equal(R(M(S("é"), "encode", 0)), "b'\\xc3\\xa9'");
    assert_string_equal(R(M(M(S("é"), "encode", 0), "decode", 0)), "'é'");
    assert_string_equal(R(M(M(S("hi"), "encode", 0), "hex", 0)), "'6869'");
    expect_exc(M(S("abc"), "index", 1, S("z")), "ValueError");
    expect_exc(M(I(1), "lower", 0), "AttributeError");
    vkwarg rc[1] = {{"count", I(1)}};
    val *ra[2] = {S("a"), S("b")};
    expect_exc(v_call_method(C, S("aa"), "replace", ra, 2, rc, 1), "TypeError");
    /* repr quoting and escapes */
    assert_string_equal(R(S("it's")), "\"it's\"");
    assert_string_equal(R(S("a'b\"c")), "'a\\'b\"c'");
    assert_string_equal(R(S("\t\x01\xc2\x85\xe2\x80\xa8")), "'\\t\\x01\\x85\\u2028'");
    /* list/tuple/dict methods by name */
    val *l[3] = {I(1), I(2), I(1)};
    assert_string_equal(R(M(v_list(C, l, 3), "count", 1, I(1))), "2");
    val *d = v_dict_new(C, 1);
    v_dict_set(C, d, S("k"), I(5));
    assert_string_equal(R(M(d, "get", 2, S("x"), I(0))), "0");
    assert_string_equal(R(M(d, "items", 0)), "dict_items([('k', 5)])");
}

static val *fmt(val *v, const char *spec)
{
    return v_format(C, v, S(spec));
}

static void test_format(void **state)
{
    (void)state;
    assert_string_equal(R(fmt(F(3.14159), ">10.2f")), "'      3.14'");
    assert_string_equal(R(fmt(I(1234567), ",")), "'1,234,567'");
    assert_string_equal(R(fmt(I(1234), "012,")), "'0,000,001,234'");
    assert_string_equal(R(fmt(I(255), "#x")), "'0xff'");
    assert_string_equal(R(fmt(I(255), "08b")), "'11111111'");
    assert_string_equal(R(fmt(I(-42), "=+8d")), "'-     42'");
    assert_string_equal(R(fmt(I(42), ".2f")), "'42.00'");
    assert_string_equal(R(fmt(F(0.25), ".1%")), "'25.0%'");
    assert_string_equal(R(fmt(F(1234.5), ".3")), "'1.23e+03'");
    assert_string_equal(R(fmt(F(1.0), "")), "'1.0'");
    assert_string_equal(R(fmt(F(100.0), ".3")), "'1e+02'");
    assert_string_equal(R(fmt(F(1e16), " #")), "' 1.e+16'");
    assert_string_equal(R(fmt(F(-0.0), "z.1f")), "'0.0'");
    assert_string_equal(R(fmt(F(12345.678), "_.2f")), "'12_345.68'");
    assert_string_equal(R(fmt(S("ab"), "^6")), "'  ab  '");
    assert_string_equal(R(fmt(S("abcdef"), ".3")), "'abc'");
    assert_string_equal(R(fmt(I(65), "c")), "'A'");
    assert_string_equal(R(fmt(v_true(), "")), "'True'");
    assert_string_equal(R(fmt(v_true(), ">5")), "'    1'");
    expect_exc(fmt(S("ab"), "+"), "ValueError");
    expect_exc(fmt(I(1), ".2d"), "ValueError");
    expect_exc(fmt(S("abc"), ","), "ValueError");
    expect_exc(fmt(v_none(), "x"), "TypeError");
    /* printf-style */
    val *t[2] = {S("a"), F(3.14159)};
    assert_string_equal(R(v_binop(C, BIN_MOD, S("%s-%05.1f"), v_tuple(C, t, 2))), "'a-003.1'");
    assert_string_equal(R(v_binop(C, BIN_MOD, S("%d%%"), I(50))), "'50%'");
    assert_string_equal(
        R(v_binop(C, BIN_MOD, S("%x|%o|%e"), v_tuple(C, (val *[]){I(255), I(8), F(1.5)}, 3))),
        "'ff|10|1.500000e+00'");
    val *d = v_dict_new(C, 1);
    v_dict_set(C, d, S("n"), I(3));
    assert_string_equal(R(v_binop(C, BIN_MOD, S("%(n)03d"), d)), "'003'");
    expect_exc(v_binop(C, BIN_MOD, S("%s %s"), I(1)), "TypeError");
    expect_exc(v_binop(C, BIN_MOD, S("x"), I(1)), "TypeError");
    assert_string_equal(R(v_binop(C, BIN_MOD, S("ab"), v_list(C, NULL, 0))), "'ab'");
}

/* '.Nf' of floats of every magnitude, exact binary ties (2.5, 0.125) and
 * decimal-looking values (0.15, which is below its decimal) as glibc's
 * printf writes them: both round the exact binary value half to even, as
 * CPython does. */
static void test_format_fixed(void **state)
{
    (void)state;
    uint64_t r = 88172645463325252ull;
    char want[400], spec[8];
    for (int i = 0; i < 40000; i++) {
        r ^= r << 13;
        r ^= r >> 7;
        r ^= r << 17;
        double x;
        switch (i % 4) {
        case 0:
            x = ldexp((double)(r >> 11), (int)(r % 150) - 125);
            break;
        case 1:
            x = (double)(r % 100000000) / pow(10, (double)(r % 11));
            break;
        case 2:
            x = ldexp((double)(r % 4096), -(int)(r % 14));
            break;
        default: {
            uint64_t u = r & 0x7fefffffffffffffull;
            memcpy(&x, &u, sizeof x);
        }
        }
        int p = (int)((r >> 32) % 11);
        if (i % 2) x = -x;
        snprintf(spec, sizeof spec, ".%df", p);
        snprintf(want, sizeof want, "%.*f", p, x);
        val *got = fmt(F(x), spec);
        assert_non_null(got);
        if (strlen(want) < 300) assert_string_equal(v_strdup(C, got->u.s.s, got->u.s.blen), want);
    }
}

static void test_containers(void **state)
{
    (void)state;
    /* sets of ints iterate in CPython's table order */
    val *s = v_set_new(C, 0);
    v_set_add(C, s, I(100));
    v_set_add(C, s, I(5));
    v_set_add(C, s, I(33));
    assert_string_equal(R(s), "{33, 100, 5}");
    val *k[4] = {I(-5), I(5), I(13), I(21)};
    assert_string_equal(R(v_set_from_constants(C, k, 4)), "{5, 13, -5, 21}");
    val *s2 = v_set_new(C, 0);
    for (int i = 0; i < 4; i++)
        v_set_add(C, s2, k[i]);
    assert_string_equal(R(s2), "{21, 13, -5, 5}");
    assert_string_equal(R(M(s2, "intersection", 1, v_list(C, k, 2))), "{-5, 5}");
    assert_string_equal(R(v_set_new(C, 0)), "set()");
    /* slicing with steps, ranges */
    val *items[5] = {I(0), I(1), I(2), I(3), I(4)};
    val *l = v_list(C, items, 5);
    assert_string_equal(R(v_getitem(C, l, v_slice(C, I(-1), NULL, I(-2)))), "[4, 2, 0]");
    assert_string_equal(R(v_getitem(C, v_range(C, 0, 10, 1), v_slice(C, NULL, NULL, I(-1)))),
                        "range(9, -1, -1)");
    assert_int_equal(v_contains(C, v_range(C, 0, 1000000000, 7), I(700000000)), 1);
    expect_exc(v_getitem(C, l, I(5)), "IndexError");
    val *d = v_dict_new(C, 0);
    expect_exc(v_getitem(C, d, S("x")), "KeyError");
    expect_exc(v_getitem(C, d, l), "TypeError");
    /* comparisons across types */
    assert_int_equal(v_compare(C, CMP_LT, I(1), F(1.5)), 1);
    assert_int_equal(v_compare(C, CMP_EQ, l, v_tuple(C, items, 5)), 0);
    assert_int_equal(v_compare(C, CMP_LT, I(1), S("a")), -1);
    assert_string_equal(v_exc_type(C), "TypeError");
    v_exc_clear(C);
    /* sorted with key= and reverse=, min/max default */
    val *w[3] = {S("ccc"), S("a"), S("bb")};
    vkwarg kw[2] = {{"key", v_builtin_lookup("len")}, {"reverse", v_true()}};
    val *a[1] = {v_list(C, w, 3)};
    assert_string_equal(R(call("sorted", 1, a, kw, 2)), "['ccc', 'bb', 'a']");
    vkwarg dk[1] = {{"default", I(0)}};
    a[0] = v_list(C, NULL, 0);
    assert_string_equal(R(call("max", 1, a, dk, 1)), "0");
    expect_exc(call("max", 1, a, NULL, 0), "ValueError");
    val *fl[3] = {F(0.1), F(0.2), F(0.3)};
    a[0] = v_list(C, fl, 3);
    assert_string_equal(R(call("sum", 1, a, NULL, 0)), "0.6000000000000001");
    val *c1 = v_complex(C, 1.0, 2.0);
    assert_string_equal(R(v_binop(C, BIN_MUL, c1, v_complex(C, 3.0, -1.0))), "(5+5j)");
    assert_string_equal(R(v_unop(C, UN_NEG, v_complex(C, 0.0, 1.0))), "(-0-1j)");
}

static void test_results(void **state)
{
    (void)state;
    val *a[2];
    a[0] = F(0.5);
    val *sc = call("Score", 1, a, NULL, 0);
    assert_string_equal(
        R(sc), "Score(value=0.5, passed=None, unit='ratio', display_value=None, description=None)");
    a[0] = I(1);
    assert_string_equal(
        R(call("Score", 1, a, NULL, 0)),
        "Score(value=1.0, passed=None, unit='ratio', display_value=None, description=None)");
    a[0] = F(1.5);
    expect_exc(call("Score", 1, a, NULL, 0), "ValueError");
    a[0] = v_true();
    expect_exc(call("Score", 1, a, NULL, 0), "TypeError");
    a[0] = S("x");
    expect_exc(call("Metric", 1, a, NULL, 0), "TypeError");
    a[0] = F(NAN);
    expect_exc(call("Metric", 1, a, NULL, 0), "ValueError");
    a[0] = I(1);
    expect_exc(call("Assertion", 1, a, NULL, 0), "TypeError");
    a[0] = v_false(), a[1] = S("Bad-Key");
    expect_exc(call("ConditionResult", 2, a, NULL, 0), "ValueError");
    vkwarg sm[1] = {{"summary", S("a\x01b")}};
    expect_exc(call("EvalResult", 0, NULL, sm, 1), "ValueError");
    vkwarg bad[1] = {{"nope", I(1)}};
    expect_exc(call("EvalResult", 0, NULL, bad, 1), "TypeError");
    val *lab[2] = {S("b"), S("a")};
    vkwarg lk[1] = {{"labels", v_list(C, lab, 2)}};
    val *er = call("EvalResult", 0, NULL, lk, 1);
    assert_string_equal(
        R(er), "EvalResult(score=None, metrics={}, assertions={}, reasoning=None, summary=None, "
               "labels=('a', 'b'))");
    /* outcomes */
    strbuf b;
    strbuf_init(&b);
    assert_int_equal(v_evaluator_outcome(C, er, "q", &b), -1);
    assert_string_equal(v_exc_type(C), "ValueError");
    v_exc_clear(C);
    val *m = v_dict_new(C, 1);
    v_dict_set(C, m, S("q"), I(3));
    vkwarg full[3] = {{"score", sc}, {"metrics", m}, {"reasoning", S("why")}};
    er = call("EvalResult", 0, NULL, full, 3);
    assert_int_equal(v_evaluator_outcome(C, er, "q", &b), -1); /* duplicate key q */
    v_exc_clear(C);
    vkwarg two[3] = {{"score", sc}, {"metrics", m}, {"summary", S("é")}};
    er = call("EvalResult", 0, NULL, two, 3);
    strbuf_reset(&b);
    assert_int_equal(v_evaluator_outcome(C, er, "main", &b), 0);
    assert_string_equal(
        b.data,
        "\"results\": [{\"result_key\": \"main\", \"result_kind\": \"score\", \"numeric_value\": "
        "0.5, "
        "\"bool_value\": null, \"text_value\": null, \"unit\": \"ratio\", \"display_value\": null, "
        "\"description\": null, \"reasoning\": null, \"labels\": []}, {\"result_key\": \"q\", "
        "\"result_kind\": \"metric\", \"numeric_value\": 3.0, \"bool_value\": null, "
        "\"text_value\": "
        "null, \"unit\": \"\", \"display_value\": null, \"description\": null, \"reasoning\": "
        "null, "
        "\"labels\": []}], \"summary\": \"\\u00e9\"");
    strbuf_reset(&b);
    assert_int_equal(v_condition_outcome(C, v_false(), &b), 0);
    assert_string_equal(b.data, "\"applicable\": false, \"reason_code\": \"condition_false\"");
    assert_int_equal(v_condition_outcome(C, I(1), &b), -1);
    assert_string_equal(v_exc_type(C), "TypeError");
    v_exc_clear(C);
    vkwarg hexs[1] = {{"summary", S("at 0xdeadbeef")}};
    er = call("EvalResult", 0, NULL, hexs, 1);
    assert_int_equal(v_evaluator_outcome(C, er, "q", &b), -1);
    assert_string_equal(v_exc_type(C), "UnsafeEvaluatorSource");
    v_exc_clear(C);
    strbuf_free(&b);
}

static void test_session_image(void **state)
{
    (void)state;
    const char *t =
        "{\"schema_version\": \"2\", \"assignment_id\": \"a1\", \"session_id\": \"s\", "
        "\"session_revision_id\": \"r\", \"agent_id\": \"ag\", \"environment\": \"prod\", "
        "\"started_at\": \"t0\", \"ended_at\": \"t1\", \"event_count\": 2, \"events\": ["
        "{\"id\": \"e1\", \"ts\": \"t\", \"event_type\": \"tool_use\", \"payload\": {\"n\": 1, "
        "\"big\": 123456789012345678901234567890, \"f\": 1e5, \"s\": \"h\\u00e9\", \"n\": 2}},"
        "{\"id\": \"e2\", \"ts\": \"t\", \"event_type\": \"msg\", \"payload\": {\"l\": [true, "
        "null]}}]}";
    void *img;
    size_t len;
    fps_err err;
    assert_int_equal(simg_build_text(t, strlen(t), NULL, 0, &img, &len, &err), 0);
    assert_int_equal(simg_validate(img, len, &err), 0);
    assert_string_equal(simg_session_revision_id(img), "r");
    vctx *c = vctx_new(NULL, img, len);
    val *s = v_session(c);
    assert_non_null(s);
    val *evs = v_getattr(c, s, "events");
    assert_int_equal(v_len(c, evs), 2);
    val *p = v_getattr(c, evs->u.seq.items[0], "payload");
    val *r = v_repr(c, p);
    assert_non_null(r);
    assert_memory_equal(r->u.s.s,
                        "{'n': 2, 'big': 123456789012345678901234567890, 'f': 100000.0, 's': 'hé'}",
                        r->u.s.blen);
    val *args[1] = {v_strz(c, "msg")};
    val *n = v_call_method(c, s, "count", args, 1, NULL, 0);
    int64_t one = 0;
    assert_true(n && v_as_i64(n, &one) && one == 1);
    assert_null(v_call_method(c, s, "lower", NULL, 0, NULL, 0));
    assert_string_equal(v_exc_type(c), "AttributeError");
    vctx_free(c);
    free(img);
    /* shape errors */
    const char *bad = "{\"schema_version\": \"3\"}";
    assert_int_equal(simg_build_text(bad, strlen(bad), NULL, 0, &img, &len, &err), SIMG_EINVALID);
    assert_string_equal(err.msg, "unsupported transcript schema version '3'");
    const char *cnt = "{\"schema_version\": \"2\", \"events\": [], \"event_count\": 1}";
    assert_int_equal(simg_build_text(cnt, strlen(cnt), NULL, 0, &img, &len, &err), SIMG_EINVALID);
    assert_string_equal(err.msg, "event_count is 1, but transcript contains 0 events");
    assert_int_equal(simg_build_text("{", 1, NULL, 0, &img, &len, &err), SIMG_EINVALID);
    /* strict (a server's response): the duplicate "n" and NaN are errors */
    assert_int_equal(simg_build_text(t, strlen(t), NULL, SIMG_STRICT, &img, &len, &err), -1);
    assert_string_equal(err.msg, "invalid JSON: duplicate object key at byte 344");
    const char *nan = "{\"schema_version\": \"2\", \"x\": NaN}";
    assert_int_equal(simg_build_text(nan, strlen(nan), NULL, 0, &img, &len, &err), SIMG_EINVALID);
    assert_string_equal(err.msg, "events must be an array");
    assert_int_equal(simg_build_text(nan, strlen(nan), NULL, SIMG_STRICT, &img, &len, &err),
                     SIMG_EINVALID);
    assert_string_equal(err.msg, "invalid JSON: NaN and Infinity are not JSON at byte 29");
    char junk[64] = "FPSIMG";
    assert_int_equal(simg_validate(junk, sizeof junk, &err), SIMG_ECORRUPT);
    assert_string_equal(err.name, "invalid_image");
}

/* A session image with any one byte changed: simg_validate refuses it, or
 * the session read whole (repr: every event, payload and string) ends, with
 * its value or an exception. And images corrupt in known ways are refused:
 * a string running past the end, a payload block after its event record,
 * a misaligned record table, an event's string past the end; an event's
 * string with a code point count above its byte count raises when read. */
static void test_session_image_corrupt(void **state)
{
    (void)state;
    const char *t =
        "{\"schema_version\": \"2\", \"assignment_id\": \"a1\", \"session_id\": \"s\", "
        "\"session_revision_id\": \"r\", \"agent_id\": \"ag\", \"environment\": \"prod\", "
        "\"started_at\": \"t0\", \"ended_at\": \"t1\", \"event_count\": 2, \"events\": ["
        "{\"id\": \"e1\", \"ts\": \"t\", \"event_type\": \"tool_use\", \"payload\": {\"n\": 1, "
        "\"big\": 123456789012345678901234567890, \"f\": 1e5, \"s\": \"h\\u00e9\", \"i\": "
        "999999999999999999, \"o\": {\"k\": [1, \"x\"]}}},"
        "{\"id\": \"e2\", \"ts\": \"t\", \"event_type\": \"msg\", \"payload\": {\"l\": [true, "
        "null]}}]}";
    void *img;
    size_t len;
    fps_err err;
    assert_int_equal(simg_build_text(t, strlen(t), NULL, 0, &img, &len, &err), 0);
    assert_int_equal(simg_validate(img, len, &err), 0);
    unsigned char *b = img;
    int refused = 0, read = 0;
    for (size_t i = 0; i < len; i++) {
        for (int flip = 0; flip < 2; flip++) {
            unsigned char was = b[i];
            b[i] = flip ? (unsigned char)(was ^ 0x80) : (unsigned char)(was + 1);
            if (simg_validate(img, len, &err) != 0) {
                assert_string_equal(err.name, "invalid_image");
                refused++;
            } else {
                vctx *c = vctx_new(NULL, img, len);
                val *s = v_session(c);
                if (s != NULL) (void)v_repr(c, s);
                vctx_free(c);
                read++;
            }
            b[i] = was;
        }
    }
    assert_true(refused > 0 && read > 0);
    /* the header's first string field (assignment_id), made to run past the end */
    uint32_t off;
    memcpy(&off, b + 32, 4);
    uint32_t w, huge = (uint32_t)len << 1 | 1;
    memcpy(&w, b + off, 4);
    memcpy(b + off, &huge, 4);
    assert_int_equal(simg_validate(img, len, &err), SIMG_ECORRUPT);
    memcpy(b + off, &w, 4);
    /* the record table one byte off its alignment */
    uint32_t evoff;
    memcpy(&evoff, b + 20, 4);
    evoff++;
    memcpy(b + 20, &evoff, 4);
    assert_int_equal(simg_validate(img, len, &err), SIMG_ECORRUPT);
    evoff--;
    memcpy(b + 20, &evoff, 4);
    /* the first event's payload block moved after its record */
    uint64_t node;
    memcpy(&node, b + evoff + 16, 8);
    uint64_t moved = (node & 0xFFFFFFFFu) | (uint64_t)(evoff + 8) << 32;
    memcpy(b + evoff + 16, &moved, 8);
    assert_int_equal(simg_validate(img, len, &err), SIMG_ECORRUPT);
    memcpy(b + evoff + 16, &node, 8);
    /* the first event's id past the end */
    uint32_t id, past = (uint32_t)len;
    memcpy(&id, b + evoff, 4);
    memcpy(b + evoff, &past, 4);
    assert_int_equal(simg_validate(img, len, &err), SIMG_ECORRUPT);
    memcpy(b + evoff, &id, 4);
    /* the first event's id given a code point count above its byte count:
     * an event's strings are checked as they are read (the validator does
     * not touch them all), so reading it raises */
    memcpy(&w, b + id, 4);
    uint32_t wide[2] = {w & ~1u, (w >> 1) + 1};
    char saved[8];
    memcpy(saved, b + id, 8);
    memcpy(b + id, wide, 8);
    assert_int_equal(simg_validate(img, len, &err), 0);
    vctx *c = vctx_new(NULL, img, len);
    val *evs = v_getattr(c, v_session(c), "events");
    assert_non_null(evs);
    assert_null(v_getattr(c, evs->u.seq.items[0], "id"));
    assert_string_equal(v_exc_type(c), "RuntimeError");
    vctx_free(c);
    memcpy(b + id, saved, 8);
    assert_int_equal(simg_validate(img, len, &err), 0);
    free(img);
}

/* SIMG_CONSUME: the image is the one built from the text kept, the text's
 * pages behind the parse point read as zeros after (handed back), the ones
 * of a transcript too short to hand any back do not, and an invalid
 * transcript fails with the same message. */
static void test_session_image_consume(void **state)
{
    (void)state;
    strbuf t;
    strbuf_init(&t);
    strbuf_puts(&t, "{\"schema_version\": \"2\", \"assignment_id\": \"a\", \"session_id\": \"s\", "
                    "\"session_revision_id\": \"r\", \"agent_id\": \"g\", \"environment\": "
                    "\"e\", \"started_at\": \"t0\", \"ended_at\": \"t1\", \"event_count\": 30000, "
                    "\"events\": [");
    for (int i = 0; i < 30000; i++)
        strbuf_printf(&t,
                      "%s{\"id\": \"e%d\", \"ts\": \"2026-08-28T12:00:00.%06dZ\", \"event_type\": "
                      "\"tool\", \"payload\": {\"text\": \"w%d caf\\u00e9 %d\", \"n\": %d}}",
                      i ? ", " : "", i, i, i % 97, i * 7, i);
    strbuf_puts(&t, "]}");
    size_t n = t.len, map = (n + 4095) & ~(size_t)4095;
    void *img, *img2;
    size_t len, len2;
    fps_err err;
    assert_int_equal(simg_build_text(t.data, n, "x", SIMG_STRICT, &img, &len, &err), 0);
    char *text = mmap(NULL, map, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(text != MAP_FAILED);
    memcpy(text, t.data, n);
    assert_true(n > 3 * ((size_t)1 << 20));
    assert_int_equal(simg_build_text(text, n, "x", SIMG_STRICT | SIMG_CONSUME, &img2, &len2, &err),
                     0);
    assert_int_equal(len2, len);
    assert_memory_equal(img2, img, len);
    size_t zeros = 0;
    while (zeros < n && text[zeros] == 0)
        zeros++;
    assert_true(zeros >= ((size_t)2 << 20)); /* at least two steps handed back */
    assert_true(zeros < n);                  /* and not past the parse point */
    free(img2);
    /* a transcript broken at its end: the same error, with the text consumed */
    memcpy(text, t.data, n);
    text[n - 1] = '}';
    text[n - 2] = '}';
    fps_err e1, e2;
    assert_int_equal(simg_build_text(text, n, NULL, 0, &img2, &len2, &e1), SIMG_EINVALID);
    assert_int_equal(simg_build_text(text, n, NULL, SIMG_CONSUME, &img2, &len2, &e2),
                     SIMG_EINVALID);
    assert_string_equal(e2.msg, e1.msg);
    munmap(text, map);
    /* a short one: nothing handed back */
    const char *small = "{\"schema_version\": \"2\", \"x\": [1, 2]}";
    char buf[64];
    memcpy(buf, small, strlen(small) + 1);
    assert_int_equal(simg_build_text(buf, strlen(small), NULL, SIMG_CONSUME, &img2, &len2, &e2),
                     SIMG_EINVALID);
    assert_memory_equal(buf, small, strlen(small));
    free(img);
    strbuf_free(&t);
}

/* The shared-memory pages this process has mapped (kB): the memfd image's. */
static long rss_shmem_kb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    while (f != NULL && fgets(line, sizeof line, f))
        if (!strncmp(line, "RssShmem:", 9)) kb = atol(line + 9);
    if (f != NULL) fclose(f);
    return kb;
}

/* A session image mapped as the jail maps it (a memfd, MAP_PRIVATE,
 * PROT_READ) under LANG_IMAGE_MAPPED: walks drop the pages behind them, so
 * little of the image stays resident, and every value still reads what the
 * same evaluation over the image in anonymous memory reads (strings taken
 * in a first pass and read after their pages were dropped, joins, second
 * passes, random access). */
static void test_session_image_mapped(void **state)
{
    (void)state;
    strbuf t;
    strbuf_init(&t);
    strbuf_puts(&t, "{\"schema_version\": \"2\", \"assignment_id\": \"a\", \"session_id\": \"s\", "
                    "\"session_revision_id\": \"r\", \"agent_id\": \"g\", \"environment\": "
                    "\"e\", \"started_at\": \"t0\", \"ended_at\": \"t1\", \"event_count\": 1500, "
                    "\"events\": [");
    for (int i = 0; i < 1500; i++) {
        strbuf_printf(&t,
                      "%s{\"id\": \"e%d\", \"ts\": \"t\", \"event_type\": \"%s\", \"payload\": "
                      "{\"text\": \"",
                      i ? ", " : "", i, i % 3 ? "model" : "tool");
        for (int w = 0; w < 400; w++) /* 400 words, about 3 KiB */
            strbuf_printf(&t, "%sw%d", w ? " " : "", (i * 7 + w) % 1000);
        strbuf_printf(&t, "\", \"n\": %d}}", i);
    }
    strbuf_puts(&t, "]}");
    void *img;
    size_t len;
    fps_err err;
    assert_int_equal(simg_build_text(t.data, t.len, NULL, 0, &img, &len, &err), 0);
    strbuf_free(&t);
    assert_true(len > 2u << 20); /* many times what a walk keeps */
    int fd = memfd_create("test-image", 0);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, img, len), (ssize_t)len);
    void *m = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
    assert_true(m != MAP_FAILED);
    close(fd);

    static const char *const srcs[] = {
        "sum([len(e.payload['text'].split()) for e in session.events])",
        "[x[:9] + x[-9:] for x in [e.payload['text'] for e in session.events]][::97]",
        "len(''.join([e.payload['text'] for e in session.events]))",
        "' '.join([e.payload['text'] for e in session.events]).count('w17 ')",
        "sum([1 for e in session.events if e.payload['text'].startswith('w1')]) + "
        "sum([e.payload['n'] for e in session.events if e.event_type == 'tool'])",
        "sum([len(evs[(i * 37) % 1500].payload['text']) for evs in [session.events] "
        "for i in range(4000)])",
        "sorted(set([e.payload['text'][-4:] for e in session.events]))[:3]",
    };
    lang_limits mapped = {.flags = LANG_IMAGE_MAPPED}, plain = {0};
    for (size_t k = 0; k < sizeof srcs / sizeof srcs[0]; k++) {
        char *want = lang_eval(LANG_RAW, srcs[k], strlen(srcs[k]), "q", img, len, &plain);
        assert_non_null(want);
        assert_non_null(strstr(want, "\"ok\": true"));
        (void)madvise(m, len, MADV_DONTNEED);
        char *got = lang_eval(LANG_RAW, srcs[k], strlen(srcs[k]), "q", m, len, &mapped);
        assert_string_equal(got, want);
        free(got);
        free(want);
    }
    char *got = lang_eval(LANG_RAW, srcs[0], strlen(srcs[0]), "q", m, len, &mapped);
    assert_string_equal(got, "{\"ok\": true, \"repr\": \"600000\"}");
    free(got);

    /* After a full walk: a few hundred KiB of the image stay mapped, where
     * the same walk without the flag keeps all of it. */
    (void)madvise(m, len, MADV_DONTNEED);
    long base = rss_shmem_kb();
    assert_true(base >= 0);
    free(lang_eval(LANG_RAW, srcs[2], strlen(srcs[2]), "q", m, len, &mapped));
    long dropped = rss_shmem_kb() - base;
    (void)madvise(m, len, MADV_DONTNEED);
    free(lang_eval(LANG_RAW, srcs[2], strlen(srcs[2]), "q", m, len, &plain));
    long kept = rss_shmem_kb() - base;
    assert_true(kept > (long)(len >> 10) / 2);
    assert_true(dropped < (long)(len >> 10) / 4);
    munmap(m, len);
    free(img);
}

/* One process, evaluation after evaluation with lang_recycle between (a
 * session's evaluator): each gets the outcome, steps and bytes allocated it
 * gets first, and a value freed in one (a set's first table, given up when
 * the set grows) corrupts nothing the next one's collections walk. */
static void test_evaluations_in_one_process(void **state)
{
    (void)state;
    const char *srcs[] = {"set(range(8))", "sorted(set('abcdefgh'))",
                          "sum([len(str(i)) for i in range(300000)])",
                          "len({str(i): [i] for i in range(20000)})", "'x' in {'x': 1}"};
    enum { N = sizeof srcs / sizeof srcs[0] };
    char *first[N];
    lang_stats st0[N];
    for (int round = 0; round < 3; round++) {
        for (int k = 0; k < N; k++) {
            lang_stats st = {0, 0};
            lang_limits lim = {0, 0, 0, &st};
            char *out = lang_eval(LANG_RAW, srcs[k], strlen(srcs[k]), NULL, NULL, 0, &lim);
            assert_non_null(out);
            assert_non_null(strstr(out, "\"ok\": true"));
            if (round == 0) {
                first[k] = out;
                st0[k] = st;
            } else {
                assert_string_equal(out, first[k]);
                assert_int_equal(st.steps, st0[k].steps);
                assert_int_equal(st.alloc_bytes, st0[k].alloc_bytes);
                free(out);
            }
            lang_recycle();
            lang_hash_set_key((uint64_t)round * 7 + 1, (uint64_t)k * 13 + 5);
        }
    }
    for (int k = 0; k < N; k++)
        free(first[k]);
}

static void test_limits(void **state)
{
    (void)state;
    vlimits lim = {.max_steps = 1000, .max_alloc_bytes = 1 << 20};
    vctx *c = vctx_new(&lim, NULL, 0);
    val *x = v_strz(c, "abcdefgh");
    val *r = v_binop(c, BIN_MUL, x, v_int64(c, 10000000));
    assert_null(r);
    assert_int_equal(v_exc_kind(c), VEXC_LIMIT);
    assert_string_equal(v_exc_type(c), "memory");
    vctx_free(c);
    c = vctx_new(&lim, NULL, 0);
    int rc = 0;
    for (int i = 0; i < 2000 && rc == 0; i++)
        rc = v_step(c);
    assert_int_equal(rc, -1);
    assert_string_equal(v_exc_type(c), "steps");
    vctx_free(c);
}

/* SipHash-2-4 against the reference implementation's vectors (key 00..0f,
 * messages 00, 00 01, ... of length 0..63), so the rounds are right; then
 * SipHash-1-3, as str hashing uses it, against CPython 3.11's own
 * hash(bytes) under PYTHONHASHSEED=1 (whose key is the first 16 bytes of
 * its LCG stream: aed66ce184be2329, ebe9bbf1f1499052). */
static void test_siphash(void **state)
{
    (void)state;
    unsigned char msg[64];
    for (int i = 0; i < 64; i++)
        msg[i] = (unsigned char)i;
    const uint64_t k0 = 0x0706050403020100ull, k1 = 0x0f0e0d0c0b0a0908ull;
    static const struct {
        size_t len;
        uint64_t h;
    } ref24[] = {{0, 0x726fdb47dd0e0e31ull},  {1, 0x74f839c593dc67fdull},
                 {7, 0xab0200f58b01d137ull},  {8, 0x93f5f5799a932462ull},
                 {15, 0xa129ca6149be45e5ull}, {16, 0x3f2acc7f57c29bdbull},
                 {63, 0x958a324ceb064572ull}};
    for (size_t i = 0; i < sizeof ref24 / sizeof ref24[0]; i++)
        assert_true(siphash(2, 4, k0, k1, msg, ref24[i].len) == ref24[i].h);
    static const struct {
        const char *s;
        int64_t h;
    } py13[] = {{"a", -3012895188637184397ll},
                {"abc", -4667308735975688587ll},
                {"abcdefgh", -202642195356325900ll},
                {"abcdefghi", 7871229953815684364ll},
                {"The quick brown fox jumps over the lazy dog", -4305058434410168670ll}};
    for (size_t i = 0; i < sizeof py13 / sizeof py13[0]; i++)
        assert_true((int64_t)siphash(1, 3, 0xaed66ce184be2329ull, 0xebe9bbf1f1499052ull, py13[i].s,
                                     strlen(py13[i].s)) == py13[i].h);
    /* hash(str) is that, under the process's key; hash('') is 0 as in CPython */
    siphash_set_key(0xaed66ce184be2329ull, 0xebe9bbf1f1499052ull);
    int64_t h = 0;
    assert_int_equal(v_hash(C, v_strz(C, "abc"), &h), 0);
    assert_true(h == -4667308735975688587ll);
    assert_int_equal(v_hash(C, v_strz(C, ""), &h), 0);
    assert_true(h == 0);
    assert_int_equal(siphash_seed(), 0);
    assert_int_equal(v_hash(C, v_strz(C, "abc"), &h), 0);
    assert_true(h != -4667308735975688587ll);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        /* first: in a process no other test has allocated in yet */
        cmocka_unit_test(test_evaluations_in_one_process),
        cmocka_unit_test_setup_teardown(test_float_repr, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ints, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tagged_int_edges, setup, teardown),
        cmocka_unit_test_setup_teardown(test_alloc_zeroed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_alloc_last_word_scanned, setup, teardown),
        cmocka_unit_test_setup_teardown(test_alloc_bytes_distinct, setup, teardown),
        cmocka_unit_test_setup_teardown(test_round, setup, teardown),
        cmocka_unit_test_setup_teardown(test_strings, setup, teardown),
        cmocka_unit_test_setup_teardown(test_format, setup, teardown),
        cmocka_unit_test_setup_teardown(test_format_fixed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_containers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_results, setup, teardown),
        cmocka_unit_test_setup_teardown(test_session_image, setup, teardown),
        cmocka_unit_test_setup_teardown(test_session_image_corrupt, setup, teardown),
        cmocka_unit_test_setup_teardown(test_session_image_consume, setup, teardown),
        cmocka_unit_test_setup_teardown(test_session_image_mapped, setup, teardown),
        cmocka_unit_test_setup_teardown(test_limits, setup, teardown),
        cmocka_unit_test_setup_teardown(test_siphash, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
