/* vram run: a program held to a GPU memory budget by the interposer. */
#include "../src/core/options.h"
#include "../src/cuda/nvml_query.h"
#include "../src/client/agent.h"
#include "../src/client/client.h"
#include "../src/protocol/protocol.h"
#include "../src/record/formats.h"
#include "../src/util/parse.h"
#include "../src/util/report.h"
#include "cli.h"
#include "grants.h"
#include "pick.h"
#include "visible.h"
#include "supervise.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#ifndef VRAM_INSTALL_LIBDIR
#define VRAM_INSTALL_LIBDIR "/usr/local/lib"
#endif
#ifndef VRAM_LIBDIR_FROM_BINDIR
#define VRAM_LIBDIR_FROM_BINDIR "../lib"
#endif

static void run_usage(FILE *out)
{
    fprintf(out,
            "usage: vram run [OPTIONS] -- COMMAND [ARGS...]\n"
            "\n"
            "Runs COMMAND held to a GPU memory budget it cannot exceed. Its CUDA driver\n"
            "calls (and those of every library in it) are interposed with LD_PRELOAD: an\n"
            "allocation past the budget fails with CUDA_ERROR_OUT_OF_MEMORY, and the\n"
            "program sees the budget as the size of the device, so a framework's own\n"
            "fraction or preallocation is a share of the budget (TensorFlow takes the\n"
            "budget, JAX 75%% of it). The budget holds the program's CUDA contexts and\n"
            "loaded modules too, measured as the driver makes them.\n"
            "\n"
            "options (--limit 4GiB and --limit=4GiB are the same):\n"
            "  --limit SIZE        budget on every GPU (4GiB, 4Gi, 4G, 512MiB: powers of\n"
            "                      1024; 4GB or 4gb is 4,000,000,000 bytes), or per GPU:\n"
            "                      --limit 0=4GiB,1=2GiB\n"
            "  --fraction F        budget as a share of each GPU's total memory: 0.33 or\n"
            "                      33%%, or per GPU: --fraction 0=0.5,1=25%%\n"
            "  --devices LIST      the GPUs the program may use, in order: ordinals or\n"
            "                      GPU-UUID prefixes among those the environment allows\n"
            "                      (under CUDA_VISIBLE_DEVICES=2,3, 0 is GPU 2); it sets\n"
            "                      CUDA_VISIBLE_DEVICES; budgets then number the GPUs in\n"
            "                      this order; without it, VRAM_VISIBLE_DEVICES chooses\n"
            "                      them the same way\n"
            "  --gpus N            pick N GPUs for the program: those with the most free\n"
            "                      memory that can hold its budget, among those the\n"
            "                      environment allows (an inherited CUDA_VISIBLE_DEVICES);\n"
            "                      with vramd, where its grant fits now (with --wait, the\n"
            "                      first where it can); says which on stderr and sets\n"
            "                      CUDA_VISIBLE_DEVICES; budgets then number the GPUs\n"
            "                      picked; not with --devices or VRAM_VISIBLE_DEVICES\n"
            "  --growth            also ask the frameworks to take memory only as needed:\n"
            "                      TF_FORCE_GPU_ALLOW_GROWTH=true,\n"
            "                      XLA_PYTHON_CLIENT_PREALLOCATE=false, PYTORCH_ALLOC_CONF\n"
            "                      and PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True;\n"
            "                      each only where none of its names is set already\n"
            "  --log LEVEL         what the interposer reports on stderr: off, error\n"
            "                      (default: a refused allocation; more within a second\n"
            "                      are counted, not repeated), warn, info, debug\n"
            "  --wait[=DURATION]   with vramd: when the GPU is full, wait for memory instead\n"
            "                      of failing, saying for how much and behind whom; at\n"
            "                      most DURATION (30 seconds, 10m; 0 does not wait), or as\n"
            "                      long as the policy allows\n"
            "  --start-anyway      with vramd: start COMMAND even when vramd refuses it\n"
            "                      memory; it then has none on the GPUs refused\n"
            "  --job NAME          with vramd: the command's name in vram top (default\n"
            "                      run-PID)\n"
            "  --per-process       a budget for each process of the command, instead of\n"
            "                      one that all its processes share\n"
            "  --summary FILE      when the command ends, write what it used to FILE as\n"
            "                      JSON: budget and peak per GPU (its contexts' and\n"
            "                      modules' part) and per process\n"
            "  --record FILE       record every GPU memory event of the command's\n"
            "                      processes (allocations and frees of every family,\n"
            "                      pools, contexts, modules, budgets, refusals) and write\n"
            "                      them to FILE when it ends, for vram plot and vram record\n"
            "  --format FORM       FILE's form: vrec (vram's own), csv (RMM's allocation\n"
            "                      log) or json (trace events for ui.perfetto.dev);\n"
            "                      by default FILE's extension: .vrec, .csv or .json\n"
            "  --help              this text\n"
            "\n"
            "The budget is the whole command's: COMMAND and every process it starts\n"
            "(children, workers, daemons) share it on each GPU and never hold more\n"
            "together. vram run stays beside the command, passes on the signals sent to\n"
            "it, and when the command ends prints its peak per GPU (unless --log off):\n"
            "  vram: GPU 0 (GPU-5a1d...): peak 3.21 GiB of 4.00 GiB budget (context\n"
            "  518.00 MiB)\n"
            "(the index is the program's, the UUID what vram top and nvidia-smi show)\n"
            "and exits with its status (128+N if it was killed by signal N).\n"
            "\n"
            "A budget is required (--limit, --fraction, or VRAM_MEMORY_LIMIT or\n"
            "VRAM_MEMORY_FRACTION in the environment) unless vramd runs. --limit and\n"
            "--fraction replace those variables (said on stderr where the environment\n"
            "has another), and the budget is the whole command's: a budget variable a\n"
            "program of the command sets for itself is not applied. Nor does the\n"
            "interposer apply VRAM_VIRTUAL_DEVICES (said on stderr): a program sees each\n"
            "GPU whole, its size the budget (one written against libvram's API still\n"
            "splits its GPUs by it, inside the budget). With vramd the\n"
            "command is one job: before starting it, vram run asks vramd for its budget\n"
            "on each GPU it will see (the one given, or the policy's default) and holds\n"
            "the grants for the command's life. When vramd refuses, vram run says why\n"
            "and exits with 75 without starting COMMAND.\n"
            "Nothing is started either when a budget names a GPU the program will not\n"
            "have, is more than the GPU has, leaves one it will see without a budget\n"
            "(without vramd; with it that GPU gets the policy's default), comes to less\n"
            "than 1 MiB, cannot hold a CUDA context and 1 MiB (vram run first measures\n"
            "what a context takes on each GPU, and says it), or cannot be read, or when\n"
            "the interposer cannot be loaded.\n"
            "\n"
            "What an LD_PRELOAD interposer cannot govern: a program that clears\n"
            "LD_PRELOAD for its children (or LD_LIBRARY_PATH, where the interposer's\n"
            "path has a space: LD_PRELOAD then names it by its file name, found in its\n"
            "folder through LD_LIBRARY_PATH), links the driver statically, or talks to\n"
            "the kernel driver directly. Memory the driver takes on its own (a kernel's\n"
            "code loaded lazily at its first use, its stack) is charged to the budget from\n"
            "NVML's figure for each process, read every 100 ms and before an allocation\n"
            "near the budget: nvidia-smi can show a process past its budget by what the\n"
            "driver took since the last reading. Sizes and durations: vram --help.\n");
}

