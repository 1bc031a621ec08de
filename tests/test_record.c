/* The recorder: every event of every thread reaches the file, in each
 * thread's order and exactly as recorded; a thread's events are written
 * when it ends, and within a flush period while it idles; a killed
 * process's file is readable up to its last whole block; a cut or damaged
 * block ends what is read and is reported; a forked child records into a
 * file of its own, and 200 children of a threaded parent neither hang nor
 * lose or mix an event; memory stays bounded; bad directories are refused with
 * their name; a file of version 1 (before NVML's readings) is still read
 * and one newer than this vram refused by its version; NVML's readings
 * make NVML's line (the sum of the live processes' latest readings) in the
 * walk, the timeline and the summary, and none where there are none. Each
 * case runs in a child process: a process records once. */
#include "../src/record/formats.h"
#include "../src/record/reader.h"
#include "../src/record/recorder.h"
#include "../src/record/summary.h"
#include "../src/record/timeline.h"
#include "../src/record/usage.h"
#include "check.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

/* A sanitizer's runtime cannot start a thread in a child forked from a
 * threaded process: ThreadSanitizer refuses to, AddressSanitizer (GCC 12's)
 * hangs now and then in its allocator, whose locks a thread of the parent
 * held. So the children of "forks from threads" start threads of their own
 * in the plain build only (the recorder starts none in a forked child). */
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define UNDER_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
#define UNDER_SANITIZER 1
#endif
#endif

static char dir[512];

static void fresh_dir(void)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/vram-test-record.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    CHECK(mkdtemp(dir));
}

static void clear_dir(void)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    while (d && (de = readdir(d)) != NULL) {
        char path[1024];
        if (de->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        unlink(path);
    }
    if (d)
        closedir(d);
}

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

static void remove_tree(const char *path) { nftw(path, remove_one, 16, FTW_DEPTH | FTW_PHYS); }

static void remove_dir(void) { remove_tree(dir); }

static int files_in_dir(void)
{
    int n = 0;
    DIR *d = opendir(dir);
    struct dirent *de;
    while (d && (de = readdir(d)) != NULL)
        n += de->d_name[0] != '.';
    if (d)
        closedir(d);
    return n;
}

/* Runs fn in a child: whether it ended with status 0. */
static bool child_passes(void (*fn)(void))
{
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        fn();
        exit(0);
    }
    int st;
    return waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

static void in_child(void (*fn)(void)) { CHECK(child_passes(fn)); }

static void start(void)
{
    char err[512];
    if (recorder_start(dir, err, sizeof err) != 0) {
        fprintf(stderr, "recorder_start: %s\n", err);
        exit(1);
    }
}

/* Thread k's event i: address k << 32 | i, so order and origin show. */
#define ADDRESS(k, i) ((uint64_t)(k) << 32 | (uint64_t)(i))

struct worker {
    int k;
    uint32_t n;
};

static void *record_n(void *arg)
{
    const struct worker *w = arg;
    for (uint32_t i = 0; i < w->n; i++) {
        if (i % 2 == 0)
            record_alloc(RECORD_PLAIN, w->k % 3, ADDRESS(w->k, i), 4096 + i, 0x100 + w->k);
        else
            record_free(RECORD_PLAIN, w->k % 3, ADDRESS(w->k, i), 4096 + i, 0x100 + w->k);
    }
    return NULL;
}

/* Each thread's events are all there, in its order, as recorded. */
static void check_threads(const struct recording *r, int threads, uint32_t n)
{
    uint32_t *next = calloc((size_t)threads, sizeof *next);
    uint64_t *tid = calloc((size_t)threads, sizeof *tid);
    uint64_t last_time = 0;
    for (size_t i = 0; i < r->nevents; i++) {
        const struct record_event *e = &r->events[i];
        CHECK(e->time >= last_time); /* the reader's order */
        last_time = e->time;
        if (e->action != RECORD_ALLOC && e->action != RECORD_FREE)
            continue;
        int k = (int)(e->address >> 32);
        uint32_t seq = (uint32_t)e->address;
        CHECK(k >= 0 && k < threads);
        CHECK(seq == next[k]); /* no gap, no duplicate, in order */
        next[k]++;
        CHECK(e->action == (seq % 2 == 0 ? RECORD_ALLOC : RECORD_FREE));
        CHECK(e->bytes == 4096 + seq && e->stream == 0x100u + (unsigned)k);
        CHECK(e->family == RECORD_PLAIN && e->device == k % 3);
        if (!tid[k])
            tid[k] = e->thread;
        CHECK(tid[k] == e->thread); /* one thread, one id */
    }
    for (int k = 0; k < threads; k++)
        CHECK(next[k] == n);
    free(next);
    free(tid);
}

