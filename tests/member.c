/* member: an unmodified CUDA program (linked with -lcuda and
 * -lnvidia-ml only) for the tests of one budget per command: the processes
 * of a command tree, in the shapes real programs take.
 *
 *   member hold BYTES SECONDS [FILE] allocate BYTES once, hold (SECONDS, or until FILE exists),
 *                                    free: prints HELD n OCCUPANCY
 *                                    (the simulator's figure for all processes) or REFUSED
 *   member occupancy                 prints what all processes hold on device 0 (NVML)
 *   (fill and race wait, after making their context, for MEMBER_BARRIER=FILE:N: N processes
 *   that made theirs; race also waits, once its threads have stopped, for the N to stop, so
 *   that no context is given back while another process still allocates)
 *   member fill CHUNK THREADS FILE   threads allocate CHUNK-sized blocks until refused, then
 *                                    hold until FILE exists (at most a minute): prints FILLED n
 *   member race SECONDS THREADS      threads allocate and free at random; a ledger shared by
 *                                    the test's processes (file MEMBER_LEDGER) adds what is
 *                                    held after each allocation and takes it off before each
 *                                    free, so it never exceeds what the budget counts: it
 *                                    must never pass MEMBER_BUDGET. Prints RACED or OVER
 *   member duel N ROUNDS BYTES       N forked processes, each round released at the same
 *                                    instant, each allocate BYTES once: at most
 *                                    MEMBER_BUDGET / BYTES may succeed in any round. Prints
 *                                    DUEL ok wins=W or DUEL OVER
 *   member view                      prints the view: CUDA free/total, NVML free/total
 *   member spawn N ARGS...           a launcher (torchrun-like): fork N workers that exec ARGS
 *   member closefds ARGS...          a launcher that closes every inherited descriptor, as
 *                                    Python's subprocess does, then execs ARGS
 *   member forks N BYTES SECONDS [FILE]  fork N workers that hold (as hold) without exec (the
 *                                    parent has not touched CUDA, as a real driver requires)
 *   member daemon BYTES SECONDS FILE double-fork, setsid, close every descriptor, allocate;
 *                                    writes HELD n|REFUSED to FILE
 *   member killer ITERS BUDGET HOLD CHURN  inside a command of budget BUDGET: hold HOLD (beside
 *                                    its context), then
 *                                    ITERS times start CHURN (tests/churn: allocates and frees
 *                                    without end) and SIGKILL them at random moments;
 *                                    after each round the command's view, an allocation of
 *                                    all the rest, and the simulator's occupancy must be
 *                                    exact. Prints KILLER ok|FAIL why
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "../src/cuda/cuda_prototypes.h"
#include "../src/cuda/nvml_abi.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

nvmlReturn_t nvmlInit_v2(void);
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int, nvmlDevice_t *);
nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t, nvmlMemory_t *);
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t, unsigned int *,
                                                     nvmlProcessInfo_t *);

#define MiB (1ull << 20)

static CUcontext ctx;

/* A CUDA context on device 0, current; a context the budget has no room
 * for is a refusal like an allocation's (said on `out`). */
static void cuda_up_to(FILE *out)
{
    CUresult rc = cuInit(0);
    if (!rc && (rc = cuDevicePrimaryCtxRetain(&ctx, 0)) == CUDA_ERROR_OUT_OF_MEMORY) {
        fprintf(out, "REFUSED (no room for a CUDA context)\n");
        fflush(out);
        exit(1);
    }
    if (rc || cuCtxPushCurrent_v2(ctx)) {
        fprintf(out, "NOCUDA\n");
        fflush(out);
        exit(4);
    }
}

static void cuda_up(void) { cuda_up_to(stdout); }


static uint64_t rng(uint64_t *s)
{
    *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
    return *s;
}

static void sleep_ms(double ms)
{
    struct timespec t = {(time_t)(ms / 1000), (long)((ms - (double)(time_t)(ms / 1000) * 1000) * 1e6)};
    nanosleep(&t, NULL);
}

/* MEMBER_BARRIER=FILE:N: wait (at most a minute) until N processes have
 * come here too: with the suffix "", until they have made their contexts,
 * so that none is refused its context because the others filled the budget
 * first; with another (FILE.SUFFIX), until they have all stopped, so that
 * what a test counts on (N contexts held) stays true while any allocates. */