#define run_fail(...) cli_usage_error("run", __VA_ARGS__)

/* A budget named for a device the program will not have, a fraction that
 * leaves a device next to nothing, and a budget too small for the CUDA
 * context a program needs before anything else are refused before the
 * program starts: the interposer would otherwise run it with no budget on
 * the devices it has, or refuse everything once it runs. `v` is what the
 * driver showed (with what a context takes on each GPU), or NULL when it
 * was not asked; then the driver is asked only when a setting depends on
 * the devices. `given` is the flag the budget came from, or NULL when it
 * came from the environment. */
static int check_budgets(const struct options *o, const char *devices, const char *origin,
                         const char *given, bool daemon, struct visible *v)
{
    bool per_device = false;
    for (int d = 0; d < OPT_MAX_DEVICES; d++)
        per_device |= o->limit[d].kind != LIMIT_NONE;
    if (!v && !devices && !per_device && o->limit_all.kind != LIMIT_FRACTION)
        return 0;
    static struct visible asked; /* large: not on the stack */
    char err[2048], list[1024];
    if (!v) {
        if (visible_gpus(devices, origin, &asked, err, sizeof err) != 0)
            return run_fail("%s; the program was not started", err);
        v = &asked;
    }
    visible_describe(v, list, sizeof list);
    for (int d = 0; d < OPT_MAX_DEVICES; d++) {
        const struct limit_setting *l = &o->limit[d];
        if (l->kind != LIMIT_NONE && d >= v->n)
            return run_fail("%s names device %d, but the program will see %s%s; the program "
                            "was not started",
                            given ? given : l->origin, d, list,
                            !devices ? ""
                            : strcmp(origin, "--gpus") == 0 ? ", numbered among those --gpus picked"
                            : origin[0] == '-' ? ", numbered in the order of --devices"
                                               : ", numbered in the order of VRAM_VISIBLE_DEVICES");
    }
    struct options none;
    options_clear(&none);
    const char *setting = given;
    for (int d = 0; d < OPT_MAX_DEVICES && !setting; d++)
        if (o->limit[d].kind != LIMIT_NONE)
            setting = o->limit[d].origin;
    for (int d = 0; d < v->n; d++) {
        const struct limit_setting *l = options_limit(&none, o, d);
        const struct visible_gpu *g = &v->gpu[d];
        /* Under vramd such a GPU gets the policy's default budget; without
         * it the program would take it whole, unseen by the summary. */
        if (l->kind == LIMIT_NONE && !daemon)
            return run_fail("%s gives device %d (%s, %s) no budget, and the program will see "
                            "%d GPU%s: give each a budget (one for all: SIZE; or one per GPU: "
                            "0=SIZE,1=SIZE), or leave device %d out with --devices; the program "
                            "was not started",
                            setting ? setting : "the budget", d, g->uuid,
                            format_size(g->total).text, v->n, v->n == 1 ? "" : "s", d);
        uint64_t budget = l->kind == LIMIT_BYTES ? l->bytes
                          : l->kind == LIMIT_FRACTION ? (uint64_t)((double)g->total * l->fraction)
                                                      : UINT64_MAX;
        /* One behaviour wherever a budget is read (libvram, the
         * interposer, here): more than the GPU is a mistake, said once,
         * before anything starts. */
        if (l->kind == LIMIT_BYTES && budget > g->total)
            return run_fail("%s gives device %d (%s) a budget of %s, and the GPU has %s: a "
                            "budget there is at most that (--fraction 100%% gives every GPU "
                            "all of its memory); the program was not started",
                            given ? given : l->origin, d, g->uuid, format_size(budget).text,
                            format_size(g->total).text);
        if (l->kind == LIMIT_FRACTION && budget < PARSE_MEANINGFUL_BYTES)
            return run_fail("%s gives device %d (%s, %s) a budget of %s, and a budget below "
                            "1 MiB holds nothing a program can use; the program was not started",
                            given ? given : l->origin, d, g->uuid, format_size(g->total).text,
                            format_size(budget).text);
        if (g->context && budget < g->context + PARSE_MEANINGFUL_BYTES)
            return run_fail("%s gives device %d (%s, %s) a budget of %s, and a CUDA context "
                            "alone takes %s there: no program can run in it; a budget there "
                            "needs at least %s; the program was not started",
                            given ? given : l->origin, d, g->name, g->uuid,
                            format_size(budget).text, format_size(g->context).text,
                            format_size(g->context + PARSE_MEANINGFUL_BYTES).text);
    }
    return 0;
}