static struct recording load(void)
{
    struct recording r;
    char err[512];
    if (recording_load(dir, &r, err, sizeof err) != 0) {
        fprintf(stderr, "recording_load: %s\n", err);
        exit(1);
    }
    return r;
}

/* ----------------------------------------------------------- the cases */

#define THREADS 4
#define PER_THREAD 50000u

static void many_threads(void)
{
    start();
    pthread_t t[THREADS];
    struct worker w[THREADS];
    for (int k = 0; k < THREADS; k++) {
        w[k] = (struct worker){k, PER_THREAD};
        CHECK(pthread_create(&t[k], NULL, record_n, &w[k]) == 0);
    }
    /* Every other kind of event, once, from this thread. */
    record_resize(RECORD_POOL, 1, 0xabc, 0, 8 << 20, 0x77);
    record_map(2, 0x7000000, 2 << 20, 0x11);
    record_unmap(2, 0x7000000, 2 << 20);
    record_release(2, 0x11, 2 << 20);
    record_refusal(RECORD_MANAGED, 0, 3ull << 30, 1ull << 30, RECORD_OVER_BUDGET, 0);
    record_budget(0, 4ull << 30, RECORD_PROCESS_BUDGET);
    record_context(1, 0xc0ffee);
    for (int k = 0; k < THREADS; k++)
        pthread_join(t[k], NULL);
    /* Flushed: in the file while the process runs on. */
    recorder_flush();
    struct recording before = load();
    CHECK(before.nevents == THREADS * PER_THREAD + 7);
    recording_free(&before);
    recorder_stop();
    struct recorder_stats s;
    recorder_get_stats(&s);
    CHECK(s.dropped == 0);
    CHECK(s.written == THREADS * PER_THREAD + 7 + 1);
    /* Bounded: the threads' own buffers, the queue and the spares. */
    CHECK(s.buffers_peak <= THREADS + 1 + RECORDER_QUEUE + 4);
    CHECK(files_in_dir() == 1);
    CHECK(recorder_path() && strstr(recorder_path(), dir) == recorder_path());

    struct recording r = load();
    CHECK(r.nevents == THREADS * PER_THREAD + 7 + 1);
    CHECK(r.nimages == 1 && r.images[0].has_info && r.images[0].exited);
    CHECK(r.images[0].info.pid == (uint32_t)getpid());
    CHECK(r.images[0].info.ppid == (uint32_t)getppid());
    CHECK_CONTAINS(r.images[0].info.command, "test_record");
    CHECK(r.notes[0] == 0);
    CHECK(r.ndevices == 3);
    check_threads(&r, THREADS, PER_THREAD);
    int seen = 0;
    for (size_t i = 0; i < r.nevents; i++) {
        const struct record_event *e = &r.events[i];
        switch (e->action) {
        case RECORD_RESIZE:
            CHECK(e->family == RECORD_POOL && e->device == 1 && e->address == 0xabc &&
                  e->aux == 0 && e->bytes == 8 << 20 && e->stream == 0x77);
            seen |= 1;
            break;
        case RECORD_MAP:
            CHECK(e->family == RECORD_VMM && e->address == 0x7000000 && e->aux == 0x11);
            seen |= 2;
            break;
        case RECORD_UNMAP: seen |= 4; break;
        case RECORD_RELEASE: CHECK(e->address == 0x11); seen |= 8; break;
        case RECORD_REFUSE:
            CHECK(e->bytes == 3ull << 30 && e->aux == 1ull << 30 &&
                  e->reason == RECORD_OVER_BUDGET && e->family == RECORD_MANAGED);
            seen |= 16;
            break;
        case RECORD_BUDGET:
            CHECK(e->bytes == 4ull << 30 && e->reason == RECORD_PROCESS_BUDGET);
            seen |= 32;
            break;
        case RECORD_CONTEXT: CHECK(e->address == 0xc0ffee && e->device == 1); seen |= 64; break;
        case RECORD_EXIT:
            CHECK(i == r.nevents - 1 && e->device == RECORD_NO_DEVICE);
            seen |= 128;
            break;
        }
    }
    CHECK(seen == 255);
    recording_free(&r);
}

