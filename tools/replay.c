/* vram-replay: replays allocation logs in RMM's CSV format
 * (Thread,Time,Action,Pointer,Size,Stream; plain or gzip) through the
 * library's allocator bookkeeping, against a simulated device of any size.
 *
 * Parsing happens before timing, and the timed loop makes no driver calls:
 * what is measured is the heap (lock, arena, address map, stats), the code
 * every allocation of libvram goes through. The figures are printed in the
 * form of shared/reference/offset-baseline.md: ns per op (one op = one
 * allocate or one free; median of timed runs after an untimed validation
 * run and a warm-up), and peak span / peak live.
 *
 * With --threads N, N threads replay the trace at the same time, first all
 * on one heap (what its lock costs when threads contend), then each on a
 * heap of its own (what they cost each other through the caches alone).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "../src/alloc/heap.h"
#include "../src/util/addrmap.h"
#include "../src/util/parse.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct op {
    uint32_t id;    /* slot of the allocation: slots are reused once freed */
    uint32_t alloc; /* 1 allocate, 0 free */
    uint64_t size;
};

struct trace {
    const char *path;
    struct op *ops;
    size_t nops, nslots;
};

/* ------------------------------------------------------------- reading */

/* Opens the file, through `gzip -dc` when it starts with gzip's magic, so
 * that the tool needs no compression library. */
static FILE *open_trace(const char *path, pid_t *child)
{
    *child = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    unsigned char magic[2] = {0, 0};
    size_t n = fread(magic, 1, 2, f);
    if (n == 2 && magic[0] == 0x1f && magic[1] == 0x8b) {
        fclose(f);
        int fds[2];
        if (pipe(fds) != 0)
            return NULL;
        pid_t pid = fork();
        if (pid < 0)
            return NULL;
        if (pid == 0) {
            dup2(fds[1], 1);
            close(fds[0]);
            close(fds[1]);
            execlp("gzip", "gzip", "-dc", "--", path, (char *)NULL);
            fprintf(stderr, "vram-replay: cannot run gzip to read %s: %s\n", path, strerror(errno));
            _exit(127);
        }
        close(fds[1]);
        *child = pid;
        return fdopen(fds[0], "r");
    }
    rewind(f);
    return f;
}

static int read_trace(struct trace *t)
{
    pid_t child;
    FILE *f = open_trace(t->path, &child);
    if (!f) {
        fprintf(stderr, "vram-replay: cannot open %s: %s\n", t->path, strerror(errno));
        return -1;
    }
    /* Each live allocation gets a slot, recycled when it is freed, so that
     * the replay's own table stays as small as the live set: the timing
     * should be the allocator's cache footprint, not the harness's. */
    struct addrmap ids; /* trace pointer -> slot + 1 of its live allocation */
    addrmap_init(&ids);
    uint32_t *spare = NULL;
    size_t nspare = 0, spare_cap = 0;
    size_t cap = 1 << 16;
    t->ops = malloc(sizeof *t->ops * cap);
    char line[512];
    size_t lineno = 0;
    int rc = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        if (lineno == 1 && strncmp(line, "Thread,", 7) == 0)
            continue;
        char action[32];
        unsigned long long ptr, size;
        if (sscanf(line, "%*[^,],%*[^,],%31[^,],%llx,%llu", action, &ptr, &size) != 3) {
            fprintf(stderr, "vram-replay: %s:%zu: not a Thread,Time,Action,Pointer,Size,Stream line\n",
                    t->path, lineno);
            rc = -1;
            break;
        }
        if (strcmp(action, "allocate failure") == 0)
            continue;
        if (t->nops == cap) {
            cap *= 2;
            t->ops = realloc(t->ops, sizeof *t->ops * cap);
        }
        struct op *o = &t->ops[t->nops];
        uint64_t id;
        if (strcmp(action, "allocate") == 0) {
            if (ptr == 0 || addrmap_get(&ids, ptr, NULL)) {
                fprintf(stderr, "vram-replay: %s:%zu: pointer 0x%llx allocated twice\n", t->path,
                        lineno, ptr);
                rc = -1;
                break;
            }
            uint32_t slot = nspare ? spare[--nspare] : (uint32_t)t->nslots++;
            addrmap_put(&ids, ptr, (uint64_t)slot + 1);
            *o = (struct op){slot, 1, size};
        } else if (strcmp(action, "free") == 0) {
            if (!addrmap_take(&ids, ptr, &id)) {
                fprintf(stderr, "vram-replay: %s:%zu: free of 0x%llx, which is not allocated\n",
                        t->path, lineno, ptr);
                rc = -1;
                break;
            }
            if (nspare == spare_cap) {
                spare_cap = spare_cap ? spare_cap * 2 : 1024;
                spare = realloc(spare, sizeof *spare * spare_cap);
            }
            spare[nspare++] = (uint32_t)(id - 1);
            *o = (struct op){(uint32_t)(id - 1), 0, size};
        } else {
            fprintf(stderr, "vram-replay: %s:%zu: unknown action \"%s\"\n", t->path, lineno, action);
            rc = -1;
            break;
        }
        t->nops++;
    }
    addrmap_destroy(&ids);
    free(spare);
    fclose(f);
    if (child) {
        int status;
        waitpid(child, &status, 0);
        if (rc == 0 && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
            fprintf(stderr, "vram-replay: gzip could not decompress %s\n", t->path);
            rc = -1;
        }
    }
    return rc;
}

