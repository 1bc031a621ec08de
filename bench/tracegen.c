/* vram-tracegen: writes the allocation traces of `make bench`, W1 and W2 of
 * shared/reference/offset-baseline.md ("Workloads"), in RMM's CSV format
 * (Thread,Time,Action,Pointer,Size,Stream), so that the benchmark runs on a
 * fresh clone without the shared traces.
 *
 * The traces are a pure function of their seed: splitmix64 (12345 for W1,
 * 12346 for W2), a uniform double from the top 53 bits, sizes log-uniform
 * as exp(log lo + u (log hi - log lo)) truncated and rounded up to 256 B,
 * one draw per decision in the order below. Drawn in that order, the output
 * is byte for byte the shared w1.csv.gz and w2.csv.gz (make bench checks
 * this whenever they are present). Pointers are unique synthetic addresses
 * from 0x7f0000000000 in steps of 256; times are one microsecond per op.
 */
#include "../src/util/parse.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KiB ((uint64_t)1 << 10)
#define MiB ((uint64_t)1 << 20)

/* ------------------------------------------------------------ randomness */

static uint64_t rng_state;

static uint64_t rng_next(void)
{
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static double rng_unit(void) { return (double)(rng_next() >> 11) * 0x1.0p-53; }

static uint64_t round_256(uint64_t x) { return (x + 255) & ~(uint64_t)255; }

static uint64_t log_uniform(uint64_t lo, uint64_t hi)
{
    double u = rng_unit();
    double x = exp(log((double)lo) + u * (log((double)hi) - log((double)lo)));
    return round_256((uint64_t)x);
}

/* ---------------------------------------------------------------- output */

struct block {
    uint64_t ptr, size;
};

static uint64_t nops, next_ptr = 0x7f0000000000ull;

static void emit(const char *action, uint64_t ptr, uint64_t size)
{
    uint64_t us = nops++, s = us / 1000000;
    printf("1,%02llu:%02llu:%02llu.%06llu,%s,0x%llx,%llu,0x0\n", (unsigned long long)(s / 3600),
           (unsigned long long)(s / 60 % 60), (unsigned long long)(s % 60),
           (unsigned long long)(us % 1000000), action, (unsigned long long)ptr,
           (unsigned long long)size);
}

static struct block alloc(uint64_t size)
{
    struct block b = {next_ptr, size};
    next_ptr += 256;
    emit("allocate", b.ptr, b.size);
    return b;
}

static void release(struct block b) { emit("free", b.ptr, b.size); }

/* -------------------------------------------------------------------- W1 */

/* Random alloc/free: allocate with p = 0.55 (always at 0 live, never at
 * 2,000), free a uniformly random live block, sizes log-uniform 256 B ..
 * 64 MiB; `allocs` allocations, then everything freed in random order. */
static int w1(uint64_t allocs)
{
    enum { MAX_LIVE = 2000 };
    static struct block live[MAX_LIVE];
    uint32_t n = 0;
    rng_state = 12345;
    for (uint64_t made = 0; made < allocs;) {
        if (n == 0 || (n < MAX_LIVE && rng_unit() < 0.55)) {
            live[n++] = alloc(log_uniform(256, 64 * MiB));
            made++;
        } else {
            uint32_t i = (uint32_t)(rng_next() % n);
            release(live[i]);
            live[i] = live[--n];
        }
    }
    while (n) {
        uint32_t i = (uint32_t)(rng_next() % n);
        release(live[i]);
        live[i] = live[--n];
    }
    return 0;
}

/* -------------------------------------------------------------------- W2 */

enum { LAYERS = 128, PERSISTENT = 64, GRAD_QUEUE = 4 };

struct layer {
    uint64_t size, temp; /* temp: 0 when the activation has no temporary */
    int jitter;          /* its size varies from step to step (dynamic shapes) */
};

/* An activation's or temporary's size: 85 % small, 15 % large. */
static uint64_t tensor_size(double kind)
{
    return kind < 0.85 ? log_uniform(4 * KiB, 1 * MiB) : log_uniform(10 * MiB, 500 * MiB);
}

static uint64_t jittered(const struct layer *l)
{
    if (!l->jitter)
        return l->size;
    return round_256((uint64_t)((double)l->size * (0.75 + 0.5 * rng_unit())));
}

/* Training-like: 64 persistent tensors, then `steps` steps of a fixed model
 * of 128 layers. Forward: each activation, 35 % of them followed by a
 * temporary freed at once. Backward: activations in reverse order with 10 %
 * adjacent swaps, a gradient allocated for each before the activation is
 * freed, gradients freed FIFO through a 4-deep queue. */
static int w2(uint64_t steps)
{
    struct layer model[LAYERS];
    struct block persistent[PERSISTENT], act[LAYERS], queue[GRAD_QUEUE + 1];
    rng_state = 12346;
    for (int i = 0; i < LAYERS; i++) {
        double kind = rng_unit();
        model[i].size = tensor_size(kind);
        double has_temp = rng_unit(), temp_kind = rng_unit();
        uint64_t temp = tensor_size(temp_kind);
        model[i].temp = has_temp < 0.35 ? temp : 0;
        model[i].jitter = rng_unit() < 0.10;
    }
    for (int i = 0; i < PERSISTENT; i++)
        persistent[i] = alloc(log_uniform(4 * KiB, 128 * MiB));
    for (uint64_t s = 0; s < steps; s++) {
        for (int i = 0; i < LAYERS; i++) {
            act[i] = alloc(jittered(&model[i]));
            if (model[i].temp)
                release(alloc(model[i].temp));
        }
        int order[LAYERS];
        for (int k = 0; k < LAYERS; k++)
            order[k] = LAYERS - 1 - k;
        for (int k = 0; k + 1 < LAYERS; k++) {
            if (rng_unit() < 0.10) {
                int t = order[k];
                order[k] = order[k + 1];
                order[k + 1] = t;
            }
        }
        int queued = 0;
        for (int k = 0; k < LAYERS; k++) {
            int i = order[k];
            uint64_t size = model[i].jitter ? jittered(&model[i]) : act[i].size;
            queue[queued++] = alloc(size);
            release(act[i]);
            if (queued > GRAD_QUEUE) {
                release(queue[0]);
                memmove(queue, queue + 1, sizeof *queue * (size_t)--queued);
            }
        }
        for (int k = 0; k < queued; k++)
            release(queue[k]);
    }
    for (int i = 0; i < PERSISTENT; i++)
        release(persistent[i]);
    return 0;
}

/* ------------------------------------------------------------------ main */

static void usage(FILE *out)
{
    fprintf(out,
            "usage: vram-tracegen w1 [--allocs N] | w2 [--steps N]\n"
            "\n"
            "Writes the benchmark trace W1 or W2 of offset-baseline.md to stdout in RMM's CSV\n"
            "format (Thread,Time,Action,Pointer,Size,Stream). Deterministic: the same\n"
            "arguments always give the same bytes.\n"
            "\n"
            "  w1 --allocs N   random alloc/free, N allocations (default 500000: 1,000,000 ops)\n"
            "  w2 --steps N    training-like, N steps (default 1000: 620,128 ops)\n");
}

int main(int argc, char **argv)
{
    if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        usage(stdout);
        return 0;
    }
    int is_w1 = argc >= 2 && strcmp(argv[1], "w1") == 0;
    int is_w2 = argc >= 2 && strcmp(argv[1], "w2") == 0;
    if (!is_w1 && !is_w2) {
        if (argc >= 2)
            fprintf(stderr, "vram-tracegen: unknown trace \"%s\"; expected w1 or w2\n", argv[1]);
        usage(stderr);
        return 2;
    }
    const char *flag = is_w1 ? "--allocs" : "--steps";
    uint64_t count = is_w1 ? 500000 : 1000;
    for (int i = 2; i < argc; i++) {
        parse_why why;
        if (strcmp(argv[i], flag) == 0 && i + 1 < argc) {
            if (parse_uint(argv[++i], 100000000, &count, &why) != 0 || count == 0) {
                fprintf(stderr, "vram-tracegen: %s \"%s\": %s; expected a whole number from 1 to 100000000\n",
                        flag, argv[i], count == 0 ? "must be at least 1" : why.text);
                return 2;
            }
        } else {
            fprintf(stderr, "vram-tracegen: unknown option \"%s\" for %s (or it lacks its value)\n",
                    argv[i], argv[1]);
            usage(stderr);
            return 2;
        }
    }
    printf("Thread,Time,Action,Pointer,Size,Stream\n");
    int rc = is_w1 ? w1(count) : w2(count);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        perror("vram-tracegen: writing the trace");
        return 1;
    }
    return rc;
}
