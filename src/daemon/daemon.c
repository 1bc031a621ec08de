/* The daemon's shared state, its log and its clock. */
#include "daemon.h"

#include <stdarg.h>
#include <time.h>

struct daemon D = {.metrics_ms = 5000, .log_level = L_WARN};

void dlog(int level, const char *fmt, ...)
{
    if (level > D.log_level)
        return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "vramd: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
}

uint64_t now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}