/* --growth: each framework's own "take memory as it is needed" setting,
 * under every name the framework reads, but only where the user has set
 * none of those names. A setting of the user's own is never changed or
 * added to, and a new name is never set beside an old one the user set:
 * PyTorch >= 2.9 reads PYTORCH_ALLOC_CONF first and would then ignore the
 * user's PYTORCH_CUDA_ALLOC_CONF. */
static const struct {
    const char *names[2]; /* current name first */
    const char *value;
} growth_settings[] = {
    {{"VRAM_ALLOW_GROWTH"}, "true"},
    {{"TF_FORCE_GPU_ALLOW_GROWTH"}, "true"},
    /* JAX's preallocation switch has one name; XLA_CLIENT_MEM_FRACTION
     * (formerly XLA_PYTHON_CLIENT_MEM_FRACTION) sizes the preallocation,
     * which this turns off. */
    {{"XLA_PYTHON_CLIENT_PREALLOCATE"}, "false"},
    {{"PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF"}, "expandable_segments:True"},
};

static void ask_for_growth(void)
{
    for (size_t i = 0; i < sizeof growth_settings / sizeof *growth_settings; i++) {
        bool users = false;
        for (int k = 0; k < 2 && growth_settings[i].names[k]; k++) {
            const char *v = getenv(growth_settings[i].names[k]);
            users |= v && *v;
        }
        for (int k = 0; k < 2 && growth_settings[i].names[k] && !users; k++)
            setenv(growth_settings[i].names[k], growth_settings[i].value, 1);
    }
}

/* --record FILE [--format FORM]: the form known before anything starts,
 * and a FILE that can be a file. */
static int check_record(const char *record, const char *format, enum recording_format *f)
{
    char err[1024];
    if (format && !record)
        return run_fail("--format %s: it is the form of --record's FILE, and no --record was "
                        "given", format);
    if (!record)
        return 0;
    if (!*record || strcmp(record, "-") == 0)
        return run_fail("--record \"%s\": expected a file name (the command's own output is on "
                        "standard output)", record);
    if (recording_format_of(record, format, f, err, sizeof err) != 0)
        return run_fail("--record: %s", err);
    struct stat st;
    if (stat(record, &st) == 0 && S_ISDIR(st.st_mode))
        return run_fail("--record %s: a directory; expected a file to write the recording to",
                        record);
    return 0;
}

/* What the command line asks for, read and checked. */
struct run_request {
    const char *limit, *fraction, *devices, *devices_origin, *log, *wait, *job, *growth,
        *per_process, *summary, *record, *format, *start_anyway, *gpus;
    int ngpus;             /* --gpus N */
    char **command;        /* COMMAND [ARGS...] */
    char wait_ms[32];      /* VRAM_WAIT for the processes, with --wait */
    uint64_t wait_for;     /* how long the grants may wait */
    char given[256];       /* "--limit 4GiB" for messages; "" from the environment */
    enum recording_format record_format;
};

/* What vram run found out before the command starts. */
struct run_plan {
    int daemon; /* 0: vramd's socket was found */
    char sock[256];
    bool listed;          /* gpus holds the GPUs the program will see, from the driver */
    char list_error[2048]; /* or why not */
    bool measured;        /* ... with their contexts measured */
    struct visible *gpus; /* large: static */
    struct options budget; /* the environment's, as checked */
    int log_level;
    struct supervise_options so;
};

/* Step 1: the options, each checked with the same parser as every other
 * part of vram. -1 to go on, or vram run's exit status. */
