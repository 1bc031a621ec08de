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
    "a number with a unit: K, M, G, T, Ki, Mi, Gi, Ti, KiB, MiB, GiB, TiB (powers of 1024), "  \
    "KB, MB, GB, TB (powers of 1000; 4gb is 4GB) or B; e.g. 4G, 4Gi, 4GiB, 512MiB, 1.5GiB; "  \
    "a number "                                                                                \
    "without a unit is bytes, and at least 1 MiB (1048576)"
#define PARSE_FRACTION_FORMS "a fraction in (0, 1] such as 0.33, or a percentage such as 33%"
#define PARSE_BOOL_FORMS "true or false (also 1/0, yes/no, on/off)"

/* A number without a unit is a byte count, but one below this is refused
 * (`--limit 4` is surely not 4 bytes), and so is a budget that a fraction
 * makes smaller than this: nothing a program could use fits in it. */
#define PARSE_MEANINGFUL_BYTES (1ull << 20)

typedef struct {
    char text[160];
} parse_why;

/* A size in bytes: "4GiB", "4Gi", "4G", "512MiB", "1.5GiB", "2GB", "100B";
 * a bare number of at least PARSE_MEANINGFUL_BYTES ("1073741824"), or 0. */
int parse_size(const char *s, uint64_t *out, parse_why *why);
int parse_fraction(const char *s, double *out, parse_why *why);
int parse_bool(const char *s, bool *out, parse_why *why);
/* A non-negative decimal integer that fits in `max`. */
int parse_uint(const char *s, uint64_t max, uint64_t *out, parse_why *why);

/* A duration: seconds ("1", "2.5", as nvidia-smi -l and gpustat -i take
 * them) or a number with a unit, ms, s, m or h ("500ms", "30s", "10m",
 * "1.5h"). Milliseconds out. What 0 means, if anything, is the caller's to
 * say. */
#define PARSE_DURATION_FORMS                                                                   \
    "seconds (1, 2.5) or a number with a unit: ms, s, m or h (e.g. 500ms, 30s, 10m, 1.5h)"
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
