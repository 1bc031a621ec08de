/* check: the assertions of vram's tests. A failed check prints where and
 * what, and ends the test with status 1. */
#ifndef VRAM_CHECK_H
#define VRAM_CHECK_H

#include <vram.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ftw.h>
#include <sys/stat.h>
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

/* A private simulated machine for this test: its own state directory
 * (under TMPDIR), so that tests running side by side do not share a GPU.
 * It is removed when the test exits, also through a failed CHECK; only by
 * the process that made it, not by a child that exits first. */
static char private_gpu_dir[4096];
static pid_t private_gpu_owner;

static inline int private_gpu_remove_one(const char *path, const struct stat *st, int flag,
                                         struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    remove(path);
    return 0;
}

static inline void private_gpu_remove(void)
{
    if (private_gpu_owner == getpid())
        nftw(private_gpu_dir, private_gpu_remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

static inline void private_gpu(const char *devices)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(private_gpu_dir, sizeof private_gpu_dir, "%s/vram-test.XXXXXX",
             tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(private_gpu_dir)) {
        perror("mkdtemp");
        exit(1);
    }
    private_gpu_owner = getpid();
    atexit(private_gpu_remove);
    setenv("VRAM_SIM_DIR", private_gpu_dir, 1);
    setenv("VRAM_SIM_DEVICES", devices, 1);
}

/* In a test that re-executed itself after private_gpu(): this process now
 * owns the directory and removes it at exit. */
static inline void private_gpu_inherited(void)
{
    const char *dir = getenv("VRAM_SIM_DIR");
    if (!dir || snprintf(private_gpu_dir, sizeof private_gpu_dir, "%s", dir) >=
                    (int)sizeof private_gpu_dir)
        return;
    private_gpu_owner = getpid();
    atexit(private_gpu_remove);
}


/* Preloads the interposer at `path` into the programs this process
 * executes, as `vram run` names it: by its file name, its folder appended
 * to LD_LIBRARY_PATH, since LD_PRELOAD cannot carry a path with a space (a
 * checkout under such a folder). */
static inline void preload_interposer(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash) {
        setenv("LD_PRELOAD", path, 1);
        return;
    }
    char dirs[8192];
    const char *old = getenv("LD_LIBRARY_PATH");
    snprintf(dirs, sizeof dirs, "%s%s%.*s", old && *old ? old : "", old && *old ? ":" : "",
             (int)(slash - path), path);
    setenv("LD_LIBRARY_PATH", dirs, 1);
    setenv("LD_PRELOAD", slash + 1, 1);
}


/* In a child the test forked: executes this test program again, with the
 * words its main() was given (argv, NULL-ended), under a budget. Per
 * process: the interposer at argv[1] preloaded, VRAM_MEMORY_LIMIT=budget.
 * As a command: `vram` (argv[2]) run --limit budget --log off, then
 * `run_words` (NULL-ended, or NULL) before its "--", and `before_self`
 * (likewise) between "--" and this program. Returns only where the exec
 * failed (said), for the caller to _exit. */
static inline void exec_self_under_budget(bool per_process, const char *budget, char **argv,
                                          const char *const *run_words,
                                          const char *const *before_self)
{
    if (per_process) {
        preload_interposer(argv[1]);
        setenv("VRAM_MEMORY_LIMIT", budget, 1);
        execv("/proc/self/exe", argv);
        perror("exec");
        return;
    }
    char self[4096];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    self[len > 0 ? len : 0] = 0;
    enum { MAX_WORDS = 64 };
    const char *words[MAX_WORDS];
    int n = 0;
    const char *const head[] = {argv[2], "run", "--limit", budget, "--log", "off", NULL};
    const char *const *parts[] = {head, run_words, (const char *const[]){"--", NULL}, before_self,
                                  (const char *const[]){self, NULL}, (const char *const *)argv + 1};
    for (size_t p = 0; p < sizeof parts / sizeof *parts; p++)
        for (const char *const *w = parts[p]; w && *w; w++) {
            if (n == MAX_WORDS - 1) {
                fprintf(stderr, "exec_self_under_budget: over %d words\n", MAX_WORDS - 1);
                return;
            }
            words[n++] = *w;
        }
    words[n] = NULL;
    execv(argv[2], (char *const *)words);
    perror("exec");
}

#endif