static int run_parse(int argc, char **argv, struct run_request *rq)
{
    const char *help = NULL;
    const struct cli_option table[] = {
        {"--limit", CLI_VALUE, &rq->limit},     {"--fraction", CLI_VALUE, &rq->fraction},
        {"--devices", CLI_VALUE, &rq->devices}, {"--log", CLI_VALUE, &rq->log},
        {"--job", CLI_VALUE, &rq->job},         {"--wait", CLI_OPTIONAL, &rq->wait},
        {"--growth", CLI_FLAG, &rq->growth},    {"--help", CLI_FLAG, &help},
        {"-h", CLI_FLAG, &help},                {"--per-process", CLI_FLAG, &rq->per_process},
        {"--summary", CLI_VALUE, &rq->summary}, {"--record", CLI_VALUE, &rq->record},
        {"--format", CLI_VALUE, &rq->format},   {"--start-anyway", CLI_FLAG, &rq->start_anyway},
        {"--gpus", CLI_VALUE, &rq->gpus},       {NULL, 0, NULL},
    };
    int i = cli_parse("run", table, argc, argv, 2, true);
    if (i < 0)
        return 2;
    if (help) {
        run_usage(stdout);
        return 0;
    }
    if (i >= argc)
        return run_fail("no command to run: vram run [OPTIONS] -- COMMAND [ARGS...]");
    rq->command = &argv[i];
    /* One budget per command: a vram run inside another would give its
     * processes a budget of their own, outside the outer one. Asked before
     * anything else, the driver included: measuring contexts in here would
     * take the outer command's memory. */
    if (command_inside_live())
        return run_fail("already inside a vram run command (%s is set; in a container, the "
                        "container's job): its budget covers every process it starts; run the "
                        "program without vram run to share it", COMMAND_ENV);
    unsetenv(COMMAND_ENV); /* a stale one, from a command that has ended */
    /* VRAM_VISIBLE_DEVICES chooses the GPUs as --devices does, unless
     * --devices is given. */
    static char visible_setting[512];
    const char *vv = getenv("VRAM_VISIBLE_DEVICES");
    rq->devices_origin = "--devices";
    if (!rq->devices && vv) {
        snprintf(visible_setting, sizeof visible_setting, "%s", vv);
        rq->devices = visible_setting;
        rq->devices_origin = "VRAM_VISIBLE_DEVICES";
    }
    if (rq->wait && !*rq->wait)
        rq->wait = "true";
    if (rq->gpus) {
        uint64_t n = 0;
        parse_why why;
        int bad = parse_uint(rq->gpus, OPT_MAX_DEVICES, &n, &why);
        if (bad || n == 0)
            return run_fail("--gpus %s: %s; accepted: how many GPUs to pick for the program, 1 "
                            "to %d", rq->gpus, bad ? why.text : "no GPU at all", OPT_MAX_DEVICES);
        rq->ngpus = (int)n;
        /* One of them chooses the GPUs: --gpus picks what --devices names. */
        if (rq->devices)
            return run_fail("--gpus %s and %s%s\"%s\": give one of them (--gpus picks the GPUs, "
                            "--devices names them)", rq->gpus, rq->devices_origin,
                            rq->devices_origin[0] == '-' ? " " : "=", rq->devices);
    }

    struct options scratch;
    options_clear(&scratch);
    char err[1024];
    if (rq->limit && rq->fraction)
        return run_fail("--limit %s and --fraction %s: give one of them", rq->limit, rq->fraction);
    if (rq->limit &&
        options_set_as(&scratch, "VRAM_MEMORY_LIMIT", "--limit", rq->limit, err, sizeof err) != 0)
        return run_fail("%s", err);
    if (rq->fraction && options_set_as(&scratch, "VRAM_MEMORY_FRACTION", "--fraction",
                                       rq->fraction, err, sizeof err) != 0)
        return run_fail("%s", err);
    if (rq->log && options_set_as(&scratch, "VRAM_LOG", "--log", rq->log, err, sizeof err) != 0)
        return run_fail("%s", err);
    snprintf(rq->wait_ms, sizeof rq->wait_ms, "true");
    rq->wait_for = rq->wait ? UINT64_MAX / 2 : 0; /* as long as the policy allows */
    if (rq->wait && strcmp(rq->wait, "true") != 0) {
        uint64_t ms;
        parse_why why;
        if (parse_duration(rq->wait, &ms, &why) != 0)
            return run_fail("--wait=%s: %s; accepted: --wait (as long as the policy allows), or "
                            "--wait=DURATION, where DURATION is %s; 0 does not wait",
                            rq->wait, why.text, PARSE_DURATION_FORMS);
        /* In milliseconds, with the unit: exact, whoever reads it. */
        snprintf(rq->wait_ms, sizeof rq->wait_ms, "%llums", (unsigned long long)ms);
        rq->wait_for = ms;
    } else if (!rq->wait) {
        /* No --wait: VRAM_WAIT from the environment means what it means to
         * each process (--per-process), for the command's grants too. */
        uint64_t ms;
        char why[256];
        if (agent_wait_setting(&ms, why, sizeof why) != 0)
            return run_fail("%s", why);
        rq->wait_for = ms == AGENT_WAIT_POLICY ? UINT64_MAX / 2 : ms;
    }
    if (check_record(rq->record, rq->format, &rq->record_format) != 0)
        return 2;
    if (rq->job && !proto_name_ok(rq->job))
        return run_fail("--job \"%s\": a job name is 1 to 63 of the characters "
                        "A-Z a-z 0-9 . _ : @ + / -", rq->job);
    if (rq->limit || rq->fraction)
        snprintf(rq->given, sizeof rq->given, "%s %s", rq->limit ? "--limit" : "--fraction",
                 rq->limit ? rq->limit : rq->fraction);
    return -1;
}