/* Threads that end with a part-filled buffer: it is written at their end. */
static void short_threads(void)
{
    start();
    for (int round = 0; round < 3; round++) {
        pthread_t t[THREADS];
        struct worker w[THREADS];
        for (int k = 0; k < THREADS; k++) {
            w[k] = (struct worker){k, 37};
            CHECK(pthread_create(&t[k], NULL, record_n, &w[k]) == 0);
        }
        for (int k = 0; k < THREADS; k++)
            pthread_join(t[k], NULL);
    }
    /* Not stopped: only the threads' ends wrote these. */
    for (int tries = 0; tries < 50; tries++) {
        struct recorder_stats s;
        recorder_get_stats(&s);
        if (s.written == 3 * THREADS * 37)
            break;
        usleep(20000);
    }
    struct recording r = load();
    CHECK(r.nevents == 3 * THREADS * 37);
    CHECK(!r.images[0].exited);
    recording_free(&r);
}

static void nothing_recorded(void)
{
    /* Never started: the API does nothing and makes no file. */
    record_alloc(RECORD_PLAIN, 0, 0x1000, 4096, 0);
    struct recorder_stats s;
    recorder_get_stats(&s);
    CHECK(s.written == 0 && s.buffers == 0);
    CHECK(files_in_dir() == 0);
    CHECK(recorder_path() == NULL);
    /* Started, but no event: no file either. */
    start();
    recorder_stop();
    CHECK(files_in_dir() == 0);
}

static void bad_directories(void)
{
    char err[512];
    CHECK(recorder_start("/nonexistent/vram-record", err, sizeof err) == -1);
    CHECK_CONTAINS(err, "\"/nonexistent/vram-record\"");
    CHECK_CONTAINS(err, "expected an existing directory");
    CHECK(recorder_start("/etc/passwd", err, sizeof err) == -1);
    CHECK_CONTAINS(err, "not a directory");
    CHECK(recorder_start("", err, sizeof err) == -1);
    setenv("VRAM_RECORD", "/nonexistent/x", 1);
    CHECK(recorder_start_from_environment(err, sizeof err) == -1);
    CHECK_CONTAINS(err, "VRAM_RECORD=\"/nonexistent/x\"");
    unsetenv("VRAM_RECORD");
    CHECK(recorder_start_from_environment(err, sizeof err) == 0);
    CHECK(!RECORDER_ON());
    setenv("VRAM_RECORD", dir, 1);
    CHECK(recorder_start_from_environment(err, sizeof err) == 0);
    CHECK(RECORDER_ON());
    record_budget(0, 1 << 30, RECORD_COMMAND_BUDGET);
    recorder_stop();
    CHECK(recorder_start(dir, err, sizeof err) == -1); /* once per process */
    CHECK_CONTAINS(err, "already recorded");
    CHECK(files_in_dir() == 1);
}

/* A fork: the child's events go to a file of its own; what the parent had
 * buffered stays the parent's, written once. */
static void forks(void)
{
    start();
    struct worker w = {0, 100};
    record_n(&w);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        struct worker c = {1, 50};
        record_n(&c);
        exit(0);
    }
    int st;
    CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    struct worker more = {2, 30};
    record_n(&more);
    recorder_stop();
    CHECK(files_in_dir() == 2);
    struct recording r = load();
    CHECK(r.nimages == 2);
    CHECK(r.nevents == 100 + 30 + 1 + 50 + 1);
    for (size_t i = 0; i < r.nimages; i++) {
        const struct recording_image *im = &r.images[i];
        CHECK(im->exited && im->has_info);
        if (im->info.pid == (uint32_t)getpid()) {
            CHECK(im->events == 131);
        } else {
            CHECK(im->info.pid == (uint32_t)pid && im->info.ppid == (uint32_t)getpid());
            CHECK(im->events == 51);
        }
    }
    for (size_t i = 0; i < r.nevents; i++) {
        int k = (int)(r.events[i].address >> 32);
        if (r.events[i].action == RECORD_EXIT)
            continue;
        CHECK(r.images[r.image_of[i]].info.pid == (uint32_t)(k == 1 ? pid : getpid()));
    }
    recording_free(&r);
}

/* A threaded parent that forks while its threads allocate and record, as
 * PyTorch's DataLoader forks its workers: 200 children, none of which may
 * wait for ever on a lock a thread of the parent held at the fork (a
 * sanitizer's allocator keeps its locks across fork(): a child that
 * started a thread and joined it at exit hung in about 1 run in 5 under
 * ASan). Each child that records writes exactly its own events, in a file
 * of its own, at its exit; one that records nothing leaves no file; the
 * parent's file holds every event of its threads once and in order. */
