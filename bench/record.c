/* vram-bench-record: what recording adds to a governed call.
 *
 * The recorder's API (record_alloc and record_free, as the interposer's
 * hooks call them) on T threads at once, the writer thread writing to a
 * file in $TMPDIR (or /tmp), two ways:
 *   paced: each event follows about a microsecond of other work (a driver
 *     call takes longer than that), so the writer keeps up; recording on
 *     and off alternate, and the difference in the threads' CPU time per
 *     event is the recorder's cost on the calling thread (median of 5
 *     pairs; CPU time, so that other programs on the machine do not count);
 *   flat out: events as fast as the threads can make them, where the
 *     writer's file writes set the pace: events per second, and how often
 *     a thread waited for the writer (its buffers are bounded).
 * Each thread count runs in a child process of its own (a process records
 * into one directory, once).
 */
#include "../src/record/recorder.h"

#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PACED_EVENTS 200000  /* per thread and run */
#define FLAT_EVENTS 2000000  /* per thread */
#define PAIRS 5

static pthread_barrier_t go;
static int work_rounds;
static volatile uint64_t sink;

static double clock_ns(clockid_t clock)
{
    struct timespec t;
    clock_gettime(clock, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static double now(void) { return clock_ns(CLOCK_MONOTONIC); }

static uint64_t work(uint64_t x, int rounds)
{
    for (int i = 0; i < rounds; i++)
        x = x * 6364136223846793005ull + 1442695040888963407ull;
    return x;
}

struct run {
    int k, rounds;
    uint32_t events;
    double ns;  /* per event, on this thread: wall clock */
    double cpu; /* ... its own CPU time: not what other programs on the
                   machine take from it */
};

static void *worker(void *arg)
{
    struct run *r = arg;
    uint64_t base = 0x7f0000000000ull + ((uint64_t)r->k << 36), x = (uint64_t)r->k;
    pthread_barrier_wait(&go);
    double t0 = now(), c0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
    for (uint32_t i = 0; i < r->events; i += 2) {
        uint64_t p = base + (i & 127) * 0x200000;
        x = work(x, r->rounds);
        record_alloc(RECORD_PLAIN, 0, p, 2u << 20, 0);
        x = work(x, r->rounds);
        record_free(RECORD_PLAIN, 0, p, 2u << 20, 0);
    }
    r->ns = (now() - t0) / r->events;
    r->cpu = (clock_ns(CLOCK_THREAD_CPUTIME_ID) - c0) / r->events;
    sink = x;
    return NULL;
}

/* All threads at once; the mean of their ns per event (wall clock, or
 * their CPU time). */
static double run_threads(int threads, uint32_t events, int rounds, bool cpu)
{
    pthread_t t[16];
    struct run r[16];
    pthread_barrier_init(&go, NULL, (unsigned)threads);
    for (int i = 0; i < threads; i++) {
        r[i] = (struct run){.k = i, .rounds = rounds, .events = events};
        pthread_create(&t[i], NULL, worker, &r[i]);
    }
    double sum = 0;
    for (int i = 0; i < threads; i++) {
        pthread_join(t[i], NULL);
        sum += cpu ? r[i].cpu : r[i].ns;
    }
    pthread_barrier_destroy(&go);
    return sum / threads;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Rounds of work() that take about a microsecond of CPU here (the best
 * of several tries: other programs may take the CPU in between). */
static int calibrate(void)
{
    const int probe = 100000;
    double best = 1e18;
    for (int i = 0; i < 7; i++) {
        double t0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
        sink = work(sink, probe);
        double t = clock_ns(CLOCK_THREAD_CPUTIME_ID) - t0;
        if (t < best)
            best = t;
    }
    int rounds = (int)(probe * 1000.0 / best);
    return rounds > 0 ? rounds : 1;
}

static int measure(int threads, const char *dir)
{
    char err[512];
    if (recorder_start(dir, err, sizeof err) != 0) {
        fprintf(stderr, "vram-bench-record: %s\n", err);
        return 1;
    }
    double on[PAIRS], off[PAIRS], diff[PAIRS];
    for (int i = 0; i < PAIRS; i++) {
        atomic_store(&recorder_on, false);
        off[i] = run_threads(threads, PACED_EVENTS, work_rounds, true);
        atomic_store(&recorder_on, true);
        on[i] = run_threads(threads, PACED_EVENTS, work_rounds, true);
        diff[i] = on[i] - off[i];
    }
    qsort(diff, PAIRS, sizeof *diff, cmp);
    qsort(on, PAIRS, sizeof *on, cmp);
    qsort(off, PAIRS, sizeof *off, cmp);
    struct recorder_stats s;
    recorder_get_stats(&s);
    uint64_t paced_waits = s.waits;
    double flat = run_threads(threads, FLAT_EVENTS, 0, false);
    recorder_stop();
    recorder_get_stats(&s);
    printf("%d thread%s: paced %5.1f ns added per event (%.0f ns with, %.0f without; %llu waits)"
           "; flat out %.1f M events/s (%llu waits), at most %llu buffers (%llu KiB)\n",
           threads, threads == 1 ? " " : "s", diff[PAIRS / 2], on[PAIRS / 2], off[PAIRS / 2],
           (unsigned long long)paced_waits, threads * 1e3 / flat,
           (unsigned long long)(s.waits - paced_waits), (unsigned long long)s.buffers_peak,
           (unsigned long long)(s.buffers_peak * sizeof(struct record_event) *
                                RECORDER_BUFFER_EVENTS / 1024));
    uint64_t want = (uint64_t)threads * (PAIRS * PACED_EVENTS + FLAT_EVENTS) + 1;
    if (s.written != want || s.dropped) {
        fprintf(stderr, "vram-bench-record: %llu events written, %llu dropped; expected %llu\n",
                (unsigned long long)s.written, (unsigned long long)s.dropped,
                (unsigned long long)want);
        return 1;
    }
    return 0;
}

static void remove_dir(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    while (d && (de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        char path[4096 + 256];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        unlink(path);
    }
    if (d)
        closedir(d);
    rmdir(dir);
}

int main(void)
{
    int counts[] = {1, 2, 4};
    int status = 0;
    work_rounds = calibrate();
    const char *tmp = getenv("TMPDIR");
    printf("the recorder's API (record_alloc/record_free), writing to %s; paced: %d events a "
           "thread x %d runs, each after ~1 us of work; flat out: %d a thread\n",
           tmp && *tmp ? tmp : "/tmp", PACED_EVENTS, PAIRS, FLAT_EVENTS);
    fflush(stdout);
    for (size_t k = 0; k < sizeof counts / sizeof *counts; k++) {
        char dir[4096];
        snprintf(dir, sizeof dir, "%s/vram-bench-record.XXXXXX", tmp && *tmp ? tmp : "/tmp");
        if (!mkdtemp(dir)) {
            perror("vram-bench-record: mkdtemp");
            return 1;
        }
        pid_t pid = fork();
        if (pid == 0) {
            int rc = measure(counts[k], dir);
            fflush(stdout);
            _exit(rc);
        }
        int st;
        waitpid(pid, &st, 0);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
            status = 1;
        remove_dir(dir);
    }
    return status;
}