static uint64_t now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

/* What the command's budget is on GPU g (0: none given, vramd's default). */
static uint64_t budget_on(const struct options *o, const struct visible_gpu *g, bool *share)
{
    /* --limit 0=...,1=... numbers the GPUs picked, unknown until they are:
     * the largest of them must fit wherever the pick puts it. */
    uint64_t need = 0;
    for (int d = -1; d < OPT_MAX_DEVICES; d++) {
        const struct limit_setting *l = d < 0 ? &o->limit_all : &o->limit[d];
        uint64_t b = l->kind == LIMIT_BYTES      ? l->bytes
                     : l->kind == LIMIT_FRACTION ? (uint64_t)((double)g->total * l->fraction)
                                                 : 0;
        *share |= l->kind == LIMIT_FRACTION;
        need = b > need ? b : need;
    }
    return need;
}

/* What vramd would grant on each GPU now, from its ledger (its grantable
 * memory: the device less its grants, the usage outside them and what
 * reservations set aside); none where requests wait (they come first).
 * free_known false for a GPU the ledger does not list. 0, or -1 with the
 * reason. */
static int ledger_room(const char *sock, struct pick_gpu *gpus, int n, char *err, size_t errlen)
{
    static struct snapshot s;
    snapshot_init(&s);
    if (cli_take_ledger(sock, &s, CLI_HISTORY_NONE, err, errlen) < 0) {
        snapshot_free(&s);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        uint64_t room = 0;
        bool known = false;
        for (int d = 0; d < s.ndev && !known; d++) {
            const struct snap_device *sd = &s.dev[d];
            if (strcasecmp(sd->uuid, gpus[i].uuid) != 0)
                continue;
            known = true;
            room = sd->waiting ? 0 : sd->grantable;
        }
        if (!known || !gpus[i].free_known || room < gpus[i].free)
            gpus[i].free = room;
        gpus[i].free_known = known;
    }
    snapshot_free(&s);
    return 0;
}

/* --gpus N: the GPUs picked among those the environment allows, by what
 * is free on them (NVML's figure; with vramd, what it would grant now),
 * become the GPUs the program will see, as if --devices had named them.
 * With vramd and --wait, the ledger and NVML are read again until N GPUs
 * have the room. -1 to go on, or vram run's exit status. */
static int run_pick(struct run_request *rq, struct run_plan *pl)
{
    static struct visible all; /* large: not on the stack */
    static char devices[OPT_MAX_DEVICES * 8];
    char err[2048], say[4096], value[OPT_MAX_DEVICES * 100];
    if (visible_gpus(NULL, NULL, &all, err, sizeof err) != 0)
        return run_fail("--gpus %s: %s; the program was not started", rq->gpus, err);
    struct pick_gpu gpus[OPT_MAX_DEVICES];
    bool share = false, quiet = false;
    uint64_t budget = 0;
    int can_ever = 0;
    for (int i = 0; i < all.n; i++) {
        struct pick_gpu *p = &gpus[i];
        *p = (struct pick_gpu){.ordinal = all.gpu[i].ordinal, .total = all.gpu[i].total};
        snprintf(p->uuid, sizeof p->uuid, "%s", all.gpu[i].uuid);
        p->budget = budget_on(&pl->budget, &all.gpu[i], &share);
        budget = p->budget > budget ? p->budget : budget;
        can_ever += p->budget <= p->total;
    }
    for (int i = 0; i < all.n && !share; i++)
        gpus[i].budget = 0; /* one budget for all, said once */
    if (share)
        budget = 0;
    char nvml_why[512] = "";
    bool nvml = nvml_open(NULL, "vram run", nvml_why, sizeof nvml_why) == 0;
    struct options scratch;
    options_clear(&scratch);
    if (rq->log)
        quiet = options_set(&scratch, "VRAM_LOG", rq->log, err, sizeof err) == 0 &&
                scratch.log_level == LOG_OFF;
    else
        quiet = pl->budget.log_level == LOG_OFF;
    const char *inherited = getenv("CUDA_VISIBLE_DEVICES");
    int chosen[OPT_MAX_DEVICES];
    struct pick_gpu seen[OPT_MAX_DEVICES];
    bool waited = false, unread = false;
    uint64_t since = now_ms();
    for (;;) {
        /* What is free now, read again at each look: a job that held
         * memory may have ended since the last (its grant and its memory
         * go together). */
        memcpy(seen, gpus, sizeof *gpus * (size_t)all.n);
        for (int i = 0; nvml && i < all.n; i++) {
            nvmlDevice_t d;
            struct nvml_memory m;
            seen[i].free_known = nvml_by_uuid(seen[i].uuid, &d, err, sizeof err) == 0 &&
                                 nvml_memory(d, &m, err, sizeof err) == 0;
            seen[i].free = seen[i].free_known ? m.free : 0;
        }
        if (pl->daemon == 0 && ledger_room(pl->sock, seen, all.n, err, sizeof err) != 0 &&
            !quiet && !unread) {
            fprintf(stderr, "vram run: --gpus %s: cannot read vramd's ledger (%s); picking by "
                    "what NVML says is free\n", rq->gpus, err);
            unread = true;
        }
        if (pick_gpus(seen, all.n, rq->ngpus, budget, inherited, value, sizeof value, say,
                      sizeof say, chosen) == 0)
            break;
        /* Waiting helps only where vramd's grants are what is in the way. */
        bool more = pl->daemon == 0 && rq->wait_for && rq->ngpus <= all.n &&
                    can_ever >= rq->ngpus && now_ms() - since < rq->wait_for;
        if (!more) {
            if (nvml)
                nvml_close();
            fprintf(stderr, "vram run: %s%s%s; the program was not started\n", say,
                    nvml_why[0] ? "; NVML: " : "", nvml_why);
            return pl->daemon == 0 && can_ever >= rq->ngpus ? RUN_REFUSED : 2;
        }
        if (!waited && !quiet)
            fprintf(stderr, "vram run: %s; waiting for vramd's grants and the memory in "
                    "use to leave room\n", say);
        waited = true;
        struct timespec t = {0, 500 * 1000000L};
        nanosleep(&t, NULL);
    }
    if (nvml)
        nvml_close();
    if (!quiet)
        fprintf(stderr, "vram run: %s\n", say);
    size_t used = 0;
    devices[0] = 0;
    for (int i = 0; i < rq->ngpus; i++)
        used += (size_t)snprintf(devices + used, sizeof devices - used, "%s%d", i ? "," : "",
                                 all.gpu[chosen[i]].ordinal);
    rq->devices = devices;
    rq->devices_origin = "--gpus";
    return -1;
}