#define FORKS 200
#define BUSY 3
#define BUSY_PER_FORK 400u /* events per parent thread per fork, at most */

static _Atomic int forks_done;
static atomic_bool busy_end;

/* LeakSanitizer cannot check a child forked from a threaded process: at
 * exit it takes every lock of the allocator, which a thread of the parent
 * may have held at the fork (GCC 12's runtime does not take them across
 * fork(), so the child hangs there, recorder or not), and it lists the
 * parent's threads, which it cannot stop (false leaks). Off in those
 * children only; the rest of ASan stays on. */
static bool lsan_off;
int __lsan_is_turned_off(void);
int __lsan_is_turned_off(void) { return lsan_off; }

/* ThreadSanitizer waits a second at exit while other threads are listed,
 * and a child forked from a threaded process lists its parent's: 200
 * seconds of sleep, for nothing to wait for. */
const char *__tsan_default_options(void);
const char *__tsan_default_options(void) { return "atexit_sleep_ms=0"; }

/* Allocates and frees (the allocator's locks taken and let go all along)
 * and records, up to BUSY_PER_FORK events ahead of the forks. */
static void *busy(void *arg)
{
    struct worker *w = arg;
    uint32_t i = 0;
    for (uint32_t round = 0; !atomic_load(&busy_end); round++) {
        void *p[8];
        for (int j = 0; j < 8; j++)
            p[j] = malloc(32 + (size_t)((round + (uint32_t)j) % 61) * 48);
        for (int j = 0; j < 8; j++)
            free(p[j]);
        if (i < (uint32_t)(atomic_load(&forks_done) + 1) * BUSY_PER_FORK) {
            if (i % 2 == 0)
                record_alloc(RECORD_PLAIN, w->k % 3, ADDRESS(w->k, i), 4096 + i, 0x100 + w->k);
            else
                record_free(RECORD_PLAIN, w->k % 3, ADDRESS(w->k, i), 4096 + i, 0x100 + w->k);
            i++;
        } else if (round % 16 == 0) {
            usleep(50); /* ahead of the forks: room for them on a busy machine */
        }
    }
    w->n = i;
    return NULL;
}

/* Child c records this many events (some none, some several buffers). */
static uint32_t child_events(int c)
{
    if (c % 4 == 0)
        return 0;
    return c % 25 == 1 ? 2 * RECORDER_BUFFER_EVENTS + 77 : 3 + (uint32_t)c;
}

#ifndef UNDER_SANITIZER
static void *child_thread(void *arg)
{
    record_n(arg);
    return NULL;
}
#endif

static void forked_child(int c)
{
    lsan_off = true;
    struct worker w = {BUSY + c, child_events(c)};
    record_n(&w);
#ifndef UNDER_SANITIZER
    if (c % 10 == 3) { /* threads of the child's own, recording too */
        struct worker tw = {BUSY + FORKS + c, 500};
        pthread_t t;
        if (pthread_create(&t, NULL, child_thread, &tw) != 0 || pthread_join(t, NULL) != 0)
            _exit(2);
    }
#endif
    exit(0); /* the recorder's last write is at exit */
}

/* The events child c's image must hold, its exit record aside. */
static uint32_t child_total(int c)
{
    uint32_t n = child_events(c);
#ifndef UNDER_SANITIZER
    if (c % 10 == 3)
        n += 500;
#endif
    return n;
}

