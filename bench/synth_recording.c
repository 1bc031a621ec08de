/* vram-synth-recording: a made-up recording, the same for the same
 * arguments, for the tests and the benchmark of vram record and vram plot.
 *
 * Several processes train for a while on several GPUs: each allocates and
 * frees in every family (plain, pitched, managed, a stream-ordered pool
 * whose reservation grows and shrinks, VMM handles mapped and unmapped,
 * arrays, graph memory), following a usage that rises and falls with
 * training steps and now and then reaches past its budget, where requests
 * are refused. Each process writes its events as the recorder does: its
 * process block, then blocks of events in time order, and its exit record
 * unless it is one of the --killed ones. The processes are written one
 * after the other, so a reader must merge them by time.
 */
#define _GNU_SOURCE
#include "../src/record/recording.h"
#include "../src/util/parse.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MiB (1024ull * 1024)
#define GiB (1024ull * MiB)
#define THREADS 3
#define BLOCK 1024

static uint64_t rng_state;

static uint64_t rnd(void)
{
    /* xorshift64*: small, fast, and the same everywhere. */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545f4914f6cdd1dull;
}

static double uniform(void) { return (double)(rnd() >> 11) / 9007199254740992.0; }

struct object {
    uint64_t address, bytes, va;
    uint8_t family, dev;
};

struct process {
    uint32_t pid;
    uint64_t image, now;
    int fd;
    struct record_event block[BLOCK];
    int nblock;
    size_t events;
    struct object *live;
    size_t nlive, cap;
    uint64_t used[8], pool[8], graph[8];
    uint64_t next_address, next_handle;
};

static int failed;

static void flush(struct process *p)
{
    if (p->nblock && record_write_block(p->fd, RECORD_BLOCK_EVENTS, p->pid, p->image, p->block,
                                        (uint32_t)(p->nblock * sizeof *p->block)) != 0)
        failed = errno;
    p->nblock = 0;
}

static void emit(struct process *p, enum record_action a, enum record_family f, int dev,
                 uint64_t address, uint64_t bytes, uint64_t aux, uint64_t stream, unsigned reason)
{
    p->block[p->nblock++] = (struct record_event){
        .time = p->now,
        .address = address,
        .bytes = bytes,
        .aux = aux,
        .stream = stream,
        .thread = p->pid + (uint32_t)(rnd() % THREADS),
        .device = dev < 0 ? RECORD_NO_DEVICE : (uint8_t)dev,
        .family = (uint8_t)f,
        .action = (uint8_t)a,
        .reason = (uint8_t)reason,
    };
    p->events++;
    if (p->nblock == BLOCK)
        flush(p);
}

/* A size: log-uniform from 2 MiB to 256 MiB in whole 2 MiB pages, or now
 * and then a small one. */
static uint64_t size_of(void)
{
    if (rnd() % 4 == 0)
        return (1 + rnd() % 512) * 4096;
    double mib = exp(log(2.0) + uniform() * (log(256.0) - log(2.0)));
    return ((uint64_t)mib / 2 + 1) * 2 * MiB;
}

static void allocate(struct process *p, int dev, uint64_t limit)
{
    static const uint8_t weights[] = {
        RECORD_PLAIN, RECORD_PLAIN,  RECORD_PLAIN, RECORD_PLAIN, RECORD_PITCHED,
        RECORD_MANAGED, RECORD_POOL, RECORD_POOL,  RECORD_POOL,  RECORD_VMM,
        RECORD_ARRAY, RECORD_GRAPH,
    };
    enum record_family f = weights[rnd() % sizeof weights];
    uint64_t bytes = size_of();
    uint64_t stream = f == RECORD_POOL ? 0x5000 + (rnd() % 2) * 0x100 : 0;
    if (limit && p->used[dev] + bytes > limit) {
        emit(p, RECORD_REFUSE, f, dev, 0, bytes, p->used[dev], stream, RECORD_OVER_BUDGET);
        return;
    }
    p->used[dev] += bytes;
    if (f == RECORD_POOL || f == RECORD_GRAPH) {
        uint64_t *r = f == RECORD_POOL ? &p->pool[dev] : &p->graph[dev];
        uint64_t key = f == RECORD_POOL ? 0x7e0000 + (uint64_t)dev : (uint64_t)dev + 1;
        emit(p, RECORD_RESIZE, f, dev, key, *r + bytes, *r, stream, 0);
        *r += bytes;
        return;
    }
    if (p->nlive == p->cap) {
        p->cap = p->cap ? p->cap * 2 : 256;
        p->live = realloc(p->live, p->cap * sizeof *p->live);
        if (!p->live) {
            fprintf(stderr, "vram-synth-recording: out of memory\n");
            exit(1);
        }
    }
    struct object o = {.bytes = bytes, .family = (uint8_t)f, .dev = (uint8_t)dev};
    if (f == RECORD_VMM || f == RECORD_ARRAY) {
        o.address = p->next_handle++;
    } else {
        /* Device pointers: the same in every process, as different
         * processes' address spaces may well give. */
        o.address = p->next_address + ((uint64_t)dev << 40);
        p->next_address += (bytes + 2 * MiB - 1) / (2 * MiB) * 2 * MiB;
    }
    emit(p, RECORD_ALLOC, f, dev, o.address, bytes, 0, stream, 0);
    if (f == RECORD_VMM) {
        o.va = 0x200000000000ull + p->next_address;
        p->next_address += bytes;
        emit(p, RECORD_MAP, RECORD_VMM, dev, o.va, bytes, o.address, 0, 0);
    }
    p->live[p->nlive++] = o;
}

