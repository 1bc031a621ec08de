/* The daemon's shared state, its log and its clock. */
#include "daemon.h"

#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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

void dlog_limited(struct log_limit *limit, int level, const char *fmt, ...)
{
    uint64_t now = now_ms();
    if (level > D.log_level)
        return;
    if (limit->last_ms && now - limit->last_ms < 10000) {
        limit->skipped++;
        return;
    }
    char text[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    if (limit->skipped)
        dlog(level, "%s (and %lu more like it in the last %llu s)", text, limit->skipped,
             (unsigned long long)((now - limit->last_ms) / 1000));
    else
        dlog(level, "%s", text);
    limit->last_ms = now;
    limit->skipped = 0;
}

int daemon_thread(void *(*fn)(void *), void *arg)
{
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_t t;
    int rc = pthread_create(&t, NULL, fn, arg);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc == 0)
        pthread_detach(t);
    return rc;
}

uint64_t now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

void daemon_test_point(const char *point)
{
    static const char *at;
    if (!at) {
        at = getenv("VRAMD_TEST_EXIT");
        if (!at)
            at = "";
    }
    if (at[0] && strcmp(at, point) == 0)
        _exit(99);
}