static void forks_from_threads(void)
{
    start();
    pthread_t t[BUSY];
    struct worker w[BUSY];
    for (int k = 0; k < BUSY; k++) {
        w[k] = (struct worker){k, 0};
        CHECK(pthread_create(&t[k], NULL, busy, &w[k]) == 0);
    }
    pid_t pids[FORKS];
    int recorded = 0;
    for (int c = 0; c < FORKS; c++) {
        pids[c] = fork();
        CHECK(pids[c] >= 0);
        if (pids[c] == 0)
            forked_child(c);
        /* A child that has not ended in a minute (it takes milliseconds)
         * waits on a lock that nobody will let go. */
        int st = 0;
        pid_t got = 0;
        for (int ms = 0; ms < 60000 && (got = waitpid(pids[c], &st, WNOHANG)) == 0; ms++)
            usleep(1000);
        if (got != pids[c]) {
            fprintf(stderr, "child %d of %d (pid %d) hung: it did not end in a minute\n", c + 1,
                    FORKS, (int)pids[c]);
            kill(pids[c], SIGKILL);
            waitpid(pids[c], NULL, 0);
            atomic_store(&busy_end, true);
            for (int k = 0; k < BUSY; k++)
                pthread_join(t[k], NULL);
            exit(1);
        }
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
        recorded += child_total(c) > 0;
        atomic_fetch_add(&forks_done, 1);
    }
    atomic_store(&busy_end, true);
    for (int k = 0; k < BUSY; k++)
        pthread_join(t[k], NULL);
    recorder_stop();

    CHECK(files_in_dir() == 1 + recorded);
    struct recording r = load();
    CHECK(r.nimages == (size_t)(1 + recorded));
    CHECK(r.notes[0] == 0);
    uint32_t *next = calloc(BUSY + 2 * FORKS, sizeof *next);
    CHECK(next);
    for (size_t i = 0; i < r.nevents; i++) {
        const struct record_event *e = &r.events[i];
        const struct recording_image *im = &r.images[r.image_of[i]];
        if (e->action == RECORD_EXIT)
            continue;
        int k = (int)(e->address >> 32);
        CHECK(k >= 0 && k < BUSY + 2 * FORKS);
        int c = k < BUSY ? -1 : (k - BUSY) % FORKS; /* the child, or the parent's thread */
        CHECK(im->info.pid == (uint32_t)(c < 0 ? getpid() : pids[c]));
        CHECK((uint32_t)e->address == next[k]); /* no gap, no duplicate, in order */
        next[k]++;
        CHECK(e->bytes == 4096 + (uint32_t)e->address);
    }
    for (int k = 0; k < BUSY; k++)
        CHECK(next[k] == w[k].n && w[k].n > 0);
    for (size_t i = 0; i < r.nimages; i++) {
        const struct recording_image *im = &r.images[i];
        CHECK(im->has_info && im->exited);
        if (im->info.pid == (uint32_t)getpid())
            continue;
        CHECK(im->info.ppid == (uint32_t)getpid());
        int c = 0;
        while (c < FORKS && (uint32_t)pids[c] != im->info.pid)
            c++;
        CHECK(c < FORKS && child_total(c) > 0);
        CHECK(im->events == child_total(c) + 1);
    }
    free(next);
    recording_free(&r);
}

/* Recording a little and then idling: on disk within a flush period. */
static void idle_then_killed(void)
{
    int p[2];
    CHECK(pipe(p) == 0);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        start();
        struct worker w = {0, 500};
        record_n(&w);
        CHECK(write(p[1], "x", 1) == 1);
        pause();
        _exit(0);
    }
    char c;
    CHECK(read(p[0], &c, 1) == 1);
    size_t got = 0;
    for (int tries = 0; tries < 100 && got < 500; tries++) {
        usleep(20000);
        if (files_in_dir() == 1) {
            struct recording r = load();
            got = r.nevents;
            recording_free(&r);
        }
    }
    CHECK(got == 500);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    struct recording r = load();
    CHECK(r.nevents == 500 && !r.images[0].exited);
    CHECK_CONTAINS(r.notes, "no exit record");
    check_threads(&r, 1, 500);
    recording_free(&r);
    close(p[0]);
    close(p[1]);
}

static char *only_file(void)
{
    static char path[1024];
    DIR *d = opendir(dir);
    struct dirent *de;
    path[0] = 0;
    while (d && (de = readdir(d)) != NULL)
        if (de->d_name[0] != '.')
            snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
    if (d)
        closedir(d);
    return path;
}

static void *forever(void *arg)
{
    int k = (int)(intptr_t)arg;
    for (uint32_t i = 0;; i++) {
        /* Bursts with pauses: a few buffers a round, not gigabytes. */
        if (i % 512 == 0)
            usleep(200);
        if (i % 2 == 0)
            record_alloc(RECORD_PLAIN, k % 3, ADDRESS(k, i), 4096 + i, 0x100 + k);
        else
            record_free(RECORD_PLAIN, k % 3, ADDRESS(k, i), 4096 + i, 0x100 + k);
    }
    return NULL;
}

/* Killed in the middle of recording as fast as it can, again and again:
 * every time, each thread's events are in the file without a gap up to
 * where it was cut. */