/* Settings of the environment the command's budget leaves out, said once
 * on stderr (unless --log off) rather than dropped in silence: a budget
 * variable that --limit or --fraction replaces, and VRAM_VIRTUAL_DEVICES,
 * which the interposer does not apply (a program written against
 * libvram's API still splits its GPUs by it, inside the budget). */
static void say_left_out(const struct run_request *rq)
{
    struct options scratch;
    options_clear(&scratch);
    char err[256];
    const char *log = rq->log ? rq->log : getenv("VRAM_LOG");
    if (log && options_set(&scratch, "VRAM_LOG", log, err, sizeof err) == 0 &&
        scratch.log_level == LOG_OFF)
        return;
    const char *flag = rq->limit ? "--limit" : "--fraction";
    const char *given = rq->limit ? rq->limit : rq->fraction;
    const char *var = rq->limit ? "VRAM_MEMORY_LIMIT" : "VRAM_MEMORY_FRACTION";
    for (int k = 0; given && k < 2; k++) {
        const char *name = k ? "VRAM_MEMORY_FRACTION" : "VRAM_MEMORY_LIMIT";
        const char *v = getenv(name);
        if (v && (strcmp(name, var) != 0 || strcmp(v, given) != 0))
            fprintf(stderr, "vram run: %s %s is the command's budget; %s=\"%s\" from the "
                    "environment is not used\n", flag, given, name, v);
    }
    const char *virt = getenv("VRAM_VIRTUAL_DEVICES");
    if (virt)
        fprintf(stderr, "vram run: VRAM_VIRTUAL_DEVICES=\"%s\" is not applied to the command: "
                "its programs see each GPU whole, its size the budget (a program written "
                "against libvram's API still splits its GPUs by it, inside the budget)\n", virt);
}

/* Step 2: whether vramd runs, and the budget on each GPU the program will
 * see, put into the environment the command's processes read it from and
 * checked there. -1 to go on, or vram run's exit status. */