static void barrier_at(const char *suffix)
{
    const char *spec = getenv("MEMBER_BARRIER");
    const char *colon = spec ? strrchr(spec, ':') : NULL;
    if (!colon)
        return;
    char path[4096];
    snprintf(path, sizeof path, "%.*s%s", (int)(colon - spec), spec, suffix);
    long n = atol(colon + 1);
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT, 0600);
    if (fd < 0 || write(fd, "x", 1) != 1)
        return;
    close(fd);
    struct stat st;
    for (int i = 0; i < 6000 && (stat(path, &st) != 0 || st.st_size < n); i++)
        sleep_ms(10);
}

/* ------------------------------------------------------------- hold */

static uint64_t nvml_occupancy(void);

static int hold(uint64_t bytes, double seconds, FILE *out, const char *until)
{
    cuda_up_to(out);
    CUdeviceptr p;
    if (cuMemAlloc_v2(&p, bytes) != CUDA_SUCCESS) {
        fprintf(out, "REFUSED\n");
        fflush(out);
        return 1;
    }
    fprintf(out, "HELD %llu %llu\n", (unsigned long long)bytes,
            (unsigned long long)(nvmlInit_v2() == NVML_SUCCESS ? nvml_occupancy() : 0));
    fflush(out);
    for (double waited = 0; waited < seconds * 1000 && (!until || access(until, F_OK) != 0);
         waited += 10)
        sleep_ms(10);
    cuMemFree_v2(p);
    return 0;
}

/* ------------------------------------------------------------- fill */

static uint64_t chunk;
static atomic_ullong filled;

static void *fill_thread(void *arg)
{
    (void)arg;
    cuCtxSetCurrent(ctx);
    /* Stop at the third refusal in a row: at the very edge a reservation of
     * another thread in flight can refuse one that fits a moment later. */
    for (int refused = 0; refused < 3;) {
        CUdeviceptr p;
        if (cuMemAlloc_v2(&p, chunk) == CUDA_SUCCESS) {
            atomic_fetch_add(&filled, chunk);
            refused = 0;
        } else {
            refused++;
            sleep_ms(1);
        }
    }
    return NULL;
}

static int fill(uint64_t size, int threads, const char *release)
{
    cuda_up();
    barrier_at("");
    chunk = size;
    pthread_t t[64];
    for (int i = 0; i < threads && i < 64; i++)
        pthread_create(&t[i], NULL, fill_thread, NULL);
    for (int i = 0; i < threads && i < 64; i++)
        pthread_join(t[i], NULL);
    printf("FILLED %llu\n", (unsigned long long)atomic_load(&filled));
    fflush(stdout);
    for (int i = 0; i < 6000 && access(release, F_OK) != 0; i++)
        sleep_ms(10);
    return 0;
}

/* ------------------------------------------------------------- race */

static _Atomic uint64_t *ledger;
static uint64_t ledger_budget;
static atomic_bool over, stop;
static atomic_ullong allocations, refusals;

static void *race_thread(void *arg)
{
    uint64_t seed = 0x9E3779B97F4A7C15ull ^ (uint64_t)(uintptr_t)arg ^ (uint64_t)getpid() << 20;
    cuCtxSetCurrent(ctx);
    CUdeviceptr live[16] = {0};
    uint64_t size[16] = {0};
    while (!atomic_load(&stop) && !atomic_load(&over)) {
        int i = (int)(rng(&seed) % 16);
        if (live[i]) {
            atomic_fetch_sub(ledger, size[i]); /* off before the free */
            cuMemFree_v2(live[i]);
            live[i] = 0;
            continue;
        }
        size[i] = (1 + rng(&seed) % 48) * 2 * MiB;
        if (cuMemAlloc_v2(&live[i], size[i]) != CUDA_SUCCESS) {
            live[i] = 0;
            atomic_fetch_add(&refusals, 1);
            continue;
        }
        atomic_fetch_add(&allocations, 1);
        uint64_t now = atomic_fetch_add(ledger, size[i]) + size[i]; /* on after it is held */
        if (now > ledger_budget) {
            printf("OVER %llu > %llu\n", (unsigned long long)now, (unsigned long long)ledger_budget);
            atomic_store(&over, true);
        }
    }
    for (int i = 0; i < 16; i++)
        if (live[i]) {
            atomic_fetch_sub(ledger, size[i]);
            cuMemFree_v2(live[i]);
        }
    return NULL;
}