static void killed_while_recording(void)
{
    for (int round = 0; round < 5; round++) {
        clear_dir();
        pid_t pid = fork();
        CHECK(pid >= 0);
        if (pid == 0) {
            start();
            pthread_t t;
            pthread_create(&t, NULL, forever, (void *)(intptr_t)1);
            forever((void *)(intptr_t)0);
        }
        /* In the middle of it: once a few blocks are in the file, however
         * slow the build (sanitizers) or the machine, and then a little
         * later each round. */
        off_t blocks = 4 * (off_t)(RECORDER_BUFFER_EVENTS * sizeof(struct record_event));
        struct stat st;
        for (int tries = 0; tries < 1000; tries++) {
            const char *f = only_file();
            if (f[0] && stat(f, &st) == 0 && st.st_size >= blocks)
                break;
            usleep(10000);
        }
        usleep((useconds_t)round * 37000);
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        struct recording r = load();
        CHECK(r.nevents > 3 * RECORDER_BUFFER_EVENTS);
        CHECK(r.nimages == 1 && !r.images[0].exited);
        uint32_t next[2] = {0, 0};
        for (size_t i = 0; i < r.nevents; i++) {
            const struct record_event *e = &r.events[i];
            int k = (int)(e->address >> 32);
            CHECK(k == 0 || k == 1);
            CHECK((uint32_t)e->address == next[k]);
            next[k]++;
            CHECK(e->bytes == 4096 + (uint32_t)e->address);
        }
        recording_free(&r);
    }
}

static void one_thread_stopped(void)
{
    start();
    struct worker w = {0, 5000};
    record_n(&w);
    recorder_stop();
}

/* A block cut short (a kill during write) or damaged (a crash, a bad
 * disk): everything before it is read, and the reader says what it
 * skipped. */
static void cut_and_damaged(void)
{
    in_child(one_thread_stopped);
    char *path = only_file();
    struct stat st;
    CHECK(stat(path, &st) == 0);
    /* 5000 events and the exit: the last blocks hold them. Cut 100 bytes. */
    CHECK(truncate(path, st.st_size - 100) == 0);
    struct recording r = load();
    CHECK(r.nevents > 0 && r.nevents < 5000);
    CHECK_CONTAINS(r.notes, "cut short");
    CHECK_CONTAINS(r.notes, path);
    check_threads(&r, 1, (uint32_t)r.nevents);
    size_t cut = r.nevents;
    recording_free(&r);

    /* Damage one byte in the middle of the first events block's payload. */
    int fd = open(path, O_RDWR);
    CHECK(fd >= 0);
    off_t at = (off_t)sizeof(struct record_file_header) + 32 + 256 + 32 + 100;
    unsigned char byte;
    CHECK(pread(fd, &byte, 1, at) == 1);
    byte ^= 0x40;
    CHECK(pwrite(fd, &byte, 1, at) == 1);
    close(fd);
    r = load();
    CHECK(r.nevents < cut);
    CHECK_CONTAINS(r.notes, "damaged");
    recording_free(&r);

    /* Not a recording at all: refused with the file's name. */
    fd = open(path, O_WRONLY | O_TRUNC);
    CHECK(write(fd, "Thread,Time\n", 12) == 12);
    close(fd);
    char err[512];
    CHECK(recording_load(path, &r, err, sizeof err) == -1);
    CHECK_CONTAINS(err, path);
    CHECK_CONTAINS(err, "not a vram recording");
}

static char prepared[1024];

