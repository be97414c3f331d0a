/* common/timeutil: see timeutil.h. */
#include "common/timeutil.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

double time_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int64_t time_mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int time_cond_wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, int64_t deadline_ms)
{
    if (deadline_ms == INT64_MAX) return pthread_cond_wait(cv, mu);
    int64_t left = deadline_ms - time_mono_ms();
    if (left <= 0) return ETIMEDOUT;
    /* The condition variables use the default (realtime) clock: the
     * remaining monotonic time is added to the realtime now. */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += (time_t)(left / 1000);
    ts.tv_nsec += (long)(left % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    return pthread_cond_timedwait(cv, mu, &ts);
}

/* The general formatter (gmtime + snprintf): any year gmtime accepts. */
static char *time_rfc3339_slow(double epoch, char *out, size_t cap)
{
    double whole = floor(epoch);
    long usec = lround((epoch - whole) * 1e6);
    time_t secs = (time_t)whole;
    if (usec >= 1000000) {
        secs += 1;
        usec -= 1000000;
    }
    struct tm tm;
    char tmp[128] = "0000-00-00T00:00:00.000000Z";
    if (gmtime_r(&secs, &tm) != NULL)
        snprintf(tmp, sizeof tmp, "%04d-%02d-%02dT%02d:%02d:%02d.%06ldZ", tm.tm_year + 1900,
                 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, usec);
    snprintf(out, cap, "%s", tmp);
    return out;
}

/* Days since 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's
 * civil_from_days): integer arithmetic only, valid for any int64 day. */
static void civil_from_days(int64_t z, int64_t *y, unsigned *m, unsigned *d)
{
    z += 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    unsigned doe = (unsigned)(z - era * 146097);
    unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    unsigned mp = (5 * doy + 2) / 153;
    *d = doy - (153 * mp + 2) / 5 + 1;
    *m = mp < 10 ? mp + 3 : mp - 9;
    *y = (int64_t)yoe + era * 400 + (*m <= 2);
}

static char *put2(char *p, unsigned v)
{
    p[0] = (char)('0' + v / 10);
    p[1] = (char)('0' + v % 10);
    return p + 2;
}

size_t time_rfc3339_n(double epoch, char *out)
{
    /* Outside years 0000..9999 (or not a number): the general formatter. */
    if (!(epoch >= -62167219200.0 && epoch < 253402300799.0)) {
        time_rfc3339_slow(epoch, out, 64);
        return strlen(out);
    }
    int64_t secs;
    long usec;
    if (epoch >= 0) { /* floor and lround without libm calls: the same values */
        secs = (int64_t)epoch;
        double x = (epoch - (double)secs) * 1e6; /* the subtraction is exact */
        usec = (long)x;
        if (x - (double)usec >= 0.5) usec++;
    } else {
        double whole = floor(epoch);
        usec = lround((epoch - whole) * 1e6);
        secs = (int64_t)whole;
    }
    if (usec >= 1000000) {
        secs += 1;
        usec -= 1000000;
    }
    int64_t days = secs >= 0 ? secs / 86400 : -((-secs + 86399) / 86400);
    unsigned sod = (unsigned)(secs - days * 86400);
    /* Timestamps come in runs of the same day (a page of runs): the date
     * text of the last day formatted on this thread is reused. */
    static _Thread_local int64_t cached_day = INT64_MIN;
    static _Thread_local char cached_date[11];
    if (days != cached_day) {
        int64_t y;
        unsigned mo, d;
        civil_from_days(days, &y, &mo, &d);
        if (y > 9999) { /* 9999-12-31T23:59:59.9999995 rounds up */
            time_rfc3339_slow(epoch, out, 64);
            return strlen(out);
        }
        char *p = cached_date;
        unsigned yy = (unsigned)y;
        p = put2(p, yy / 100);
        p = put2(p, yy % 100);
        *p++ = '-';
        p = put2(p, mo);
        *p++ = '-';
        p = put2(p, d);
        *p = 'T';
        cached_day = days;
    }
    memcpy(out, cached_date, 11);
    char *p = out + 11;
    p = put2(p, sod / 3600);
    *p++ = ':';
    p = put2(p, sod / 60 % 60);
    *p++ = ':';
    p = put2(p, sod % 60);
    *p++ = '.';
    unsigned u = (unsigned)usec;
    p = put2(p, u / 10000);
    p = put2(p, u / 100 % 100);
    p = put2(p, u % 100);
    *p++ = 'Z';
    *p = '\0';
    return (size_t)(p - out);
}

char *time_rfc3339(double epoch, char *out, size_t cap)
{
    char buf[64];
    size_t n = time_rfc3339_n(epoch, buf);
    if (cap == 0) return out;
    if (n >= cap) n = cap - 1;
    memcpy(out, buf, n);
    out[n] = '\0';
    return out;
}

char *time_rfc3339_now(char *out, size_t cap)
{
    return time_rfc3339(time_now(), out, cap);
}

static int digits(const char **p, int n, int *out)
{
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (!isdigit((unsigned char)**p)) return -1;
        v = v * 10 + (**p - '0');
        (*p)++;
    }
    *out = v;
    return 0;
}

int time_parse_rfc3339(const char *s, double *epoch)
{
    int y, mo, d, h, mi, se;
    const char *p = s;
    if (s == NULL) return -1;
    if (digits(&p, 4, &y) || *p++ != '-' || digits(&p, 2, &mo) || *p++ != '-' ||
        digits(&p, 2, &d) || (*p != 'T' && *p != 't' && *p != ' '))
        return -1;
    p++;
    if (digits(&p, 2, &h) || *p++ != ':' || digits(&p, 2, &mi) || *p++ != ':' || digits(&p, 2, &se))
        return -1;
    if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || se > 60) return -1;
    double frac = 0, scale = 0.1;
    if (*p == '.') {
        p++;
        if (!isdigit((unsigned char)*p)) return -1;
        while (isdigit((unsigned char)*p)) {
            frac += (*p - '0') * scale;
            scale /= 10;
            p++;
        }
    }
    int offset = 0;
    if (*p == 'Z' || *p == 'z') {
        p++;
    } else if (*p == '+' || *p == '-') {
        int sign = *p == '-' ? -1 : 1, oh, om;
        p++;
        if (digits(&p, 2, &oh) || *p++ != ':' || digits(&p, 2, &om)) return -1;
        offset = sign * (oh * 3600 + om * 60);
    } else {
        return -1;
    }
    if (*p != '\0') return -1;
    struct tm tm = {0};
    tm.tm_year = y - 1900;
    tm.tm_mon = mo - 1;
    tm.tm_mday = d;
    tm.tm_hour = h;
    tm.tm_min = mi;
    tm.tm_sec = se;
    time_t t = timegm(&tm);
    *epoch = (double)t - offset + frac;
    return 0;
}