/* ---------------------------------------------------- simulated device */

/* Hands out address ranges of one device of `size` bytes. Addresses are
 * never reused (the space is 2^63); only the bytes count against it. */
struct fake_device {
    uint64_t size, used, next;
};

static int fake_obtain(void *ctx, uint64_t size, uint64_t *base)
{
    struct fake_device *d = ctx;
    if (size > d->size - d->used)
        return 2; /* CUDA_ERROR_OUT_OF_MEMORY */
    d->used += size;
    *base = d->next;
    d->next += (size + ((uint64_t)1 << 21)) & ~(((uint64_t)1 << 21) - 1);
    return 0;
}

static void fake_release(void *ctx, uint64_t base, uint64_t size)
{
    (void)base;
    ((struct fake_device *)ctx)->used -= size;
}

/* -------------------------------------------------------------- replay */

struct result {
    double ns_per_op;
    uint64_t peak_span, peak_live, failures;
};

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static void setup(struct heap *h, struct fake_device *dev, uint64_t device_size, bool growth)
{
    *dev = (struct fake_device){.size = device_size, .next = (uint64_t)1 << 40};
    struct heap_backend be = {.ctx = dev, .obtain = fake_obtain, .release = fake_release};
    heap_init(h, device_size, growth, &be);
    uint64_t a; /* prime: the first region is not part of the timing */
    if (heap_alloc(h, 256, NULL, &a, NULL) == HEAP_OK)
        heap_free(h, a, NULL);
}

/* The untimed pass: checks every op succeeds and measures span and live. */
static struct result validate(const struct trace *t, uint64_t *addr, uint64_t device_size, bool growth)
{
    struct heap h;
    struct fake_device dev;
    setup(&h, &dev, device_size, growth);
    struct result r = {0};
    uint64_t live = 0, base = (uint64_t)1 << 40;
    for (size_t i = 0; i < t->nops; i++) {
        const struct op *o = &t->ops[i];
        if (o->alloc) {
            if (heap_alloc(&h, o->size, NULL, &addr[o->id], NULL) != HEAP_OK) {
                addr[o->id] = 0;
                r.failures++;
                continue;
            }
            live += o->size;
            if (live > r.peak_live)
                r.peak_live = live;
            if (addr[o->id] + o->size - base > r.peak_span)
                r.peak_span = addr[o->id] + o->size - base;
        } else if (addr[o->id]) {
            heap_free(&h, addr[o->id], NULL);
            live -= o->size;
        }
    }
    heap_destroy(&h);
    return r;
}

static double timed(const struct trace *t, uint64_t *addr, uint64_t device_size, bool growth)
{
    struct heap h;
    struct fake_device dev;
    setup(&h, &dev, device_size, growth);
    const struct op *ops = t->ops;
    size_t n = t->nops;
    double start = now_ns();
    for (size_t i = 0; i < n; i++) {
        if (ops[i].alloc)
            heap_alloc(&h, ops[i].size, NULL, &addr[ops[i].id], NULL);
        else
            heap_free(&h, addr[ops[i].id], NULL);
    }
    double ns = (now_ns() - start) / (double)n;
    heap_destroy(&h);
    return ns;
}

