/* report: how vram tells a person what went wrong.
 *
 * report_fail() records the message of a failing call for
 * vram_last_error() (per thread) and returns the status, so that a failure
 * is one line: `return report_fail(VRAM_ERROR_CONFIG, "...", ...);`.
 * vlog() writes to stderr at or below the level VRAM_LOG asks for; the
 * library is quiet except for warnings by default.
 */
#ifndef VRAM_REPORT_H
#define VRAM_REPORT_H

#include "../../include/vram.h"

enum { LOG_OFF = 0, LOG_ERROR = 1, LOG_WARN = 2, LOG_INFO = 3, LOG_DEBUG = 4 };

vram_status report_fail(vram_status status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Prefixes the current message: "while X: <message>". */
void report_prefix(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
const char *report_last(void);
/* The name of a status (vram_status_name, which api.c exports). */
const char *report_status_name(vram_status status);
void report_clear(void);
/* For a function that answers -1 with its reason in the caller's buffer:
 * writes the message into err (n bytes) and returns -1, so that a failure
 * is one line: `return report_into(err, errlen, "...", ...);`. */
int report_into(char *err, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

void log_set_level(int level);
int log_level(void);
void vlog(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
