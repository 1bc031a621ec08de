/* check: the assertions of vram's tests. A failed check prints where and
 * what, and ends the test with status 1. */
#ifndef VRAM_CHECK_H
#define VRAM_CHECK_H

#include <vram.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CHECK(cond)                                                                             \
    do {                                                                                        \
        if (!(cond)) {                                                                          \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);           \
            exit(1);                                                                            \
        }                                                                                       \
    } while (0)

#define CHECK_OK(call)                                                                          \
    do {                                                                                        \
        vram_status s_ = (call);                                                                \
        if (s_ != VRAM_OK) {                                                                    \
            fprintf(stderr, "%s:%d: %s returned %s: %s\n", __FILE__, __LINE__, #call,          \
                    vram_status_name(s_), vram_last_error());                                   \
            exit(1);                                                                            \
        }                                                                                       \
    } while (0)

#define CHECK_STATUS(call, want)                                                                \
    do {                                                                                        \
        vram_status s_ = (call);                                                                \
        if (s_ != (want)) {                                                                     \
            fprintf(stderr, "%s:%d: %s returned %s, expected %s (message: %s)\n", __FILE__,    \
                    __LINE__, #call, vram_status_name(s_), vram_status_name(want),             \
                    vram_last_error());                                                         \
            exit(1);                                                                            \
        }                                                                                       \
    } while (0)

#define CHECK_CONTAINS(text, needle)                                                            \
    do {                                                                                        \
        const char *t_ = (text);                                                                \
        if (!t_ || !strstr(t_, (needle))) {                                                     \
            fprintf(stderr, "%s:%d: \"%s\" does not contain \"%s\"\n", __FILE__, __LINE__,     \
                    t_ ? t_ : "(null)", (needle));                                              \
            exit(1);                                                                            \
        }                                                                                       \
    } while (0)

#define GiB (1024ull * 1024 * 1024)
#define MiB (1024ull * 1024)

/* A private simulated machine for this test: its own state directory, so
 * that tests running side by side do not share a GPU. */
static inline void private_gpu(const char *devices)
{
    static char dir[] = "/tmp/vram-test.XXXXXX";
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        exit(1);
    }
    setenv("VRAM_SIM_DIR", dir, 1);
    setenv("VRAM_SIM_DEVICES", devices, 1);
}

#endif
