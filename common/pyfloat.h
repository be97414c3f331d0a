/* common/pyfloat: CPython's repr(float), byte for byte. */
#ifndef FPS_PYFLOAT_H
#define FPS_PYFLOAT_H
#include "common/strbuf.h"

/* Shortest digits of |d| (d finite, non-zero) that round-trip: writes them
 * (no dot, NUL-terminated, at most 17) to digits, their count to *ndigits,
 * and returns decpt (|d| = 0.DIGITS * 10^decpt). */
int pyfloat_shortest(double d, char *digits, int *ndigits);
/* Appends repr(d): "nan", "inf", "-0.0", "1e+16", "0.0001", ... Returns 0. */
int pyfloat_repr(strbuf *b, double d);

#endif
