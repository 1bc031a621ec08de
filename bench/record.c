/* vram-bench-record: what recording adds to a governed call.
 *
 * The recorder's API (record_alloc and record_free, as the interposer's
 * hooks call them) as fast as 1, 2 and 4 threads can call it, the writer
 * thread writing to a file in $TMPDIR (or /tmp): the CPU time each thread
 * spends per event (the hot path and its share of handing full buffers
 * over, not the time it sleeps waiting for the writer: so other programs
 * on a shared machine do not count), events per second (where the writer's
 * file writes set the pace), how often a thread waited for the writer,
 * and the most buffers held (memory is bounded). With recording off, the
 * same calls cost one load and a branch. Each thread count runs in a
 * child process of its own (a process records into one directory, once);
 * every event is checked to have reached the file.
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

#define EVENTS 2000000 /* per thread */

static pthread_barrier_t go;

static double clock_ns(clockid_t clock)
{
    struct timespec t;
    clock_gettime(clock, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static double now(void) { return clock_ns(CLOCK_MONOTONIC); }

struct run {
    int k;
    uint32_t events;
    double ns;  /* per event, on this thread: wall clock */
    double cpu; /* ... its own CPU time: not what other programs on the
                   machine take from it */
};

static void *worker(void *arg)
{
    struct run *r = arg;
    uint64_t base = 0x7f0000000000ull + ((uint64_t)r->k << 36);
    pthread_barrier_wait(&go);
    double t0 = now(), c0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
    for (uint32_t i = 0; i < r->events; i += 2) {
        uint64_t p = base + (i & 127) * 0x200000;
        record_alloc(RECORD_PLAIN, 0, p, 2u << 20, 0);
        record_free(RECORD_PLAIN, 0, p, 2u << 20, 0);
    }
    r->ns = (now() - t0) / r->events;
    r->cpu = (clock_ns(CLOCK_THREAD_CPUTIME_ID) - c0) / r->events;
    return NULL;
}

/* All threads at once: the means of their wall-clock and CPU ns per event. */
static void run_threads(int threads, uint32_t events, double *wall, double *cpu)
{
    pthread_t t[16];
    struct run r[16];
    pthread_barrier_init(&go, NULL, (unsigned)threads);
    for (int i = 0; i < threads; i++) {
        r[i] = (struct run){.k = i, .events = events};
        pthread_create(&t[i], NULL, worker, &r[i]);
    }
    *wall = *cpu = 0;
    for (int i = 0; i < threads; i++) {
        pthread_join(t[i], NULL);
        *wall += r[i].ns / threads;
        *cpu += r[i].cpu / threads;
    }
    pthread_barrier_destroy(&go);
}

static int measure(int threads, const char *dir)
{
    char err[512];
    if (recorder_start(dir, err, sizeof err) != 0) {
        fprintf(stderr, "vram-bench-record: %s\n", err);
        return 1;
    }
    double off_wall, off_cpu, wall, cpu;
    atomic_store(&recorder_on, false);
    run_threads(threads, EVENTS, &off_wall, &off_cpu);
    atomic_store(&recorder_on, true);
    run_threads(threads, EVENTS, &wall, &cpu);
    recorder_stop();
    struct recorder_stats s;
    recorder_get_stats(&s);
    printf("%d thread%s: %5.1f ns of the thread's CPU per event (off: %.1f), %5.1f M events/s, "
           "%llu waits for the writer, at most %llu buffers (%llu KiB)\n",
           threads, threads == 1 ? " " : "s", cpu, off_cpu, threads * 1e3 / wall,
           (unsigned long long)s.waits, (unsigned long long)s.buffers_peak,
           (unsigned long long)(s.buffers_peak * sizeof(struct record_event) *
                                RECORDER_BUFFER_EVENTS / 1024));
    uint64_t want = (uint64_t)threads * EVENTS + 1;
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
    const char *tmp = getenv("TMPDIR");
    printf("the recorder's API (record_alloc/record_free) flat out, %d events a thread, "
           "writing to %s:\n",
           EVENTS, tmp && *tmp ? tmp : "/tmp");
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
