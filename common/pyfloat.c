/* common/pyfloat: IEEE doubles written as CPython's repr(float) writes them
 * (shortest round-trip digits, CPython's fixed/exponent switch). One
 * implementation for the sandbox language's float repr and formatting and
 * for canonical JSON (common/canonjson.c). */
#include "common/pyfloat.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Shortest digits that round-trip. */
static bool digits_roundtrip(const char *dg, int n, int decpt, double a)
{
    char buf[64];
    snprintf(buf, sizeof buf, "0.%.*se%d", n, dg, decpt);
    return strtod(buf, NULL) == a;
}

/* adds delta (+1/-1) to the last digit of dg[0..n), with carry; returns the
 * new decpt (a carry out of the first digit shifts it) or INT32_MIN if the
 * result would be zero/invalid */
static int bump(char *dg, int n, int decpt, int delta)
{
    int i = n - 1;
    if (delta > 0) {
        while (i >= 0 && dg[i] == '9')
            dg[i--] = '0';
        if (i < 0) {
            memmove(dg + 1, dg, (size_t)n);
            dg[0] = '1';
            return decpt + 1;
        }
        dg[i]++;
        return decpt;
    }
    while (i >= 0 && dg[i] == '0')
        dg[i--] = '9';
    if (i < 0) return INT32_MIN;
    dg[i]--;
    if (dg[0] == '0') return INT32_MIN;
    return decpt;
}

int pyfloat_shortest(double d, char *digits, int *ndigits)
{
    char buf[64];
    double a = fabs(d);
    bool sub = a < 2.2250738585072014e-308;
    int p0 = sub ? 1 : 15;
    for (int p = p0; p <= 17; p++) {
        snprintf(buf, sizeof buf, "%.*e", p - 1, a);
        int n = 0;
        char *q = buf;
        for (; *q && *q != 'e'; q++)
            if (*q >= '0' && *q <= '9') digits[n++] = *q;
        int decpt = atoi(q + 1) + 1;
        bool ok = strtod(buf, NULL) == a;
        if (!ok && p < 17) {
            /* the correctly rounded p digits may miss where the rounding
             * interval is asymmetric (powers of two); try the neighbours */
            char alt[32];
            for (int delta = -1; delta <= 1 && !ok; delta += 2) {
                memcpy(alt, digits, (size_t)n);
                int dp = bump(alt, n, decpt, delta);
                if (dp == INT32_MIN) continue;
                if (digits_roundtrip(alt, n, dp, a)) {
                    memcpy(digits, alt, (size_t)n);
                    decpt = dp;
                    ok = true;
                }
            }
        }
        if (ok || p == 17) {
            while (n > 1 && digits[n - 1] == '0')
                n--;
            digits[n] = 0;
            *ndigits = n;
            if (!sub && p == 15) {
                /* fewer digits may still round-trip only if they are a
                 * prefix with trailing zeros, handled by the stripping */
            }
            return decpt;
        }
    }
    return 0;
}

/* repr(float). Digits: if any decimal of <= 15 significant digits rounds to
 * d, it is unique (the 15-digit grid is coarser than an ulp), so the
 * correctly rounded %.14e with trailing zeros stripped is the shortest;
 * otherwise the correctly rounded 16- or 17-digit form is the closest
 * round-tripping one, as David Gay's mode 0 picks. */
int pyfloat_repr(strbuf *b, double d)
{
    if (isnan(d)) {
        strbuf_put(b, "nan", 3);
        return 0;
    }
    if (isinf(d)) {
        strbuf_puts(b, d > 0 ? "inf" : "-inf");
        return 0;
    }
    if (signbit(d)) strbuf_putc(b, '-');
    if (d == 0) {
        strbuf_put(b, "0.0", 3);
        return 0;
    }
    char dg[32];
    int n;
    int decpt = pyfloat_shortest(d, dg, &n);
    if (decpt > -4 && decpt <= 16) {
        if (decpt <= 0) {
            strbuf_put(b, "0.", 2);
            for (int i = 0; i < -decpt; i++)
                strbuf_putc(b, '0');
            strbuf_put(b, dg, (size_t)n);
        } else if (decpt >= n) {
            strbuf_put(b, dg, (size_t)n);
            for (int i = n; i < decpt; i++)
                strbuf_putc(b, '0');
            strbuf_put(b, ".0", 2);
        } else {
            strbuf_put(b, dg, (size_t)decpt);
            strbuf_putc(b, '.');
            strbuf_put(b, dg + decpt, (size_t)(n - decpt));
        }
    } else {
        strbuf_putc(b, dg[0]);
        if (n > 1) {
            strbuf_putc(b, '.');
            strbuf_put(b, dg + 1, (size_t)(n - 1));
        }
        int e = decpt - 1;
        strbuf_printf(b, "e%c%02d", e < 0 ? '-' : '+', abs(e));
    }
    return 0;
}
