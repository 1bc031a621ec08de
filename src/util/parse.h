/* parse: the one place where vram turns text into sizes, fractions, booleans
 * and per-device lists.
 *
 * Every user-facing input (environment variables, CLI flags, later config
 * files and socket messages) goes through these functions so that "4GiB"
 * means the same thing everywhere and a bad value is always explained the
 * same way. Each parser returns 0 on success, or -1 after writing into `why`
 * a short reason that the caller combines with the input's name and value.
 */
#ifndef VRAM_PARSE_H
#define VRAM_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Accepted forms, for error messages. */
#define PARSE_SIZE_FORMS                                                                       \
    "a byte count (4096) or a number with a unit: K, M, G, T or KiB, MiB, GiB, TiB (powers "  \
    "of 1024), KB, MB, GB, TB (powers of 1000); e.g. 4G, 4GiB, 512MiB, 1.5GiB"
#define PARSE_FRACTION_FORMS "a fraction in (0, 1] such as 0.33, or a percentage such as 33%"
#define PARSE_BOOL_FORMS "true or false (also 1/0, yes/no, on/off)"

typedef struct {
    char text[160];
} parse_why;

int parse_size(const char *s, uint64_t *out, parse_why *why);
int parse_fraction(const char *s, double *out, parse_why *why);
int parse_bool(const char *s, bool *out, parse_why *why);
/* A non-negative decimal integer that fits in `max`. */
int parse_uint(const char *s, uint64_t max, uint64_t *out, parse_why *why);

/* A duration: a number with a unit, ms, s, m or h ("500ms", "30s", "10m",
 * "1.5h"), or 0. Milliseconds out. */
#define PARSE_DURATION_FORMS "a number with a unit: ms, s, m or h (e.g. 500ms, 30s, 10m, 1.5h), or 0"
int parse_duration(const char *s, uint64_t *ms_out, parse_why *why);

/* "12.00 GiB", "512.00 MiB", "256 B": sizes in messages and tables. */
typedef struct {
    char text[32];
} size_text;
size_text format_size(uint64_t bytes);

/* A per-device list: either one value for every device ("4GiB") or
 * "KEY=VALUE,KEY=VALUE" where KEY is a device index. Returns the number of
 * entries, or -1 with a reason. An entry with key -1 applies to all devices. */
#define PARSE_MAX_ENTRIES 64
typedef struct {
    int device; /* -1: every device */
    char value[64];
} parse_entry;
int parse_device_list(const char *s, parse_entry *out, int max, parse_why *why);

/* Splits s at `sep` into at most max trimmed, non-empty items, each copied
 * into items[i] (up to item_len-1 chars). Returns the count, or -1. */
int parse_split(const char *s, char sep, char (*items)[64], int max, parse_why *why);

#endif
