/* vram run: a program held to a GPU memory budget by the interposer. */
#include "../src/core/options.h"
#include "../src/client/agent.h"
#include "../src/client/client.h"
#include "../src/protocol/protocol.h"
#include "../src/record/formats.h"
#include "../src/util/parse.h"
#include "../src/util/report.h"
#include "cli.h"
#include "grants.h"
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
            "  --limit SIZE        budget on every GPU (4GiB, 4Gi, 512MiB), or per GPU:\n"
            "                      --limit 0=4GiB,1=2GiB\n"
            "  --fraction F        budget as a share of each GPU's total memory: 0.33 or\n"
            "                      33%%, or per GPU: --fraction 0=0.5,1=25%%\n"
            "  --devices LIST      the GPUs the program may use, in order: ordinals or\n"
            "                      GPU-UUID prefixes (it sets CUDA_VISIBLE_DEVICES); budgets\n"
            "                      then number the GPUs in this order\n"
            "  --growth            also ask the frameworks to take memory only as needed:\n"
            "                      TF_FORCE_GPU_ALLOW_GROWTH=true,\n"
            "                      XLA_PYTHON_CLIENT_PREALLOCATE=false, PYTORCH_ALLOC_CONF\n"
            "                      and PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True;\n"
            "                      each only where none of its names is set already\n"
            "  --log LEVEL         what the interposer reports on stderr: off, error\n"
            "                      (default: one line per refused allocation), warn, info,\n"
            "                      debug\n"
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
            "  vram: GPU 0: peak 3.21 GiB of 4.00 GiB budget (context 392.00 MiB)\n"
            "and exits with its status (128+N if it was killed by signal N).\n"
            "\n"
            "A budget is required (--limit, --fraction, or VRAM_MEMORY_LIMIT or\n"
            "VRAM_MEMORY_FRACTION in the environment) unless vramd runs. With vramd the\n"
            "command is one job: before starting it, vram run asks vramd for its budget\n"
            "on each GPU it will see (the one given, at most the GPU; or the policy's\n"
            "default) and holds the grants for the command's life. When vramd refuses,\n"
            "vram run says why and exits with 75 without starting COMMAND.\n"
            "Nothing is started either when a budget names a GPU the program will not\n"
            "have, comes to less than 1 MiB, cannot hold a CUDA context and 1 MiB (vram\n"
            "run first measures what a context takes on each GPU, and says it), or\n"
            "cannot be read, or when the interposer cannot be loaded.\n"
            "\n"
            "What an LD_PRELOAD interposer cannot govern: a program that clears\n"
            "LD_PRELOAD for its children, links the driver statically, or talks to the\n"
            "kernel driver directly; nor memory the driver takes later on its own (a\n"
            "kernel's code loaded lazily at its first use, its stack), which shows beyond\n"
            "the budget in nvidia-smi. Sizes and durations: vram --help.\n");
}

/* The interposer beside this program (build tree), or where it is installed
 * relative to it (any prefix), or where the build was configured to go. */
