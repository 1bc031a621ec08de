/* trend: the last minutes of a series as one line of text, for vram top.
 *
 * Each mark is the highest value within its part of the window, drawn as
 * one of eight heights: Unicode's block elements (▁▂▃▄▅▆▇█) where the
 * locale's character set is UTF-8, else ASCII (_.-:=+*#). A mark where
 * nothing is known (before the series began) is a space.
 */
#ifndef VRAM_TREND_H
#define VRAM_TREND_H

#include "../protocol/snapshot.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define TREND_NONE UINT64_MAX /* a value not known */
#define TREND_WINDOW_MS 120000 /* what the section shows: vramd's recent ring */

/* Whether the locale's character set is UTF-8, as setlocale(LC_CTYPE, "")
 * would choose it (LC_ALL, else LC_CTYPE, else LANG), without changing the
 * program's locale. */
bool trend_utf8(void);

/* Draws values[0..n) (oldest first, TREND_NONE where unknown) in `marks`
 * marks, each the highest of n / marks values (rounded up), against `top`
 * (the full height; 0: the highest value). out gets at most 3 bytes a
 * mark and a NUL. */
void trend_draw(char *out, size_t size, const uint64_t *values, int n, int marks, uint64_t top,
                bool utf8);

/* vram top's trend section: each device's in-use over the last
 * TREND_WINDOW_MS against its total, and each job's (the reader's own
 * processes and job grants with a job name, summed per GPU) against its
 * budget, `width` columns wide. Nothing when s has no history. */
void trend_section(const struct snapshot *s, FILE *out, int width, bool utf8);

#endif