static void release(struct process *p, size_t i)
{
    struct object o = p->live[i];
    p->live[i] = p->live[--p->nlive];
    if (o.family == RECORD_VMM) {
        if (rnd() % 2)
            emit(p, RECORD_RELEASE, RECORD_VMM, o.dev, o.address, o.bytes, 0, 0, 0);
        emit(p, RECORD_UNMAP, RECORD_VMM, o.dev, o.va, o.bytes, 0, 0, 0);
    }
    emit(p, RECORD_FREE, (enum record_family)o.family, o.dev, o.address, o.bytes, 0, 0, 0);
    p->used[o.dev] -= o.bytes;
}

/* Gives back memory on `dev`: an allocation, or part of a reservation. */
static void give_back(struct process *p, int dev)
{
    uint64_t pick = rnd() % 8;
    uint64_t *r = pick == 0 ? &p->pool[dev] : pick == 1 ? &p->graph[dev] : NULL;
    if (r && *r) {
        enum record_family f = r == &p->pool[dev] ? RECORD_POOL : RECORD_GRAPH;
        uint64_t key = f == RECORD_POOL ? 0x7e0000 + (uint64_t)dev : (uint64_t)dev + 1;
        uint64_t to = *r / 2 / (2 * MiB) * (2 * MiB);
        emit(p, RECORD_RESIZE, f, dev, key, to, *r, 0, 0);
        p->used[dev] -= *r - to;
        *r = to;
        return;
    }
    for (size_t tries = 0; tries < 8 && p->nlive; tries++) {
        size_t i = rnd() % p->nlive;
        if (p->live[i].dev == dev) {
            release(p, i);
            return;
        }
    }
}

static void usage(FILE *out)
{
    fprintf(out,
            "usage: vram-synth-recording [--events N] [--processes P] [--devices D]\n"
            "                            [--budget SIZE | --command-budget SIZE] [--killed K]\n"
            "                            [--seed S] OUT\n"
            "\n"
            "Writes a made-up recording, always the same for the same arguments: P processes\n"
            "(default 4) on D GPUs (default 2) with about N events in all (default 1000000),\n"
            "each process held to --budget on each GPU (default 4GiB; 0: none), or all of\n"
            "them together to --command-budget (each refused past its share). The last K\n"
            "processes (default 1) end without their exit record, as if killed. OUT is a\n"
            ".vrec file, or an existing directory that gets one file per process, as a run\n"
            "records.\n");
}

