/* timing: what the benchmarks time with: a monotonic clock in ns, and the
 * comparison qsort needs to take a median of doubles. */
#ifndef VRAM_BENCH_TIMING_H
#define VRAM_BENCH_TIMING_H

#include <time.h>

static inline double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static inline int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

#endif
