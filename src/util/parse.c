#include "parse.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

static int fail(parse_why *why, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(parse_why *why, const char *fmt, ...)
{
    if (why) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why->text, sizeof why->text, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* Reads a non-negative decimal number with an optional fraction. Returns
 * the end of the number, or NULL if there is none. Done by hand rather than
 * with strtod so that "inf", "nan", "0x10", "1e3", " 4" and "-1" are all
 * refused: none of them is something a person means as a size. */
static const char *read_decimal(const char *s, double *value, bool *has_point)
{
    /* Digits go into an integer mantissa and the value is mantissa / 10^k,
     * both exact for up to 15 digits, so "0.33" is exactly the double 0.33
     * (summing digit by digit would not be). */
    static const double pow10[] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7,
                                   1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15};
    const char *p = s;
    uint64_t mantissa = 0;
    int digits = 0, decimals = 0, dropped = 0; /* integer digits beyond 19 */
    *has_point = false;
    for (;; p++) {
        if (*p == '.' && !*has_point) {
            *has_point = true;
            continue;
        }
        if (!isdigit((unsigned char)*p))
            break;
        if (digits < 19) {
            mantissa = mantissa * 10 + (uint64_t)(*p - '0');
            digits += mantissa != 0;
            decimals += *has_point;
        } else if (!*has_point) {
            dropped++; /* only the magnitude matters this far out */
        }
    }
    if (p == s || (p == s + 1 && *has_point))
        return NULL;
    double v = (double)mantissa;
    while (dropped-- > 0)
        v *= 10;
    while (decimals > 15) {
        v /= 10;
        decimals--;
    }
    *value = v / pow10[decimals];
    return p;
}

int parse_size(const char *s, uint64_t *out, parse_why *why)
{
    if (!s || !*s)
        return fail(why, "empty");
    if (*s == '-')
        return fail(why, "negative sizes are not sizes");
    double v;
    bool point;
    const char *unit = read_decimal(s, &v, &point);
    if (!unit)
        return fail(why, "not a number");

    /* A number without a unit is bytes, read exactly (2^64-1 or a
     * 17-digit count is not rounded through a double). But "--limit 4" or
     * "default-budget 25" is a forgotten unit, not 4 or 25 bytes: below
     * 1 MiB a bare number is refused, with the forms that were meant. */
    if (*unit == 0) {
        uint64_t n = 0;
        for (const char *p = s; *p && !point; p++) {
            if (n > (UINT64_MAX - (uint64_t)(*p - '0')) / 10)
                return fail(why, "too large");
            n = n * 10 + (uint64_t)(*p - '0');
        }
        if (!point && (n == 0 || n >= PARSE_MEANINGFUL_BYTES)) {
            *out = n;
            return 0;
        }
        if (point)
            return fail(why, "a number without a unit is bytes, and bytes are whole; give a "
                             "unit: %.24sMiB or %.24sGiB", s, s);
        return fail(why, "a number without a unit is bytes, and this is less than 1 MiB; give a "
                         "unit: %.24sMiB, %.24sGiB, or %.24sB if bytes are meant", s, s, s);
    }

    double mult;
    char letter = (char)toupper((unsigned char)unit[0]);
    const char *rest = unit + 1;
    int power;
    switch (letter) {
    case 'B':
        if (*rest)
            return fail(why, "unknown unit \"%s\"", unit);
        if (point)
            return fail(why, "a byte count must be a whole number");
        power = 0;
        break;
    case 'K': power = 1; break;
    case 'M': power = 2; break;
    case 'G': power = 3; break;
    case 'T': power = 4; break;
    default: return fail(why, "unknown unit \"%s\"", unit);
    }
    if (letter == 'B') {
        mult = 1;
    } else if (*rest == 0 || strcmp(rest, "i") == 0 || strcmp(rest, "iB") == 0 ||
               strcmp(rest, "ib") == 0) { /* 4Gi: Kubernetes' way of writing 4GiB */
        mult = (double)((uint64_t)1 << (10 * power));
    } else if (strcmp(rest, "B") == 0 || strcmp(rest, "b") == 0) {
        /* 4gb as people write it: bytes (a memory budget is never bits),
         * in powers of 1000 as 4GB. */
        mult = 1;
        for (int i = 0; i < power; i++)
            mult *= 1000.0;
    } else {
        return fail(why, "unknown unit \"%s\"", unit);
    }
    double bytes = v * mult;
    if (bytes >= 18446744073709551615.0)
        return fail(why, "too large");
    *out = (uint64_t)bytes;
    return 0;
}

int parse_fraction(const char *s, double *out, parse_why *why)
{
    if (!s || !*s)
        return fail(why, "empty");
    if (*s == '-')
        return fail(why, "a fraction cannot be negative");
    double v;
    bool point;
    const char *end = read_decimal(s, &v, &point);
    if (!end)
        return fail(why, "not a number");
    if (strcmp(end, "%") == 0) {
        v /= 100.0;
    } else if (*end) {
        return fail(why, "unexpected \"%s\" after the number", end);
    }
    if (!(v > 0.0))
        return fail(why, "a fraction must be greater than 0");
    if (v > 1.0 && !*end && v <= 100.0)
        return fail(why, "a fraction cannot be more than 1 (100%%); for %g percent write %g%% "
                         "or %g", v, v, v / 100.0);
    if (v > 1.0)
        return fail(why, "a fraction cannot be more than 1 (100%%)");
    *out = v;
    return 0;
}

int parse_bool(const char *s, bool *out, parse_why *why)
{
    static const char *yes[] = {"true", "1", "yes", "on"};
    static const char *no[] = {"false", "0", "no", "off"};
    if (!s || !*s)
        return fail(why, "empty");
    for (size_t i = 0; i < sizeof yes / sizeof *yes; i++) {
        if (strcasecmp(s, yes[i]) == 0) {
            *out = true;
            return 0;
        }
        if (strcasecmp(s, no[i]) == 0) {
            *out = false;
            return 0;
        }
    }
    return fail(why, "not a boolean");
}

int parse_uint(const char *s, uint64_t max, uint64_t *out, parse_why *why)
{
    if (!s || !*s)
        return fail(why, "empty");
    uint64_t n = 0;
    for (const char *p = s; *p; p++) {
        if (!isdigit((unsigned char)*p))
            return fail(why, "not a whole number");
        uint64_t d = (uint64_t)(*p - '0');
        if (n > (max - d) / 10)
            return fail(why, "larger than %llu", (unsigned long long)max);
        n = n * 10 + d;
    }
    *out = n;
    return 0;
}

int parse_duration(const char *s, uint64_t *ms_out, parse_why *why)
{
    if (!s || !*s)
        return fail(why, "empty");
    if (*s == '-')
        return fail(why, "a duration cannot be negative");
    double v;
    bool point;
    const char *unit = read_decimal(s, &v, &point);
    if (!unit)
        return fail(why, "not a number");
    static const struct {
        const char *name;
        double ms;
    } units[] = {{"", 1e3}, {"ms", 1}, {"s", 1e3}, {"m", 60e3}, {"h", 3600e3}};
    for (size_t i = 0; i < sizeof units / sizeof *units; i++)
        if (strcmp(unit, units[i].name) == 0) {
            double ms = v * units[i].ms;
            if (ms > 1e15)
                return fail(why, "longer than vram can wait");
            *ms_out = (uint64_t)(ms + 0.5);
            return 0;
        }
    return fail(why, "unknown unit \"%.8s\"", unit);
}

size_text format_size(uint64_t bytes)
{
    static const char *units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    size_text t;
    if (bytes < 1024) {
        snprintf(t.text, sizeof t.text, "%llu B", (unsigned long long)bytes);
        return t;
    }
    double v = (double)bytes / 1024.0;
    int u = 0;
    while (v >= 1024.0 && u < 5) {
        v /= 1024.0;
        u++;
    }
    snprintf(t.text, sizeof t.text, "%.2f %s", v, units[u]);
    return t;
}

static void trim_copy(char *dst, size_t cap, const char *begin, const char *end)
{
    while (begin < end && isspace((unsigned char)*begin))
        begin++;
    while (end > begin && isspace((unsigned char)end[-1]))
        end--;
    size_t n = (size_t)(end - begin);
    if (n >= cap)
        n = cap - 1;
    memcpy(dst, begin, n);
    dst[n] = 0;
}

int parse_split(const char *s, char sep, char (*items)[64], int max, parse_why *why)
{
    int n = 0;
    const char *p = s;
    for (;;) {
        const char *e = strchr(p, sep);
        if (!e)
            e = p + strlen(p);
        if ((size_t)(e - p) >= 64)
            return fail(why, "item \"%.20s...\" is too long", p);
        if (n == max)
            return fail(why, "more than %d items", max);
        trim_copy(items[n], 64, p, e);
        if (!items[n][0])
            return fail(why, "empty item");
        n++;
        if (!*e)
            break;
        p = e + 1;
    }
    return n;
}

int parse_device_list(const char *s, parse_entry *out, int max, parse_why *why)
{
    if (!s || !*s)
        return fail(why, "empty");
    char items[PARSE_MAX_ENTRIES][64];
    int n = parse_split(s, ',', items, max < PARSE_MAX_ENTRIES ? max : PARSE_MAX_ENTRIES, why);
    if (n < 0)
        return -1;
    for (int i = 0; i < n; i++) {
        char *eq = strchr(items[i], '=');
        if (!eq) {
            if (n > 1)
                return fail(why, "\"%s\" has no device: use DEVICE=VALUE for each item, or one "
                                 "value for all devices", items[i]);
            out[i].device = -1;
            snprintf(out[i].value, sizeof out[i].value, "%s", items[i]);
            continue;
        }
        *eq = 0;
        char key[64], val[64];
        trim_copy(key, sizeof key, items[i], eq);
        trim_copy(val, sizeof val, eq + 1, eq + 1 + strlen(eq + 1));
        uint64_t dev;
        parse_why w;
        if (parse_uint(key, 1023, &dev, &w) != 0)
            return fail(why, "device \"%s\" in \"%s=%s\" is not a device index", key, key, val);
        for (int j = 0; j < i; j++)
            if (out[j].device == (int)dev)
                return fail(why, "device %d is given twice", (int)dev);
        if (!val[0])
            return fail(why, "device %d has no value", (int)dev);
        out[i].device = (int)dev;
        snprintf(out[i].value, sizeof out[i].value, "%s", val);
    }
    return n;
}