static void record_into_prepared(void)
{
    char err[512];
    if (recorder_start(prepared, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        exit(1);
    }
    struct worker w = {0, 1000};
    record_n(&w);
}

/* What the supervisor of `vram run --record OUT` does: a private
 * directory beside OUT for the command's processes, and at the end OUT in
 * its format and the directory gone. */
static void finish_a_run(void)
{
    char out[768], err[1024], notes[1024];
    snprintf(out, sizeof out, "%s/run.csv", dir);
    CHECK(recording_prepare(out, prepared, sizeof prepared, err, sizeof err) == 0);
    CHECK(strncmp(prepared, out, strlen(out)) == 0);
    struct stat st;
    CHECK(stat(prepared, &st) == 0 && S_ISDIR(st.st_mode) && (st.st_mode & 0777) == 0700);
    in_child(record_into_prepared);
    in_child(record_into_prepared);
    CHECK(recording_finish(prepared, out, FORMAT_CSV, notes, sizeof notes, err, sizeof err) == 0);
    CHECK(stat(prepared, &st) != 0 && errno == ENOENT);
    FILE *f = fopen(out, "r");
    CHECK(f);
    char line[256];
    int lines = 0;
    while (fgets(line, sizeof line, f))
        lines++;
    fclose(f);
    CHECK(lines == 1 + 2 * 1000);
    unlink(out);

    /* A command that touched no GPU: a recording without events. */
    snprintf(out, sizeof out, "%s/none.vrec", dir);
    CHECK(recording_prepare(out, prepared, sizeof prepared, err, sizeof err) == 0);
    CHECK(recording_finish(prepared, out, FORMAT_VREC, notes, sizeof notes, err, sizeof err) == 0);
    struct recording r;
    CHECK(recording_load(out, &r, err, sizeof err) == 0 && r.nevents == 0);
    recording_free(&r);
    unlink(out);

    /* OUT cannot be written: the events stay, and the message says where. */
    snprintf(out, sizeof out, "%s/gone/run.json", dir);
    char outside[768];
    snprintf(outside, sizeof outside, "%s/kept", dir);
    CHECK(mkdir(outside, 0700) == 0);
    snprintf(prepared, sizeof prepared, "%s", outside);
    in_child(record_into_prepared);
    CHECK(recording_finish(prepared, out, FORMAT_TRACE, notes, sizeof notes, err,
                           sizeof err) == -1);
    CHECK_CONTAINS(err, "gone/run.json");
    CHECK_CONTAINS(err, "the events are kept in");
    CHECK_CONTAINS(err, "vram record convert");
    CHECK(stat(prepared, &st) == 0);
    remove_tree(prepared);
}

/* A file of `version` holding image 1's and image 2's events. */
static void write_file(const char *path, uint32_t version, const struct record_event *one,
                       size_t n1, const struct record_event *two, size_t n2)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    CHECK(fd >= 0);
    struct record_file_header h = {.version = version,
                                   .event_size = sizeof(struct record_event),
                                   .byte_order = 0x01020304u};
    memcpy(h.magic, RECORD_FILE_MAGIC, 8);
    CHECK(write(fd, &h, sizeof h) == (ssize_t)sizeof h);
    CHECK(record_write_block(fd, RECORD_BLOCK_EVENTS, 100, 1, one,
                             (uint32_t)(n1 * sizeof *one)) == 0);
    if (n2)
        CHECK(record_write_block(fd, RECORD_BLOCK_EVENTS, 200, 2, two,
                                 (uint32_t)(n2 * sizeof *two)) == 0);
    close(fd);
}

#define EV(t, act, fam, dev, addr, b, x)                                                        \
    {.time = (t), .address = (addr), .bytes = (b), .aux = (x), .device = (dev), .family = (fam), \
     .action = (act)}

struct nvml_seen {
    uint64_t at[8], line[8]; /* NVML's line of device 0 after the event at each time */
    int n;
    bool device1; /* device 1 ever had a line */
};

static void note_nvml(const struct usage *u, const struct usage_change *c, void *arg)
{
    struct nvml_seen *s = arg;
    if (u->ndevices > 1 && u->nvml_seen[1])
        s->device1 = true;
    if (c->kind != USAGE_NONE || !u->nvml_seen[0] || s->n == 8)
        return;
    if (c->e->action == RECORD_NVML || c->e->action == RECORD_EXIT) {
        s->at[s->n] = c->e->time;
        s->line[s->n++] = u->nvml[0];
    }
}