/* ---------------------------------------------------- several threads */

struct lane {
    const struct trace *t;
    struct heap *h;
    struct fake_device *dev; /* set up the heap in the thread itself, or NULL */
    uint64_t device_size;
    bool growth;
    uint64_t *addr;
    pthread_barrier_t *start;
    double began, ended;
};

static void *lane_run(void *arg)
{
    struct lane *l = arg;
    const struct op *ops = l->t->ops;
    /* A heap of its own is set up (and so first locked) by the thread that
     * uses it, as a program's would be. */
    if (l->dev)
        setup(l->h, l->dev, l->device_size, l->growth);
    pthread_barrier_wait(l->start);
    l->began = now_ns();
    for (size_t i = 0; i < l->t->nops; i++) {
        if (ops[i].alloc)
            heap_alloc(l->h, ops[i].size, NULL, &l->addr[ops[i].id], NULL);
        else
            heap_free(l->h, l->addr[ops[i].id], NULL);
    }
    l->ended = now_ns();
    return NULL;
}

/* `threads` threads replay the trace at once, on one heap (`shared`) or a
 * heap each. Returns the wall time from the first thread's start to the
 * last one's end over the ops one thread made, in ns: the single-thread
 * figure if they did not slow each other down at all. */
static double timed_threads(const struct trace *t, int threads, bool shared, uint64_t device_size,
                            bool growth)
{
    struct heap *heaps = calloc((size_t)threads, sizeof *heaps);
    struct fake_device *devs = calloc((size_t)threads, sizeof *devs);
    struct lane *lanes = calloc((size_t)threads, sizeof *lanes);
    pthread_t *tids = calloc((size_t)threads, sizeof *tids);
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, (unsigned)threads + 1);
    if (shared)
        setup(&heaps[0], &devs[0], device_size * (uint64_t)threads, growth);
    for (int i = 0; i < threads; i++) {
        lanes[i] = (struct lane){t,
                                 &heaps[shared ? 0 : i],
                                 shared ? NULL : &devs[i],
                                 device_size,
                                 growth,
                                 calloc(t->nslots + 1, sizeof(uint64_t)),
                                 &start};
        pthread_create(&tids[i], NULL, lane_run, &lanes[i]);
    }
    pthread_barrier_wait(&start);
    double began = 0, ended = 0;
    for (int i = 0; i < threads; i++) {
        pthread_join(tids[i], NULL);
        if (i == 0 || lanes[i].began < began)
            began = lanes[i].began;
        if (lanes[i].ended > ended)
            ended = lanes[i].ended;
    }
    double ns = (ended - began) / (double)t->nops;
    for (int i = 0; i < (shared ? 1 : threads); i++)
        heap_destroy(&heaps[i]);
    for (int i = 0; i < threads; i++)
        free(lanes[i].addr);
    pthread_barrier_destroy(&start);
    free(heaps);
    free(devs);
    free(lanes);
    free(tids);
    return ns;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* The median of `runs` timings, and their range as text. */
static double median_of(double *ns, uint64_t runs, char *range, size_t range_size)
{
    qsort(ns, runs, sizeof *ns, cmp_double);
    snprintf(range, range_size, "(%.1f-%.1f)", ns[0], ns[runs - 1]);
    return ns[runs / 2];
}

static void report(const struct trace *t, uint64_t runs, uint64_t device_size, bool growth)
{
    uint64_t *addr = calloc(t->nslots + 1, sizeof *addr);
    struct result r = validate(t, addr, device_size, growth);
    timed(t, addr, device_size, growth); /* warm-up */
    double *ns = malloc(sizeof *ns * runs);
    for (uint64_t k = 0; k < runs; k++)
        ns[k] = timed(t, addr, device_size, growth);
    char range[64];
    double median = median_of(ns, runs, range, sizeof range);
    printf("%-28s %10zu %10.1f  %-12s %.3f (%s / %s)", base_name(t->path), t->nops, median, range,
           r.peak_live ? (double)r.peak_span / (double)r.peak_live : 0.0,
           format_size(r.peak_span).text, format_size(r.peak_live).text);
    if (r.failures)
        printf("  %llu allocation%s failed (device too small)", (unsigned long long)r.failures,
               r.failures == 1 ? "" : "s");
    printf("\n");
    free(ns);
    free(addr);
}