static int race(double seconds, int threads)
{
    const char *path = getenv("MEMBER_LEDGER"), *budget = getenv("MEMBER_BUDGET");
    int fd = path ? open(path, O_RDWR) : -1;
    if (fd < 0 || !budget) {
        fprintf(stderr, "member race: MEMBER_LEDGER (a file of 8 bytes) and MEMBER_BUDGET needed\n");
        return 2;
    }
    ledger = mmap(NULL, 8, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ledger_budget = strtoull(budget, NULL, 10);
    cuda_up();
    barrier_at("");
    pthread_t t[64];
    for (int i = 0; i < threads && i < 64; i++)
        pthread_create(&t[i], NULL, race_thread, (void *)(uintptr_t)(i + 1));
    sleep_ms(seconds * 1000);
    atomic_store(&stop, true);
    for (int i = 0; i < threads && i < 64; i++)
        pthread_join(t[i], NULL);
    /* The ledger's budget counts every racing process's context: none ends,
     * giving its context back, while another still allocates. */
    barrier_at(".stopped");
    printf("%s allocations=%llu refused=%llu\n", atomic_load(&over) ? "OVER" : "RACED",
           (unsigned long long)atomic_load(&allocations), (unsigned long long)atomic_load(&refusals));
    return atomic_load(&over) ? 3 : 0;
}

/* ------------------------------------------------------------- duel */

static int wait_all(int n);

struct arena {
    atomic_int round, done, ok_count, freed;
};

static int duel(int n, int rounds, uint64_t bytes)
{
    const char *budget = getenv("MEMBER_BUDGET");
    if (!budget)
        return 2;
    int most = (int)(strtoull(budget, NULL, 10) / bytes);
    struct arena *a = mmap(NULL, sizeof *a, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                           -1, 0);
    /* The parent never touches CUDA: its children may (as a real driver requires). */
    for (int i = 0; i < n; i++)
        if (fork() == 0) {
            cuda_up();
            for (int r = 1; r <= rounds; r++) {
                while (atomic_load(&a->round) < r) /* spinning: all start at once */
                    ;
                CUdeviceptr p;
                int ok = cuMemAlloc_v2(&p, bytes) == CUDA_SUCCESS;
                atomic_fetch_add(&a->ok_count, ok);
                atomic_fetch_add(&a->done, 1);
                while (atomic_load(&a->done) < n * r) /* everyone has tried */
                    sched_yield();
                if (ok)
                    cuMemFree_v2(p);
                atomic_fetch_add(&a->freed, 1);
            }
            _exit(0);
        }
    int wins = 0, passed = 0;
    for (int r = 1; r <= rounds && !passed; r++) {
        atomic_store(&a->ok_count, 0);
        atomic_store(&a->round, r);
        while (atomic_load(&a->freed) < n * r)
            sleep_ms(0.02); /* the cores are for the children */
        int ok = atomic_load(&a->ok_count);
        wins += ok;
        if (ok > most) {
            printf("DUEL OVER round %d: %d of %d allocations of %llu passed, at most %d fit\n", r,
                   ok, n, (unsigned long long)bytes, most);
            passed = 1;
        }
    }
    if (passed)
        atomic_store(&a->round, rounds + 1); /* let them finish */
    wait_all(n);
    if (!passed)
        printf("DUEL ok wins=%d rounds=%d\n", wins, rounds);
    return passed ? 3 : 0;
}

/* ------------------------------------------------------------- view */

static uint64_t nvml_occupancy(void)
{
    nvmlDevice_t d;
    nvmlProcessInfo_t info[256];
    unsigned n = 256;
    uint64_t sum = 0;
    if (nvmlDeviceGetHandleByIndex_v2(0, &d) != NVML_SUCCESS ||
        nvmlDeviceGetComputeRunningProcesses_v3(d, &n, info) != NVML_SUCCESS)
        return UINT64_MAX;
    for (unsigned i = 0; i < n; i++)
        sum += info[i].usedGpuMemory;
    return sum;
}

/* NVML's list as this process sees it, for a failure's message. */
static void nvml_list_print(void)
{
    nvmlDevice_t d;
    nvmlProcessInfo_t info[256];
    unsigned n = 256;
    nvmlReturn_t rc = nvmlDeviceGetHandleByIndex_v2(0, &d);
    if (rc == NVML_SUCCESS)
        rc = nvmlDeviceGetComputeRunningProcesses_v3(d, &n, info);
    printf("rc %d, %u processes:", (int)rc, rc == NVML_SUCCESS ? n : 0);
    for (unsigned i = 0; rc == NVML_SUCCESS && i < n; i++)
        printf(" %u %llu", info[i].pid, (unsigned long long)info[i].usedGpuMemory);
    printf("; this process is %d", (int)getpid());
}

static int view(void)
{
    cuda_up();
    size_t f = 0, t = 0;
    nvmlDevice_t d;
    nvmlMemory_t m = {0};
    cuMemGetInfo_v2(&f, &t);
    if (nvmlInit_v2() || nvmlDeviceGetHandleByIndex_v2(0, &d) || nvmlDeviceGetMemoryInfo(d, &m))
        return 4;
    printf("VIEW cuda %zu %zu nvml %llu %llu\n", f, t, m.free, m.total);
    return 0;
}

/* ---------------------------------------------------------- launchers */

enum { KEEP_FDS = 0, CLOSE_FDS = 1, QUIET = 2 };

static pid_t start(char **args, int how)
{
    pid_t pid = fork();
    if (pid == 0) {
        if (how & CLOSE_FDS)
            close_range(3, ~0u, 0);
        if (how & QUIET)
            dup2(open("/dev/null", O_WRONLY), 1);
        execv(args[0], args);
        _exit(127);
    }
    return pid;
}

static int wait_all(int n)
{
    int worst = 0, status;
    for (int i = 0; i < n; i++)
        if (wait(&status) > 0) {
            int rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
            worst = rc > worst ? rc : worst;
        }
    return worst;
}

static int forks(int n, uint64_t bytes, double seconds, const char *until)
{
    for (int i = 0; i < n; i++)
        if (fork() == 0)
            exit(hold(bytes, seconds, stdout, until));
    return wait_all(n);
}

static int daemonize(uint64_t bytes, double seconds, const char *file)
{
    pid_t pid = fork();
    if (pid > 0) {
        waitpid(pid, NULL, 0);
        return 0; /* the launcher ends at once, as a daemon's starter does */
    }
    setsid();
    if (fork() > 0)
        _exit(0);
    /* A daemon: nothing inherited, not even descriptors. */
    close_range(0, ~0u, 0);
    open("/dev/null", O_RDWR);
    dup(0);
    dup(0);
    FILE *out = fopen(file, "w");
    if (!out)
        _exit(2);
    _exit(hold(bytes, seconds, out, NULL));
}

/* ----------------------------------------------------------- killer */

/* What NVML says this process holds on device 0. */
static uint64_t nvml_own(void)
{
    nvmlDevice_t d;
    nvmlProcessInfo_t info[256];
    unsigned n = 256;
    if (nvmlDeviceGetHandleByIndex_v2(0, &d) != NVML_SUCCESS ||
        nvmlDeviceGetComputeRunningProcesses_v3(d, &n, info) != NVML_SUCCESS)
        return UINT64_MAX;
    for (unsigned i = 0; i < n; i++)
        if (info[i].pid == (unsigned)getpid())
            return info[i].usedGpuMemory;
    return 0;
}

static int killer(int iters, uint64_t budget, uint64_t hold_bytes, char *churn)
{
    cuda_up();
    if (nvmlInit_v2() != NVML_SUCCESS)
        return 4;
    /* This process's CUDA context is inside the budget too. */
    uint64_t held = hold_bytes + nvml_own();
    CUdeviceptr mine, rest;
    if (cuMemAlloc_v2(&mine, hold_bytes) != CUDA_SUCCESS) {
        printf("KILLER FAIL cannot hold %llu\n", (unsigned long long)hold_bytes);
        return 1;
    }
    uint64_t seed = 0x2545F4914F6CDD1Dull ^ (uint64_t)getpid();
    char *args[] = {churn, NULL};
    for (int it = 0; it < iters; it++) {
        /* Two or three churners at once, killed at random moments: before
         * they reach the driver, while they claim a slot, mid-allocation,
         * mid-reclaim of each other. */
        int n = 2 + (int)(rng(&seed) % 2);
        pid_t c[3];
        for (int i = 0; i < n; i++)
            c[i] = start(args, QUIET);
        for (int i = 0; i < n; i++) {
            sleep_ms((double)(rng(&seed) % 8000) / 1000.0);
            kill(c[i], SIGKILL);
        }
        for (int i = 0; i < n; i++)
            waitpid(c[i], NULL, 0);
        /* Their share is back at once, exactly: the view, an allocation of
         * all the rest, and the driver's own figures. Each round asks one of
         * the two first (each must reclaim the dead by itself). */
        for (int step = 0; step < 2; step++) {
            if ((step + it) % 2 == 0) {
                size_t f = 0, t = 0;
                cuMemGetInfo_v2(&f, &t);
                if (t != budget || f != budget - held) {
                    printf("KILLER FAIL round %d: view free %zu total %zu, want %llu of %llu\n",
                           it, f, t, (unsigned long long)(budget - held),
                           (unsigned long long)budget);
                    return 1;
                }
                continue;
            }
            if (cuMemAlloc_v2(&rest, budget - held) != CUDA_SUCCESS) {
                printf("KILLER FAIL round %d: the rest of the budget (%llu) cannot be allocated\n",
                       it, (unsigned long long)(budget - held));
                return 1;
            }
            uint64_t occ = nvml_occupancy();
            cuMemFree_v2(rest);
            if (occ != budget) {
                printf("KILLER FAIL round %d: the simulator holds %llu, want %llu (NVML now: ",
                       it, (unsigned long long)occ, (unsigned long long)budget);
                nvml_list_print();
                printf(")\n");
                return 1;
            }
        }
    }
    cuMemFree_v2(mine);
    printf("KILLER ok %d rounds\n", iters);
    return 0;
}

/* -------------------------------------------------------------- main */

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *m = argc > 1 ? argv[1] : "";
    if (!strcmp(m, "hold") && (argc == 4 || argc == 5))
        return hold(strtoull(argv[2], NULL, 0), atof(argv[3]), stdout, argc == 5 ? argv[4] : NULL);
    if (!strcmp(m, "fill") && argc == 5)
        return fill(strtoull(argv[2], NULL, 0), atoi(argv[3]), argv[4]);
    if (!strcmp(m, "race") && argc == 4)
        return race(atof(argv[2]), atoi(argv[3]));
    if (!strcmp(m, "duel") && argc == 5)
        return duel(atoi(argv[2]), atoi(argv[3]), strtoull(argv[4], NULL, 0));
    if (!strcmp(m, "view"))
        return view();
    if (!strcmp(m, "occupancy")) {
        if (nvmlInit_v2() != NVML_SUCCESS)
            return 4;
        printf("%llu\n", (unsigned long long)nvml_occupancy());
        return 0;
    }
    if (!strcmp(m, "spawn") && argc > 3) {
        int n = atoi(argv[2]);
        for (int i = 0; i < n; i++)
            start(&argv[3], KEEP_FDS);
        return wait_all(n);
    }
    if (!strcmp(m, "closefds") && argc > 2) {
        start(&argv[2], CLOSE_FDS);
        return wait_all(1);
    }
    if (!strcmp(m, "forks") && (argc == 5 || argc == 6))
        return forks(atoi(argv[2]), strtoull(argv[3], NULL, 0), atof(argv[4]),
                     argc == 6 ? argv[5] : NULL);
    if (!strcmp(m, "daemon") && argc == 5)
        return daemonize(strtoull(argv[2], NULL, 0), atof(argv[3]), argv[4]);
    if (!strcmp(m, "killer") && argc == 6)
        return killer(atoi(argv[2]), strtoull(argv[3], NULL, 0), strtoull(argv[4], NULL, 0),
                      argv[5]);
    fprintf(stderr, "usage: see the comment at the top of tests/member.c\n");
    return 2;
}