static int run_resolve_budgets(struct run_request *rq, struct run_plan *pl)
{
    char derr[512], err[1024];
    pl->daemon = ledger_find_socket(pl->sock, sizeof pl->sock, derr, sizeof derr);
    if (pl->daemon < 0)
        return run_fail("%s", derr);
    if ((rq->wait || rq->job || rq->start_anyway) && pl->daemon != 0)
        return run_fail("%s needs vramd, and no vramd socket was found (start vramd, or set "
                        "VRAM_DAEMON to its socket)",
                        rq->wait ? "--wait" : rq->job ? "--job" : "--start-anyway");
    say_left_out(rq);
    if (rq->limit) {
        setenv("VRAM_MEMORY_LIMIT", rq->limit, 1);
        unsetenv("VRAM_MEMORY_FRACTION");
    } else if (rq->fraction) {
        setenv("VRAM_MEMORY_FRACTION", rq->fraction, 1);
        unsetenv("VRAM_MEMORY_LIMIT");
    } else if (!getenv("VRAM_MEMORY_LIMIT") && !getenv("VRAM_MEMORY_FRACTION") &&
               pl->daemon != 0) {
        return run_fail("no budget given: use --limit SIZE or --fraction F (or set "
                        "VRAM_MEMORY_LIMIT or VRAM_MEMORY_FRACTION), or run vramd, whose "
                        "policy then grants one");
    }
    if (rq->wait)
        setenv("VRAM_WAIT", rq->wait_ms, 1);
    if (rq->job)
        setenv("VRAM_JOB", rq->job, 1);
    /* Whatever came from the environment is checked the same way. */
    options_clear(&pl->budget);
    options_warn_unknown(); /* for the command: its processes leave it to vram run */
    if (options_from_environment(&pl->budget, err, sizeof err) != 0)
        return run_fail("%s", err);
    /* Without vramd the budget is known now, and so is, once measured, what
     * a context takes on each GPU: every process of the command reserves
     * its context before making it, and a budget that cannot hold one is
     * refused here. (With vramd the budget is the daemon's grant, and the
     * interposer says so at the first context.) */
    int rc;
    if (rq->gpus && (rc = run_pick(rq, pl)) >= 0)
        return rc;
    static struct visible gpus; /* large: not on the stack */
    pl->gpus = &gpus;
    pl->listed = visible_gpus(rq->devices, rq->devices_origin, &gpus, pl->list_error,
                              sizeof pl->list_error) == 0;
    if (!pl->listed && rq->devices)
        return run_fail("%s; the program was not started", pl->list_error);
    pl->measured = pl->daemon != 0 && pl->listed;
    if (pl->measured)
        visible_measure_contexts(&gpus);
    if (check_budgets(&pl->budget, rq->devices, rq->devices_origin,
                      rq->given[0] ? rq->given : NULL, pl->daemon == 0,
                      pl->listed ? &gpus : NULL) != 0)
        return 2;
    static struct command_context_size sizes[OPT_MAX_DEVICES];
    int nsizes = 0;
    for (int d = 0; pl->measured && d < gpus.n; d++)
        if (gpus.gpu[d].context) {
            snprintf(sizes[nsizes].uuid, sizeof sizes[nsizes].uuid, "%s", gpus.gpu[d].uuid);
            sizes[nsizes++].bytes = gpus.gpu[d].context;
        }
    pl->so.context_sizes = sizes;
    pl->so.ncontext_sizes = nsizes;
    /* The GPUs chosen, named as the inherited CUDA_VISIBLE_DEVICES names
     * them, and the choice made: a libvram program inside must not choose
     * again among what is left. */
    if (rq->devices) {
        char chosen[OPT_MAX_DEVICES * 100];
        visible_environment(&gpus, chosen, sizeof chosen);
        setenv("CUDA_VISIBLE_DEVICES", chosen, 1);
    }
    unsetenv("VRAM_VISIBLE_DEVICES");
    setenv("VRAM_LOG", rq->log ? rq->log : getenv("VRAM_LOG") ? getenv("VRAM_LOG") : "error", 1);
    if (rq->growth)
        ask_for_growth();
    return -1;
}

/* How LD_PRELOAD names the interposer at `path`. The dynamic loader splits
 * LD_PRELOAD at spaces and colons, and nothing escapes them, so a path
 * with a space (a checkout in "/home/Jane Doe/vram") goes in as the bare
 * file name, found through LD_LIBRARY_PATH, which is split at colons and
 * semicolons only: the interposer's folder is added at its end. Names
 * that lead to another file would be a fragile choice: a symlink in a
 * private folder, or /proc/PID/fd/N of a descriptor, is valid only as long
 * as that folder, process or descriptor lasts, and the command's processes
 * may outlive vram run (a daemon it starts) or close every descriptor
 * they did not open (Python's subprocess); the loader then runs them
 * without the interposer, and without a budget. A name and a search path
 * are valid in every descendant for as long as the file exists. What it
 * costs: that folder's other libraries can be found too (after those of
 * the inherited LD_LIBRARY_PATH); and a library of the same name found
 * first would be loaded instead, so that is refused. 0, or 2 after a
 * message. */
static int preload_entry(const char *path, char *out, size_t n)
{
    if (!strchr(path, ' ')) {
        if (strchr(path, ':'))
            return run_fail("the interposer's path %s contains a colon, which LD_PRELOAD cannot "
                            "carry (set VRAM_PRELOAD_LIBRARY to a path without one); the program "
                            "was not started",
                            path);
        snprintf(out, n, "%s", path);
        return 0;
    }
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    int dirlen = slash ? (int)(slash - path) : 0;
    if (!slash || strpbrk(base, " :") || strpbrk(path, ":;"))
        return run_fail("the interposer's path %s has a space%s, and LD_PRELOAD can carry it "
                        "only as its file name found in its folder through LD_LIBRARY_PATH, "
                        "which cannot hold a colon or semicolon (set VRAM_PRELOAD_LIBRARY to a "
                        "path without them); the program was not started",
                        path, strpbrk(base, " :") ? " in its file name" : " and a colon or semicolon");
    struct stat mine, other;
    if (stat(path, &mine) != 0)
        return run_fail("the interposer %s: %s; the program was not started", path,
                        strerror(errno));
    const char *search = getenv("LD_LIBRARY_PATH");
    for (const char *p = search; p && *p;) {
        size_t len = strcspn(p, ":;");
        char candidate[PATH_MAX];
        /* An empty entry is the current folder, as the loader reads it. */
        snprintf(candidate, sizeof candidate, "%.*s%s%s", (int)len, p, len ? "/" : "", base);
        if (stat(candidate, &other) == 0 &&
            (other.st_dev != mine.st_dev || other.st_ino != mine.st_ino))
            return run_fail("the interposer's path %s has a space, so LD_PRELOAD names it %s, "
                            "found through LD_LIBRARY_PATH; but LD_LIBRARY_PATH=\"%.300s\" has "
                            "another %s first; the program was not started",
                            path, base, search, candidate);
        p += len + (p[len] != 0);
    }
    char joined[PATH_MAX * 2];
    snprintf(joined, sizeof joined, "%s%s%.*s", search ? search : "", search && *search ? ":" : "",
             dirlen, path);
    setenv("LD_LIBRARY_PATH", joined, 1);
    snprintf(out, n, "%s", base);
    return 0;
}