int main(int argc, char **argv)
{
    uint64_t events = 1000000, processes = 4, devices = 2, budget = 4 * GiB, command = 0,
             killed = 1, seed = 1;
    const char *out = NULL;
    for (int i = 1; i < argc; i++) {
        parse_why why = {{0}};
        const char *a = argv[i];
        int bad = 0;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (i + 1 < argc && strcmp(a, "--events") == 0) {
            bad = parse_uint(argv[++i], 100000000, &events, &why);
        } else if (i + 1 < argc && strcmp(a, "--processes") == 0) {
            bad = parse_uint(argv[++i], 1000, &processes, &why) || !processes;
        } else if (i + 1 < argc && strcmp(a, "--devices") == 0) {
            bad = parse_uint(argv[++i], 8, &devices, &why) || !devices;
        } else if (i + 1 < argc && strcmp(a, "--budget") == 0) {
            bad = parse_size(argv[++i], &budget, &why);
        } else if (i + 1 < argc && strcmp(a, "--command-budget") == 0) {
            bad = parse_size(argv[++i], &command, &why);
            budget = 0;
        } else if (i + 1 < argc && strcmp(a, "--killed") == 0) {
            bad = parse_uint(argv[++i], 1000, &killed, &why);
        } else if (i + 1 < argc && strcmp(a, "--seed") == 0) {
            bad = parse_uint(argv[++i], UINT64_MAX, &seed, &why);
        } else if (a[0] == '-' || out) {
            fprintf(stderr, "vram-synth-recording: unexpected \"%s\" (or its value is missing)\n", a);
            usage(stderr);
            return 2;
        } else {
            out = a;
        }
        if (bad) {
            fprintf(stderr, "vram-synth-recording: %s \"%s\": %s\n", a, argv[i],
                    why.text[0] ? why.text : "must be at least 1 (devices: 1 to 8)");
            return 2;
        }
    }
    if (!out) {
        usage(stderr);
        return 2;
    }
    struct stat st;
    bool directory = stat(out, &st) == 0 && S_ISDIR(st.st_mode);
    int shared = -1;
    if (!directory) {
        shared = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (shared < 0 || record_write_file_header(shared) != 0) {
            fprintf(stderr, "vram-synth-recording: %s: %s\n", out, strerror(errno));
            return 1;
        }
    }
    rng_state = seed * 0x9e3779b97f4a7c15ull + 1;
    const uint64_t start = 1000ull * 1000000000ull, real = 1700000000ull * 1000000000ull;
    size_t total = 0;
    struct process *p = calloc(1, sizeof *p);
    for (uint64_t k = 0; k < processes && p; k++) {
        free(p->live);
        memset(p, 0, sizeof *p);
        p->pid = 4000 + (uint32_t)k * 7;
        p->image = 0x1000 + k;
        p->now = start + k * 1000000;
        p->next_address = 0x7f0000000000ull;
        p->next_handle = 0x100;
        p->fd = shared;
        if (directory) {
            char path[4096];
            snprintf(path, sizeof path, "%s/%u-%016llx.vrec", out, p->pid,
                     (unsigned long long)p->image);
            p->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
            if (p->fd < 0 || record_write_file_header(p->fd) != 0) {
                fprintf(stderr, "vram-synth-recording: %s: %s\n", path, strerror(errno));
                return 1;
            }
        }
        struct record_process info = {.pid = p->pid, .ppid = 3999, .uid = 1000,
                                      .start_monotonic = p->now, .start_realtime = real + p->now};
        snprintf(info.command, sizeof info.command, "python train.py --rank %llu",
                 (unsigned long long)k);
        if (record_write_block(p->fd, RECORD_BLOCK_PROCESS, p->pid, p->image, &info,
                               sizeof info) != 0)
            failed = errno;
        for (int d = 0; d < (int)devices; d++) {
            emit(p, RECORD_CONTEXT, RECORD_NO_FAMILY, d, 0x55550000 + (uint64_t)d, 0, 0, 0, 0);
            if (budget)
                emit(p, RECORD_BUDGET, RECORD_NO_FAMILY, d, 0, budget, 0, 0,
                     RECORD_PROCESS_BUDGET);
            if (command && k == 0)
                emit(p, RECORD_BUDGET, RECORD_NO_FAMILY, d, 0, command, 0, 0,
                     RECORD_COMMAND_BUDGET);
        }
        /* Each process its share of the events; usage follows training
         * steps (a triangle wave of 2 s) and now and then a spike. */
        /* Held to its budget, or to its share of the command's. */
        uint64_t limit = budget ? budget : command / processes;
        uint64_t share = events / processes, ceiling = limit ? limit : 4 * GiB;
        double phase0 = uniform();
        while (p->events < share) {
            p->now += 1000 + rnd() % 480000;
            int dev = (int)(rnd() % devices);
            double t = (double)(p->now - start) / 2e9 + phase0, tri = fabs(2 * (t - floor(t)) - 1);
            double target = (0.30 + 0.55 * tri) * (double)ceiling;
            if (fmod(t, 11.0) < 0.15)
                target = 1.3 * (double)ceiling;
            if ((double)p->used[dev] < target)
                allocate(p, dev, limit);
            else
                give_back(p, dev);
        }
        if (k + killed < processes) {
            /* A clean end: frees, then the exit record. */
            while (p->nlive) {
                p->now += 1000 + rnd() % 20000;
                release(p, p->nlive - 1);
            }
            for (int d = 0; d < (int)devices; d++) {
                if (p->pool[d])
                    emit(p, RECORD_RESIZE, RECORD_POOL, d, 0x7e0000 + (uint64_t)d, 0, p->pool[d], 0, 0);
                if (p->graph[d])
                    emit(p, RECORD_RESIZE, RECORD_GRAPH, d, (uint64_t)d + 1, 0, p->graph[d], 0, 0);
            }
            p->now += 1000;
            emit(p, RECORD_EXIT, RECORD_NO_FAMILY, -1, 0, 0, 0, 0, 0);
        }
        flush(p);
        total += p->events;
        if (directory && close(p->fd) != 0)
            failed = errno;
    }
    if (p)
        free(p->live);
    free(p);
    if (shared >= 0 && close(shared) != 0)
        failed = errno;
    if (failed) {
        fprintf(stderr, "vram-synth-recording: %s: %s\n", out, strerror(failed));
        return 1;
    }
    printf("%s: %zu events of %llu processes on %llu GPUs\n", out, total,
           (unsigned long long)processes, (unsigned long long)devices);
    return 0;
}
