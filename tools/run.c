/* vram run: a program held to a GPU memory budget by the interposer. */
#include "../src/core/options.h"
#include "../src/ledger/client.h"
#include "../src/ledger/protocol.h"
#include "../src/util/parse.h"
#include "../src/util/report.h"
#include "cli.h"
#include "supervise.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef VRAM_INSTALL_LIBDIR
#define VRAM_INSTALL_LIBDIR "/usr/local/lib"
#endif

static void run_usage(FILE *out)
{
    fprintf(out,
            "usage: vram run [OPTIONS] -- COMMAND [ARGS...]\n"
            "\n"
            "Runs COMMAND with a GPU memory budget it cannot exceed. The CUDA driver calls of the\n"
            "program (and of every library in it) are interposed (LD_PRELOAD): allocations past\n"
            "the budget fail with CUDA_ERROR_OUT_OF_MEMORY, and the program sees the budget as\n"
            "the size of the device, so a framework's own fraction or preallocation is a share\n"
            "of the budget (TensorFlow takes the budget, JAX 75%% of it).\n"
            "\n"
            "options:\n"
            "  --limit SIZE          budget in bytes on every device, or per device:\n"
            "                        --limit 0=4GiB,1=2GiB (sizes: 4096, 4G, 4GiB, 512MiB, 1.5GiB)\n"
            "  --fraction F          budget as a fraction of each device's total memory:\n"
            "                        0.33 or 33%%, or per device: --fraction 0=0.5,1=25%%\n"
            "  --devices LIST        the GPUs the program may use, in order (CUDA_VISIBLE_DEVICES);\n"
            "                        budgets then number the devices as the program sees them\n"
            "  --growth              also ask the frameworks to take memory only as needed\n"
            "                        (TF_FORCE_GPU_ALLOW_GROWTH=true, XLA_PYTHON_CLIENT_PREALLOCATE=false,\n"
            "                        PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True)\n"
            "  --log LEVEL           what the interposer reports on stderr: off, error (default:\n"
            "                        one line per refused allocation), warn, info, debug\n"
            "  --wait[=DURATION]     with vramd: when the GPU is full, wait for memory (at most\n"
            "                        DURATION, e.g. 10m; bare --wait: as long as the policy\n"
            "                        allows) instead of failing\n"
            "  --job NAME            with vramd: the job the program belongs to (for reservations\n"
            "                        made for a job, and in vram top)\n"
            "  --per-process         a budget for each process of the command, instead of\n"
            "                        one that all its processes share\n"
            "  --summary FILE        when the command ends, write what it used to FILE as\n"
            "                        JSON: budget and peak per device and per process\n"
            "\n"
            "The budget is the whole command's: COMMAND and every process it starts\n"
            "(children, workers, daemons) share it on each GPU and never hold more\n"
            "together. vram run stays beside the command, passes on the signals sent to\n"
            "it, and when the command ends prints its peak per GPU (unless --log off):\n"
            "  vram: GPU 0: peak 3.21 GiB of 4.00 GiB budget\n"
            "and exits with its status (128+N if it was killed by signal N). With vramd,\n"
            "each process still asks its own grant for now.\n"
            "\n"
            "A budget is required (--limit, --fraction, or VRAM_MEMORY_LIMIT/VRAM_MEMORY_FRACTION\n"
            "in the environment) unless vramd runs: then the program gets the budget the\n"
            "daemon's policy grants, and any budget given is what it asks for. If the interposer cannot be loaded, vram run says so and does\n"
            "not start the program. What an LD_PRELOAD interposer cannot govern: a program that\n"
            "clears LD_PRELOAD for its children, links the driver statically, or talks to the\n"
            "kernel driver directly.\n");
}

/* The interposer beside this program (build tree), or where it is installed. */
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
            snprintf(out, n, "%s/../lib/libvram-preload.so", self);
            if (access(out, R_OK) == 0)
                return 0;
        }
    }
    snprintf(out, n, "%s/libvram-preload.so", VRAM_INSTALL_LIBDIR);
    return access(out, R_OK) == 0 ? 0 : -1;
}

#define run_fail(...) cli_usage_error("run", __VA_ARGS__)

