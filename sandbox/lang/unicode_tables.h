/* sandbox/lang/unicode_tables: Unicode property tables generated from CPython
 * (unicode_gen.py) for what utf8proc does not provide. Range tables are
 * sorted, inclusive [lo, hi] pairs. */
#ifndef FPS_UNICODE_TABLES_H
#define FPS_UNICODE_TABLES_H
#include <stddef.h>
#include <stdint.h>

struct vu_special {
    uint32_t cp;
    uint8_t n;
    uint32_t to[3];
};

extern const struct vu_special vu_upper_special[], vu_lower_special[], vu_title_special[],
    vu_fold_special[];
extern const size_t vu_upper_special_len, vu_lower_special_len, vu_title_special_len,
    vu_fold_special_len;
extern const uint32_t vu_digit_extra[][2], vu_numeric_extra[][2], vu_lower_extra[][2],
    vu_upper_extra[][2], vu_space[][2], vu_printable[][2], vu_alpha[][2], vu_decimal[][2];
extern const size_t vu_digit_extra_len, vu_numeric_extra_len, vu_lower_extra_len,
    vu_upper_extra_len, vu_space_len, vu_printable_len, vu_alpha_len, vu_decimal_len;

#endif