static int find_preload(char *out, size_t n)
{
    const char *env = getenv("VRAM_PRELOAD_LIBRARY");
    if (env && *env) {
        snprintf(out, n, "%s", env);
        return access(out, R_OK) == 0 ? 0 : -1;
    }
    char self[PATH_MAX - 64];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len > 0) {
        self[len] = 0;
        char *slash = strrchr(self, '/');
        if (slash) {
            *slash = 0;
            snprintf(out, n, "%s/libvram-preload.so", self);
            if (access(out, R_OK) == 0)
                return 0;
            snprintf(out, n, "%s/" VRAM_LIBDIR_FROM_BINDIR "/libvram-preload.so", self);
            if (access(out, R_OK) == 0)
                return 0;
        }
    }
    snprintf(out, n, "%s/libvram-preload.so", VRAM_INSTALL_LIBDIR);
    return access(out, R_OK) == 0 ? 0 : -1;
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
static int check_budgets(const struct options *o, const char *devices, const char *given,
                         struct visible *v)
{
    bool per_device = false;
    for (int d = 0; d < OPT_MAX_DEVICES; d++)
        per_device |= o->limit[d].kind != LIMIT_NONE;
    if (!v && !devices && !per_device && o->limit_all.kind != LIMIT_FRACTION)
        return 0;
    static struct visible asked; /* large: not on the stack */
    char err[2048], list[1024];
    if (!v) {
        if (visible_gpus(devices, &asked, err, sizeof err) != 0)
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
                            devices ? ", numbered in the order of --devices" : "");
    }
    struct options none;
    options_clear(&none);
    for (int d = 0; d < v->n; d++) {
        const struct limit_setting *l = options_limit(&none, o, d);
        const struct visible_gpu *g = &v->gpu[d];
        uint64_t budget = l->kind == LIMIT_BYTES ? l->bytes
                          : l->kind == LIMIT_FRACTION ? (uint64_t)((double)g->total * l->fraction)
                                                      : UINT64_MAX;
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

int cmd_run(int argc, char **argv)
{
    const char *limit = NULL, *fraction = NULL, *devices = NULL, *log = NULL, *wait = NULL,
               *job = NULL, *growth = NULL, *help = NULL, *per_process = NULL, *summary = NULL,
               *record = NULL, *format = NULL, *start_anyway = NULL;
    const struct cli_option table[] = {
        {"--limit", CLI_VALUE, &limit},     {"--fraction", CLI_VALUE, &fraction},
        {"--devices", CLI_VALUE, &devices}, {"--log", CLI_VALUE, &log},
        {"--job", CLI_VALUE, &job},         {"--wait", CLI_OPTIONAL, &wait},
        {"--growth", CLI_FLAG, &growth},    {"--help", CLI_FLAG, &help},
        {"-h", CLI_FLAG, &help},            {"--per-process", CLI_FLAG, &per_process},
        {"--summary", CLI_VALUE, &summary}, {"--record", CLI_VALUE, &record},
        {"--format", CLI_VALUE, &format},   {"--start-anyway", CLI_FLAG, &start_anyway},
        {NULL, 0, NULL},
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
    if (wait && !*wait)
        wait = "true";

    /* Validate with the same parser as every other part of vram. */
    struct options scratch;
    options_clear(&scratch);
    char err[1024];
    if (limit && fraction)
        return run_fail("--limit %s and --fraction %s: give one of them", limit, fraction);
    if (limit && options_set(&scratch, "VRAM_MEMORY_LIMIT", limit, err, sizeof err) != 0)
        return run_fail("--limit: %s", err);
    if (fraction && options_set(&scratch, "VRAM_MEMORY_FRACTION", fraction, err, sizeof err) != 0)
        return run_fail("--fraction: %s", err);
    if (log && options_set(&scratch, "VRAM_LOG", log, err, sizeof err) != 0)
        return run_fail("--log: %s", err);
    char wait_ms[32] = "true";
    uint64_t wait_for = wait ? UINT64_MAX / 2 : 0; /* as long as the policy allows */
    if (wait && strcmp(wait, "true") != 0) {
        uint64_t ms;
        parse_why why;
        if (parse_duration(wait, &ms, &why) != 0)
            return run_fail("--wait=%s: %s; accepted: --wait (as long as the policy allows), or "
                            "--wait=DURATION, where DURATION is %s; 0 does not wait",
                            wait, why.text, PARSE_DURATION_FORMS);
        /* In milliseconds, with the unit: exact, whoever reads it. */
        snprintf(wait_ms, sizeof wait_ms, "%llums", (unsigned long long)ms);
        wait_for = ms;
    } else if (!wait) {
        /* No --wait: VRAM_WAIT from the environment means what it means to
         * each process (--per-process), for the command's grants too. */
        uint64_t ms;
        char why[256];
        if (agent_wait_setting(&ms, why, sizeof why) != 0)
            return run_fail("%s", why);
        wait_for = ms == AGENT_WAIT_POLICY ? UINT64_MAX / 2 : ms;
    }
    struct supervise_options so = {.summary_fd = -1, .summary_path = summary};
    if (check_record(record, format, &so.record_format) != 0)
        return 2;
    if (job && !proto_name_ok(job))
        return run_fail("--job \"%s\": a job name is 1 to 63 of the characters "
                        "A-Z a-z 0-9 . _ : @ + / -", job);
    char sock[256], derr[512];
    int daemon = ledger_find_socket(sock, sizeof sock, derr, sizeof derr);
    if (daemon < 0)
        return run_fail("%s", derr);
    if ((wait || job || start_anyway) && daemon != 0)
        return run_fail("%s needs vramd, and no vramd socket was found (start vramd, or set "
                        "VRAM_DAEMON to its socket)",
                        wait ? "--wait" : job ? "--job" : "--start-anyway");
    if (limit) {
        setenv("VRAM_MEMORY_LIMIT", limit, 1);
        unsetenv("VRAM_MEMORY_FRACTION");
    } else if (fraction) {
        setenv("VRAM_MEMORY_FRACTION", fraction, 1);
        unsetenv("VRAM_MEMORY_LIMIT");
    } else if (!getenv("VRAM_MEMORY_LIMIT") && !getenv("VRAM_MEMORY_FRACTION") && daemon != 0) {
        return run_fail("no budget given: use --limit SIZE or --fraction F (or set "
                        "VRAM_MEMORY_LIMIT or VRAM_MEMORY_FRACTION), or run vramd, whose "
                        "policy then grants one");
    }
    if (wait)
        setenv("VRAM_WAIT", wait_ms, 1);
    if (job)
        setenv("VRAM_JOB", job, 1);
    /* Whatever came from the environment is checked the same way. */
    options_clear(&scratch);
    if (options_from_environment(&scratch, err, sizeof err) != 0)
        return run_fail("%s", err);
    char given[256] = "";
    if (limit || fraction)
        snprintf(given, sizeof given, "%s %s", limit ? "--limit" : "--fraction",
                 limit ? limit : fraction);
    /* Without vramd the budget is known now, and so is, once measured, what
     * a context takes on each GPU: every process of the command reserves
     * its context before making it, and a budget that cannot hold one is
     * refused here. (With vramd the budget is the daemon's grant, and the
     * interposer says so at the first context.) */
    static struct visible gpus; /* large: not on the stack */
    bool measured = daemon != 0 && visible_gpus(devices, &gpus, err, sizeof err) == 0;
    if (measured)
        visible_measure_contexts(&gpus);
    if (check_budgets(&scratch, devices, given[0] ? given : NULL, measured ? &gpus : NULL) != 0)
        return 2;
    static struct command_context_size sizes[OPT_MAX_DEVICES];
    int nsizes = 0;
    for (int d = 0; measured && d < gpus.n; d++)
        if (gpus.gpu[d].context) {
            snprintf(sizes[nsizes].uuid, sizeof sizes[nsizes].uuid, "%s", gpus.gpu[d].uuid);
            sizes[nsizes++].bytes = gpus.gpu[d].context;
        }
    if (devices)
        setenv("CUDA_VISIBLE_DEVICES", devices, 1);
    setenv("VRAM_LOG", log ? log : getenv("VRAM_LOG") ? getenv("VRAM_LOG") : "error", 1);
    if (growth)
        ask_for_growth();

    /* One budget per command: a vram run inside another would give its
     * processes a budget of their own, outside the outer one. */
    if (command_inside_live())
        return run_fail("already inside a vram run command (%s is set): its budget covers every "
                        "process it starts; run the program without vram run to share it",
                        COMMAND_ENV);
    unsetenv(COMMAND_ENV); /* a stale one, from a command that has ended */

    /* Never run the program without its budget: the interposer must exist
     * and load, or nothing starts. */
    char preload[PATH_MAX];
    if (find_preload(preload, sizeof preload) != 0)
        return run_fail("cannot find the interposer %s (set VRAM_PRELOAD_LIBRARY to its path); "
                        "the program was not started",
                        preload);
    if (strpbrk(preload, " :"))
        return run_fail("the interposer's path %s contains a space or colon, which LD_PRELOAD "
                        "cannot carry; the program was not started",
                        preload);
    void *h = dlopen(preload, RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return run_fail("cannot load the interposer: %s; the program was not started", dlerror());
    dlclose(h);
    const char *old = getenv("LD_PRELOAD");
    char joined[PATH_MAX * 2];
    snprintf(joined, sizeof joined, "%s%s%s", preload, old && *old ? ":" : "", old ? old : "");
    setenv("LD_PRELOAD", joined, 1);

    /* Asked now, not after a long run: the file can be written. */
    so.context_sizes = sizes;
    so.ncontext_sizes = nsizes;
    if (summary && (so.summary_fd = open(summary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) < 0)
        return run_fail("--summary %s: cannot create it: %s; the program was not started", summary,
                        strerror(errno));
    so.mode = per_process ? COMMAND_PER_PROCESS : COMMAND_SHARED;
    so.limit_var = getenv("VRAM_MEMORY_LIMIT") ? "VRAM_MEMORY_LIMIT"
                   : getenv("VRAM_MEMORY_FRACTION") ? "VRAM_MEMORY_FRACTION"
                                                    : NULL;
    so.limit_value = so.limit_var ? getenv(so.limit_var) : NULL;
    struct options budget = scratch; /* the environment's, as checked above */
    options_clear(&scratch);
    so.report = options_set(&scratch, "VRAM_LOG", getenv("VRAM_LOG"), err, sizeof err) == 0 &&
                scratch.log_level != LOG_OFF;
    /* With vramd the command is one job: its grants, asked for now that
     * nothing else can stop the program from starting (with --per-process
     * each process asks vramd its own). */
    static struct job grants;
    if (daemon == 0 && so.mode == COMMAND_SHARED) {
        if (visible_gpus(devices, &gpus, err, sizeof err) != 0) {
            if (summary)
                unlink(summary);
            return run_fail("%s; the program was not started", err);
        }
        /* The holder's thread speaks through it for the command's life. */
        static struct grants_request gr;
        gr = (struct grants_request){
            .socket = sock, .gpus = &gpus, .budget = &budget,
            .given = given[0] ? given : NULL, .wait_ms = wait_for, .job = job,
            .program = argv[i], .start_anyway = start_anyway != NULL, .report = so.report,
            .verbose = scratch.log_level >= LOG_INFO,
        };
        int rc = grants_ask(&grants, &gr);
        if (rc != 0) {
            if (summary)
                unlink(summary);
            return rc;
        }
        so.grants = &grants;
    }
    /* Last, so that nothing above leaves the directory behind. */
    char record_dir[PATH_MAX];
    if (record) {
        if (recording_prepare(record, record_dir, sizeof record_dir, err, sizeof err) != 0)
            return run_fail("--record %s: %s; the program was not started", record, err);
        setenv("VRAM_RECORD", record_dir, 1);
        so.record_dir = record_dir;
        so.record_path = record;
    }
    return supervise(&argv[i], &so);
}