static void versions_and_nvml(void)
{
    char path[600], err[1024];
    snprintf(path, sizeof path, "%s/r.vrec", dir);
    const uint64_t M = 1 << 20;
    /* Two processes on device 0; device 1 has an allocation and no reading. */
    const struct record_event one[] = {
        EV(10, RECORD_ALLOC, RECORD_PLAIN, 0, 0x1000, 100 * M, 0),
        EV(12, RECORD_ALLOC, RECORD_PLAIN, 1, 0x2000, 10 * M, 0),
        EV(20, RECORD_NVML, RECORD_NO_FAMILY, 0, 0, 120 * M, 200 * M),
        EV(40, RECORD_EXIT, RECORD_NO_FAMILY, RECORD_NO_DEVICE, 0, 0, 0),
    };
    const struct record_event two[] = {
        EV(15, RECORD_ALLOC, RECORD_PLAIN, 0, 0x1000, 50 * M, 0),
        EV(30, RECORD_NVML, RECORD_NO_FAMILY, 0, 0, 80 * M, 200 * M),
        EV(50, RECORD_NVML, RECORD_NO_FAMILY, 0, 0, 60 * M, 60 * M),
        EV(60, RECORD_EXIT, RECORD_NO_FAMILY, RECORD_NO_DEVICE, 0, 0, 0),
    };
    struct recording r;

    /* Version 1, before NVML's readings: read, and no line anywhere. */
    write_file(path, 1, one, 2, two, 1);
    CHECK(recording_load(path, &r, err, sizeof err) == 0 && r.nevents == 3);
    struct timeline t;
    CHECK(timeline_build(&r, 50, -1, &t) == 0 && t.ndevices == 2);
    CHECK(!t.devices[0].nvml_max && !t.devices[1].nvml_max && !t.devices[0].nvml_peak);
    timeline_free(&t);
    struct summary sum;
    CHECK(summary_build(&r, &sum) == 0 && !sum.devices[0].nvml && !sum.devices[1].nvml);
    summary_free(&sum);
    recording_free(&r);

    /* Newer than this vram: refused, naming the file and both versions. */
    write_file(path, RECORD_VERSION + 1, one, 4, two, 4);
    CHECK(recording_load(path, &r, err, sizeof err) == -1);
    CHECK_CONTAINS(err, path);
    char want[64];
    snprintf(want, sizeof want, "version %d", RECORD_VERSION + 1);
    CHECK_CONTAINS(err, want);
    snprintf(want, sizeof want, "reads versions 1 to %d", RECORD_VERSION);
    CHECK_CONTAINS(err, want);

    /* This version: NVML's line is the sum of the live processes' latest
     * readings (their own figures, not the command's), 0 for one that
     * ended; it changes nothing vram counted. */
    write_file(path, RECORD_VERSION, one, 4, two, 4);
    CHECK(recording_load(path, &r, err, sizeof err) == 0 && r.nevents == 8);
    struct nvml_seen seen = {0};
    CHECK(usage_walk(&r, note_nvml, &seen) == 0);
    const uint64_t at[] = {20, 30, 40, 50, 60}, line[] = {120 * M, 200 * M, 80 * M, 60 * M, 0};
    CHECK(seen.n == 5 && !seen.device1);
    for (int i = 0; i < 5; i++)
        CHECK(seen.at[i] == at[i] && seen.line[i] == line[i]);
    CHECK(summary_build(&r, &sum) == 0);
    CHECK(sum.devices[0].nvml && sum.devices[0].nvml_peak == 200 * M);
    CHECK(sum.devices[0].peak == 150 * M && !sum.devices[1].nvml);
    summary_free(&sum);
    /* 50 columns over times 10..60: one a time unit, about. */
    CHECK(timeline_build(&r, 50, -1, &t) == 0 && t.ndevices == 2);
    const struct timeline_device *d0 = &t.devices[0];
    CHECK(d0->nvml_max && d0->nvml_last && d0->nvml_peak == 200 * M && !t.devices[1].nvml_max);
    int first = timeline_column_of(&t, 20), second = timeline_column_of(&t, 30);
    for (int c = 0; c < first; c++) /* no line before the first reading */
        CHECK(d0->nvml_max[c] == TIMELINE_NO_NVML && d0->nvml_last[c] == TIMELINE_NO_NVML);
    CHECK(d0->nvml_last[first] == 120 * M && d0->nvml_max[second] == 200 * M);
    CHECK(d0->nvml_last[timeline_column_of(&t, 45)] == 80 * M);
    CHECK(d0->nvml_last[t.ncols - 1] == 0);
    timeline_free(&t);
    recording_free(&r);
    unlink(path);
}

/* test_record [CASE]: every case, or the one named (to repeat it). */
int main(int argc, char **argv)
{
    static const struct {
        const char *name;
        void (*fn)(void);
    } cases[] = {
        {"many threads", many_threads},
        {"short threads", short_threads},
        {"nothing recorded", nothing_recorded},
        {"bad directories", bad_directories},
        {"forks", forks},
        {"forks from threads", forks_from_threads},
        {"idle then killed", idle_then_killed},
        {"killed while recording", killed_while_recording},
        {"cut and damaged", cut_and_damaged},
        {"finish a run", finish_a_run},
        {"versions and NVML's readings", versions_and_nvml},
    };
    int ran = 0;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        if (argc > 1 && strcmp(argv[1], cases[i].name) != 0)
            continue;
        ran++;
        fresh_dir();
        printf("%s\n", cases[i].name);
        fflush(stdout);
        bool passed = child_passes(cases[i].fn);
        remove_dir(); /* also after a failure: the test leaves nothing in /tmp */
        CHECK(passed);
    }
    if (!ran) {
        fprintf(stderr, "test_record: no case is named \"%s\"\n", argv[1]);
        return 2;
    }
    printf("ok\n");
    return 0;
}
