#include "report.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#define MESSAGE_MAX 2048

const char *report_status_name(vram_status s)
{
    static const char *names[] = {
        "VRAM_OK",
        "VRAM_ERROR_INVALID_ARGUMENT",
        "VRAM_ERROR_CONFIG",
        "VRAM_ERROR_FROZEN",
        "VRAM_ERROR_OUT_OF_MEMORY",
        "VRAM_ERROR_NO_DRIVER",
        "VRAM_ERROR_DRIVER",
        "VRAM_ERROR_NO_DEVICE",
        "VRAM_ERROR_UNKNOWN_POINTER",
        "VRAM_ERROR_CHILD_FAILED",
        "VRAM_ERROR_SYSTEM",
    };
    if ((unsigned)s < sizeof names / sizeof *names)
        return names[s];
    return "VRAM_ERROR_(unknown)";
}

static _Thread_local char message[MESSAGE_MAX];
static atomic_int level = LOG_WARN;

vram_status report_fail(vram_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    vlog(LOG_DEBUG, "%s: %s", report_status_name(status), message);
    return status;
}

void report_prefix(const char *fmt, ...)
{
    char old[MESSAGE_MAX], head[512];
    memcpy(old, message, sizeof old);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(head, sizeof head, fmt, ap);
    va_end(ap);
    snprintf(message, sizeof message, "%s: %s", head, old);
}

int report_into(char *err, size_t n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, n, fmt, ap);
    va_end(ap);
    return -1;
}

const char *report_last(void) { return message; }
void report_clear(void) { message[0] = 0; }

void log_set_level(int l) { atomic_store(&level, l); }
int log_level(void) { return atomic_load(&level); }

void vlog(int l, const char *fmt, ...)
{
    if (l > atomic_load(&level))
        return;
    static const char *names[] = {"", "error", "warning", "info", "debug"};
    char line[MESSAGE_MAX + 64];
    int n = snprintf(line, sizeof line, "vram: %s: ", names[l]);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    va_end(ap);
    /* One write per line, so lines of concurrent threads do not interleave. */
    fprintf(stderr, "%s\n", line);
}