static void report_threads(const struct trace *t, int threads, uint64_t runs, uint64_t device_size,
                           bool growth)
{
    double *ns = malloc(sizeof *ns * runs);
    for (int shared = 1; shared >= 0; shared--) {
        timed_threads(t, threads, shared, device_size, growth); /* warm-up */
        for (uint64_t k = 0; k < runs; k++)
            ns[k] = timed_threads(t, threads, shared, device_size, growth);
        char range[64], who[32];
        double median = median_of(ns, runs, range, sizeof range);
        snprintf(who, sizeof who, "%d, %s", threads, shared ? "one heap" : "a heap each");
        printf("%-28s %10zu %16s %10.1f  %-12s\n", base_name(t->path), t->nops, who, median, range);
    }
    free(ns);
}

static void usage(FILE *out)
{
    fprintf(out,
            "usage: vram-replay [--runs N] [--device-size SIZE] [--growth] [--threads N] TRACE...\n"
            "\n"
            "Replays allocation logs in RMM's CSV format (Thread,Time,Action,Pointer,Size,Stream;\n"
            "plain or gzip) through libvram's allocator bookkeeping on a simulated device, and\n"
            "prints ns per op (median of N timed runs, after an untimed validation run and a\n"
            "warm-up) and peak span / peak live.\n"
            "\n"
            "  --runs N            timed runs per trace (default 5)\n"
            "  --device-size SIZE  size of the simulated device (default 64GiB), e.g. 12GiB\n"
            "  --growth            grow regions geometrically instead of reserving the\n"
            "                      whole device at once\n"
            "  --threads N         N threads (2 to 64) replay each trace at the same time, on\n"
            "                      one heap and then on a heap each; prints ns per op of one\n"
            "                      thread (the wall time over the ops one thread made)\n");
}

int main(int argc, char **argv)
{
    uint64_t runs = 5, device_size = (uint64_t)64 << 30, threads = 0;
    bool growth = false;
    int first = argc;
    for (int i = 1; i < argc; i++) {
        parse_why why;
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(argv[i], "--runs") == 0 && i + 1 < argc) {
            if (parse_uint(argv[++i], 1000, &runs, &why) != 0 || runs == 0) {
                fprintf(stderr, "vram-replay: --runs \"%s\": %s; expected a whole number from 1 to 1000\n",
                        argv[i], runs == 0 ? "must be at least 1" : why.text);
                return 2;
            }
        } else if (strcmp(argv[i], "--device-size") == 0 && i + 1 < argc) {
            if (parse_size(argv[++i], &device_size, &why) != 0 || device_size < ARENA_GRANULE) {
                fprintf(stderr, "vram-replay: --device-size \"%s\": %s; expected %s\n", argv[i],
                        device_size < ARENA_GRANULE ? "too small" : why.text, PARSE_SIZE_FORMS);
                return 2;
            }
        } else if (strcmp(argv[i], "--growth") == 0) {
            growth = true;
        } else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
            bool parsed = parse_uint(argv[++i], 64, &threads, &why) == 0;
            if (!parsed || threads < 2) {
                fprintf(stderr, "vram-replay: --threads \"%s\": %s; expected a whole number from 2 to 64\n",
                        argv[i], parsed ? "must be at least 2" : why.text);
                return 2;
            }
        } else if (argv[i][0] == '-') {
            fprintf(stderr, "vram-replay: unknown option \"%s\" (or it lacks its value)\n", argv[i]);
            usage(stderr);
            return 2;
        } else {
            first = i;
            break;
        }
    }
    if (first == argc) {
        usage(stderr);
        return 2;
    }
    if (threads)
        printf("%-28s %10s %16s %10s  %-12s\n", "trace", "ops/thread", "threads", "ns/op", "(min-max)");
    else
        printf("%-28s %10s %10s  %-12s %s\n", "trace", "ops", "ns/op", "(min-max)",
               "peak span / peak live");
    int status = 0;
    for (int i = first; i < argc; i++) {
        struct trace t = {.path = argv[i]};
        if (read_trace(&t) != 0) {
            free(t.ops);
            status = 1;
            continue;
        }
        if (threads)
            report_threads(&t, (int)threads, runs, device_size, growth);
        else
            report(&t, runs, device_size, growth);
        free(t.ops);
    }
    return status;
}