int cmd_run(int argc, char **argv)
{
    const char *limit = NULL, *fraction = NULL, *devices = NULL, *log = NULL, *wait = NULL,
               *job = NULL, *growth = NULL, *help = NULL, *per_process = NULL, *summary = NULL;
    const struct cli_option table[] = {
        {"--limit", CLI_VALUE, &limit},     {"--fraction", CLI_VALUE, &fraction},
        {"--devices", CLI_VALUE, &devices}, {"--log", CLI_VALUE, &log},
        {"--job", CLI_VALUE, &job},         {"--wait", CLI_OPTIONAL, &wait},
        {"--growth", CLI_FLAG, &growth},    {"--help", CLI_FLAG, &help},
        {"-h", CLI_FLAG, &help},            {"--per-process", CLI_FLAG, &per_process},
        {"--summary", CLI_VALUE, &summary}, {NULL, 0, NULL},
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
    if (wait && strcmp(wait, "true") != 0) {
        uint64_t ms;
        parse_why why;
        if (parse_duration(wait, &ms, &why) != 0)
            return run_fail("--wait=%s: %s; accepted: --wait, or --wait=DURATION with a duration "
                            "such as 30s, 10m, 1.5h",
                            wait, why.text);
    }
    if (job && !proto_name_ok(job))
        return run_fail("--job \"%s\": a job name is 1 to 63 of the characters "
                        "A-Z a-z 0-9 . _ : @ + / -", job);
    char sock[256], derr[512];
    int daemon = ledger_find_socket(sock, sizeof sock, derr, sizeof derr);
    if (daemon < 0)
        return run_fail("%s", derr);
    if ((wait || job) && daemon != 0)
        return run_fail("%s needs vramd, and no vramd socket was found (start vramd, or set "
                        "VRAM_DAEMON to its socket)",
                        wait ? "--wait" : "--job");
    if (devices) {
        char items[OPT_MAX_DEVICES][64];
        parse_why why;
        if (parse_split(devices, ',', items, OPT_MAX_DEVICES, &why) < 0)
            return run_fail("--devices \"%s\": %s; accepted: a comma-separated list of device "
                            "ordinals or UUIDs, e.g. 0,1 or GPU-5a1d",
                            devices, why.text);
    }
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
        setenv("VRAM_WAIT", wait, 1);
    if (job)
        setenv("VRAM_JOB", job, 1);
    /* Whatever came from the environment is checked the same way. */
    options_clear(&scratch);
    if (options_from_environment(&scratch, err, sizeof err) != 0)
        return run_fail("%s", err);
    if (devices)
        setenv("CUDA_VISIBLE_DEVICES", devices, 1);
    setenv("VRAM_LOG", log ? log : getenv("VRAM_LOG") ? getenv("VRAM_LOG") : "error", 1);
    if (growth) {
        setenv("VRAM_ALLOW_GROWTH", "true", 1);
        setenv("TF_FORCE_GPU_ALLOW_GROWTH", "true", 1);
        setenv("XLA_PYTHON_CLIENT_PREALLOCATE", "false", 1);
        const char *conf = getenv("PYTORCH_CUDA_ALLOC_CONF");
        if (!conf || !*conf) {
            setenv("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True", 1);
        } else if (!strstr(conf, "expandable_segments")) {
            char joined[1024];
            snprintf(joined, sizeof joined, "%s,expandable_segments:True", conf);
            setenv("PYTORCH_CUDA_ALLOC_CONF", joined, 1);
        }
    }

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
    struct supervise_options so = {.summary_fd = -1, .summary_path = summary};
    if (summary && (so.summary_fd = open(summary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) < 0)
        return run_fail("--summary %s: cannot create it: %s; the program was not started", summary,
                        strerror(errno));
    /* With vramd, each process asks its own grant (one grant per command
     * needs the daemon's side: see ARCHITECTURE.md). */
    so.mode = per_process || daemon == 0 ? COMMAND_PER_PROCESS : COMMAND_SHARED;
    so.limit_var = getenv("VRAM_MEMORY_LIMIT") ? "VRAM_MEMORY_LIMIT"
                   : getenv("VRAM_MEMORY_FRACTION") ? "VRAM_MEMORY_FRACTION"
                                                    : NULL;
    so.limit_value = so.limit_var ? getenv(so.limit_var) : NULL;
    options_clear(&scratch);
    so.report = options_set(&scratch, "VRAM_LOG", getenv("VRAM_LOG"), err, sizeof err) == 0 &&
                scratch.log_level != LOG_OFF;
    return supervise(&argv[i], &so);
}