/* Step 3: the interposer, found and loaded here once, into LD_PRELOAD;
 * and what the supervisor needs to know. Never run the program without
 * its budget: the interposer must exist and load, or nothing starts. -1
 * to go on, or vram run's exit status. */
static int run_prepare(const struct run_request *rq, struct run_plan *pl)
{
    char preload[PATH_MAX];
    if (cli_find_preload(preload, sizeof preload) != 0)
        return run_fail("cannot find the interposer %s (set VRAM_PRELOAD_LIBRARY to its path); "
                        "the program was not started",
                        preload);
    void *h = dlopen(preload, RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return run_fail("cannot load the interposer: %s; the program was not started", dlerror());
    dlclose(h);
    char entry[PATH_MAX];
    if (preload_entry(preload, entry, sizeof entry) != 0)
        return 2;
    const char *old = getenv("LD_PRELOAD");
    char joined[PATH_MAX * 2];
    snprintf(joined, sizeof joined, "%s%s%s", entry, old && *old ? ":" : "", old ? old : "");
    setenv("LD_PRELOAD", joined, 1);

    /* Asked now, not after a long run: the file can be written. */
    struct supervise_options *so = &pl->so;
    if (rq->summary &&
        (so->summary_fd = open(rq->summary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) < 0)
        return run_fail("--summary %s: cannot create it: %s; the program was not started",
                        rq->summary, strerror(errno));
    so->mode = rq->per_process ? COMMAND_PER_PROCESS : COMMAND_SHARED;
    so->limit_var = getenv("VRAM_MEMORY_LIMIT")      ? "VRAM_MEMORY_LIMIT"
                    : getenv("VRAM_MEMORY_FRACTION") ? "VRAM_MEMORY_FRACTION"
                                                     : NULL;
    so->limit_value = so->limit_var ? getenv(so->limit_var) : NULL;
    struct options scratch;
    options_clear(&scratch);
    char err[1024];
    so->report = options_set(&scratch, "VRAM_LOG", getenv("VRAM_LOG"), err, sizeof err) == 0 &&
                 scratch.log_level != LOG_OFF;
    pl->log_level = scratch.log_level;
    return -1;
}

/* Step 4: with vramd the command is one job: its grants, asked for now
 * that nothing else can stop the program from starting (with
 * --per-process each process asks vramd its own). -1 to go on, or vram
 * run's exit status. */
static int run_ask_vramd(const struct run_request *rq, struct run_plan *pl)
{
    static struct job grants;
    if (pl->daemon != 0 || pl->so.mode != COMMAND_SHARED)
        return -1;
    if (!pl->listed) {
        if (rq->summary)
            unlink(rq->summary);
        return run_fail("%s; the program was not started", pl->list_error);
    }
    /* The holder's thread speaks through it for the command's life. */
    static struct grants_request gr;
    gr = (struct grants_request){
        .socket = pl->sock, .gpus = pl->gpus, .budget = &pl->budget,
        .given = rq->given[0] ? rq->given : NULL, .wait_ms = rq->wait_for, .job = rq->job,
        .program = rq->command[0], .start_anyway = rq->start_anyway != NULL,
        .report = pl->so.report, .verbose = pl->log_level >= LOG_INFO,
    };
    int rc = grants_ask(&grants, &gr);
    if (rc != 0) {
        if (rq->summary)
            unlink(rq->summary);
        return rc;
    }
    pl->so.grants = &grants;
    return -1;
}

/* Step 5: the recording's directory (last, so that nothing above leaves it
 * behind), then the command, started and supervised to its end. */
static int run_start(const struct run_request *rq, struct run_plan *pl)
{
    static char record_dir[PATH_MAX];
    char err[1024];
    if (rq->record) {
        if (recording_prepare(rq->record, record_dir, sizeof record_dir, err, sizeof err) != 0)
            return run_fail("--record %s: %s; the program was not started", rq->record, err);
        setenv("VRAM_RECORD", record_dir, 1);
        pl->so.record_dir = record_dir;
        pl->so.record_path = rq->record;
    }
    return supervise(rq->command, &pl->so);
}

int cmd_run(int argc, char **argv)
{
    static struct run_request rq;
    static struct run_plan pl;
    rq = (struct run_request){0};
    pl = (struct run_plan){.so = {.summary_fd = -1}};
    int rc;
    if ((rc = run_parse(argc, argv, &rq)) >= 0)
        return rc;
    pl.so.summary_path = rq.summary;
    pl.so.record_format = rq.record_format;
    if ((rc = run_resolve_budgets(&rq, &pl)) >= 0 || (rc = run_prepare(&rq, &pl)) >= 0 ||
        (rc = run_ask_vramd(&rq, &pl)) >= 0)
        return rc;
    return run_start(&rq, &pl);
}
