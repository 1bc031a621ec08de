/* vram: the command-line front of libvram. */
#include "../include/vram.h"
#include "../src/core/options.h"
#include "../src/ledger/client.h"
#include "../src/ledger/snapshot.h"
#include "../src/util/parse.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#ifndef VRAM_INSTALL_LIBDIR
#define VRAM_INSTALL_LIBDIR "/usr/local/lib"
#endif

static void usage(FILE *out)
{
    fprintf(out,
            "usage: vram COMMAND [OPTIONS]\n"
            "\n"
            "GPU memory controls for programs that share a GPU.\n"
            "\n"
            "commands:\n"
            "  run [OPTIONS] -- COMMAND [ARGS]\n"
            "                   run any CUDA program (TensorFlow, PyTorch, JAX, CuPy, plain\n"
            "                   CUDA) held to a GPU memory budget; vram run --help says more\n"
            "  devices          list physical and logical devices: total, limit, free\n"
            "  devices --brief  one line per physical device: how full it is\n"
            "  top              live view of vramd's ledger: devices, users, processes;\n"
            "                   vram top --help says more\n"
            "  status           the ledger once: --json for scripts, --prometheus for metrics\n"
            "  --help           this text\n"
            "  --version        the version of vram\n"
            "\n"
            "environment (read by vram and by every program using libvram):\n"
            "  VRAM_VISIBLE_DEVICES  devices to use, in order: \"1,0\" or UUID prefixes\n"
            "  VRAM_MEMORY_LIMIT     limit per device: \"4GiB\" or \"0=4GiB,1=2GiB\"\n"
            "  VRAM_MEMORY_FRACTION  limit as a fraction of each device's total: \"0.33\", \"33%%\"\n"
            "  VRAM_ALLOW_GROWTH     \"true\": reserve as needed; \"false\": reserve the whole\n"
            "                        limit at first use (TF_FORCE_GPU_ALLOW_GROWTH if unset)\n"
            "  VRAM_VIRTUAL_DEVICES  split devices: \"0:2GiB,2GiB;1:4GiB\"\n"
            "  VRAM_LOG              off, error, warn (default), info, debug\n"
            "  VRAM_DAEMON           vramd's socket, or \"off\" to work without the daemon\n"
            "                        (default: " LEDGER_SYSTEM_SOCKET " if it exists, else the\n"
            "                        user's own daemon's socket if it exists)\n"
            "  VRAM_WAIT             with vramd: wait for memory when the GPU is full:\n"
            "                        true (as long as the policy allows) or a duration (10m)\n"
            "  VRAM_JOB              with vramd: the job this process belongs to\n"
            "  VRAM_CUDA_LIBRARY     the driver to load (default libcuda.so.1)\n"
            "  VRAM_SIM_DEVICES      simulated driver: device sizes, e.g. \"12GiB,12GiB\"\n"
            "  VRAM_SIM_DIR          simulated driver: shared state (default /tmp/vram-sim)\n"
            "\n"
            "Sizes: 4096, 4G, 4GiB, 512MiB, 1.5GiB (K/M/G/T are powers of 1024; KB/MB/GB/TB\n"
            "powers of 1000). Fractions: 0.33 or 33%%.\n");
}

static int fail(void)
{
    fprintf(stderr, "vram: %s\n", vram_last_error());
    return 1;
}

static void bar(char *out, size_t n, uint64_t used, uint64_t total)
{
    size_t width = n - 1, fill = total ? (size_t)((double)used / (double)total * (double)width + 0.5) : 0;
    for (size_t i = 0; i < width; i++)
        out[i] = i < fill ? '#' : '.';
    out[width] = 0;
}

static int devices(int brief)
{
    /* A listing is not a user of the GPU: it asks vramd for nothing. */
    setenv("VRAM_DAEMON", "off", 1);
    int nphys, nlog;
    if (vram_physical_device_count(&nphys) != VRAM_OK || vram_device_count(&nlog) != VRAM_OK)
        return fail();
    if (brief) {
        for (int p = 0; p < nphys; p++) {
            vram_device_info d;
            if (vram_physical_device_get_info(p, &d) != VRAM_OK)
                return fail();
            char b[21];
            bar(b, sizeof b, d.total - d.driver_free, d.total);
            printf("GPU %d  [%s]  %10s used of %s\n", p, b, format_size(d.total - d.driver_free).text,
                   format_size(d.total).text);
        }
        return 0;
    }
    printf("physical devices\n");
    printf("  %-3s %-4s %-41s %11s %11s\n", "#", "ord", "name / uuid", "total", "free");
    for (int p = 0; p < nphys; p++) {
        vram_device_info d;
        if (vram_physical_device_get_info(p, &d) != VRAM_OK)
            return fail();
        printf("  %-3d %-4d %-41.41s %11s %11s\n", p, d.ordinal, d.name, format_size(d.total).text,
               format_size(d.driver_free).text);
        printf("  %-3s %-4s %-41.41s\n", "", "", d.uuid);
    }
    printf("logical devices\n");
    printf("  %-3s %-9s %-7s %11s %11s %11s\n", "#", "physical", "part", "limit", "reserved",
           "in use");
    for (int l = 0; l < nlog; l++) {
        vram_device_info d;
        vram_stats s;
        if (vram_device_get_info(l, &d) != VRAM_OK || vram_get_stats(l, &s) != VRAM_OK)
            return fail();
        char part[32];
        snprintf(part, sizeof part, "%d of %d", d.virtual_index + 1, d.virtual_count);
        printf("  %-3d %-9d %-7s %11s %11s %11s\n", l, d.physical, part, format_size(d.limit).text,
               format_size(s.bytes_reserved).text, format_size(s.bytes_in_use).text);
    }
    return 0;
}

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

static int run_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int run_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "vram run: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    return 2;
}

static int run(int argc, char **argv)
{
    const char *limit = NULL, *fraction = NULL, *devices = NULL, *log = NULL, *wait = NULL,
               *job = NULL;
    int growth = 0, i = 2;
    for (; i < argc; i++) {
        const char *a = argv[i];
        const char **slot = strcmp(a, "--limit") == 0      ? &limit
                            : strcmp(a, "--fraction") == 0 ? &fraction
                            : strcmp(a, "--devices") == 0  ? &devices
                            : strcmp(a, "--log") == 0      ? &log
                            : strcmp(a, "--job") == 0      ? &job
                                                           : NULL;
        if (strcmp(a, "--") == 0) {
            i++;
            break;
        } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            run_usage(stdout);
            return 0;
        } else if (strcmp(a, "--growth") == 0) {
            growth = 1;
        } else if (strcmp(a, "--wait") == 0) {
            wait = "true";
        } else if (strncmp(a, "--wait=", 7) == 0) {
            wait = a + 7;
        } else if (slot) {
            if (i + 1 >= argc)
                return run_fail("%s needs a value%s; vram run --help lists the forms", a, "");
            *slot = argv[++i];
        } else if (a[0] == '-') {
            return run_fail("unknown option \"%s\"%s; vram run --help lists the options", a, "");
        } else {
            break; /* the command, without "--" */
        }
    }
    if (i >= argc)
        return run_fail("no command to run%s%s: vram run [OPTIONS] -- COMMAND [ARGS...]", "", "");

    /* Validate with the same parser as every other part of vram. */
    struct options scratch;
    options_clear(&scratch);
    char err[1024];
    if (limit && fraction)
        return run_fail("--limit %s and --fraction %s: give one of them", limit, fraction);
    if (limit && options_set(&scratch, "VRAM_MEMORY_LIMIT", limit, err, sizeof err) != 0)
        return run_fail("--limit: %s%s", err, "");
    if (fraction && options_set(&scratch, "VRAM_MEMORY_FRACTION", fraction, err, sizeof err) != 0)
        return run_fail("--fraction: %s%s", err, "");
    if (log && options_set(&scratch, "VRAM_LOG", log, err, sizeof err) != 0)
        return run_fail("--log: %s%s", err, "");
    if (wait && strcmp(wait, "true") != 0) {
        uint64_t ms;
        parse_why why;
        if (parse_duration(wait, &ms, &why) != 0)
            return run_fail("--wait=%s: %s; accepted: --wait, or --wait=DURATION with a duration "
                            "such as 30s, 10m, 1.5h",
                            wait, why.text);
    }
    if (job && !proto_name_ok(job))
        return run_fail("--job \"%s\": %s", job,
                        "a job name is 1 to 63 of the characters A-Z a-z 0-9 . _ : @ + / -");
    char sock[256], derr[512];
    int daemon = ledger_find_socket(sock, sizeof sock, derr, sizeof derr);
    if (daemon < 0)
        return run_fail("%s%s", derr, "");
    if ((wait || job) && daemon != 0)
        return run_fail("%s needs vramd, and no vramd socket was found%s (start vramd, or set "
                        "VRAM_DAEMON to its socket)",
                        wait ? "--wait" : "--job", "");
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
        return run_fail("no budget given%s%s: use --limit SIZE or --fraction F (or set "
                        "VRAM_MEMORY_LIMIT or VRAM_MEMORY_FRACTION), or run vramd, whose "
                        "policy then grants one",
                        "", "");
    }
    if (wait)
        setenv("VRAM_WAIT", wait, 1);
    if (job)
        setenv("VRAM_JOB", job, 1);
    /* Whatever came from the environment is checked the same way. */
    options_clear(&scratch);
    if (options_from_environment(&scratch, err, sizeof err) != 0)
        return run_fail("%s%s", err, "");
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

    /* Never run the program without its budget: the interposer must exist
     * and load, or nothing starts. */
    char preload[PATH_MAX];
    if (find_preload(preload, sizeof preload) != 0)
        return run_fail("cannot find the interposer %s%s (set VRAM_PRELOAD_LIBRARY to its path); "
                        "the program was not started",
                        preload, "");
    if (strpbrk(preload, " :"))
        return run_fail("the interposer's path %s contains a space or colon, which LD_PRELOAD "
                        "cannot carry%s; the program was not started",
                        preload, "");
    void *h = dlopen(preload, RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return run_fail("cannot load the interposer: %s%s; the program was not started",
                        dlerror(), "");
    dlclose(h);
    const char *old = getenv("LD_PRELOAD");
    char joined[PATH_MAX * 2];
    snprintf(joined, sizeof joined, "%s%s%s", preload, old && *old ? ":" : "", old ? old : "");
    setenv("LD_PRELOAD", joined, 1);
    execvp(argv[i], &argv[i]);
    fprintf(stderr, "vram run: cannot run %s: %s\n", argv[i], strerror(errno));
    return 127;
}

/* ------------------------------------------------- the daemon's ledger */

static int ledger_fail(const char *cmd, const char *what)
{
    fprintf(stderr, "vram %s: %s\n", cmd, what);
    return 1;
}

/* The ledger as vramd lets this user see it. */
static int fetch(const char *cmd, const char *socket_path, struct snapshot *s)
{
    char path[256], err[512];
    if (socket_path) {
        snprintf(path, sizeof path, "%s", socket_path);
    } else {
        int r = ledger_find_socket(path, sizeof path, err, sizeof err);
        if (r < 0)
            return ledger_fail(cmd, err);
        if (r > 0) {
            char user[256];
            ledger_default_socket(user, sizeof user);
            snprintf(err, sizeof err, "no vramd is running (no socket at %s or %s); start one "
                     "with vramd, or name its socket with --socket or VRAM_DAEMON",
                     LEDGER_SYSTEM_SOCKET, user);
            return ledger_fail(cmd, err);
        }
    }
    if (snapshot_fetch(path, s, err, sizeof err) != 0)
        return ledger_fail(cmd, err);
    return 0;
}

static void top_usage(FILE *out)
{
    fprintf(out,
            "usage: vram top [--once] [--interval DURATION] [--socket PATH]\n"
            "       vram status [--json | --prometheus] [--socket PATH]\n"
            "\n"
            "What vramd's ledger holds: each device (total, reserved for named users or jobs\n"
            "and not yet theirs, granted as budgets, used, used outside any grant), each user\n"
            "(budget, used, peak, waiting) and each process (budget, used, peak, what NVML\n"
            "sees, state). Root sees every process; others see their own processes and\n"
            "other users' totals.\n"
            "\n"
            "  --once              print one screen and exit (vram top)\n"
            "  --interval DURATION refresh period of vram top (default 1s)\n"
            "  --json              the ledger as one JSON object (vram status)\n"
            "  --prometheus        the ledger in Prometheus text format (vram status)\n"
            "  --socket PATH       vramd's socket (default: VRAM_DAEMON, " LEDGER_SYSTEM_SOCKET ",\n"
            "                      then the user's own daemon's)\n");
}

static int top(int argc, char **argv, bool status)
{
    const char *cmd = status ? "status" : "top", *socket_path = NULL;
    bool once = status, json = false, prom = false;
    uint64_t interval = 1000;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        parse_why why;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            top_usage(stdout);
            return 0;
        } else if (!status && strcmp(a, "--once") == 0) {
            once = true;
        } else if (status && strcmp(a, "--json") == 0) {
            json = true;
        } else if (status && strcmp(a, "--prometheus") == 0) {
            prom = true;
        } else if (strcmp(a, "--socket") == 0 || (!status && strcmp(a, "--interval") == 0)) {
            if (i + 1 >= argc) {
                fprintf(stderr, "vram %s: %s needs a value; vram %s --help lists the forms\n", cmd,
                        a, cmd);
                return 2;
            }
            const char *v = argv[++i];
            if (strcmp(a, "--socket") == 0) {
                socket_path = v;
            } else if (parse_duration(v, &interval, &why) != 0 || interval == 0) {
                fprintf(stderr, "vram top: --interval \"%s\": %s; accepted: %s\n", v,
                        interval ? why.text : "must be more than 0", PARSE_DURATION_FORMS);
                return 2;
            }
        } else {
            fprintf(stderr, "vram %s: unknown option \"%s\"; vram %s --help lists the options\n",
                    cmd, a, cmd);
            return 2;
        }
    }
    if (json && prom) {
        fprintf(stderr, "vram status: --json and --prometheus: give one of them\n");
        return 2;
    }
    bool tty = isatty(STDOUT_FILENO);
    for (;;) {
        struct snapshot s;
        if (fetch(cmd, socket_path, &s) != 0)
            return 1;
        struct winsize ws;
        int width = tty && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 ? ws.ws_col : 80;
        if (json)
            snapshot_json(&s, stdout);
        else if (prom)
            snapshot_prometheus(&s, stdout);
        else {
            if (!once && tty)
                fputs("\033[H\033[J", stdout); /* in place */
            snapshot_top(&s, stdout, width);
        }
        snapshot_free(&s);
        fflush(stdout);
        if (once)
            return 0;
        struct timespec t = {(time_t)(interval / 1000), (long)(interval % 1000) * 1000000L};
        nanosleep(&t, NULL);
    }
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(cmd, "--version") == 0) {
        printf("vram %s\n", vram_version());
        return 0;
    }
    if (strcmp(cmd, "run") == 0)
        return run(argc, argv);
    if (strcmp(cmd, "top") == 0 || strcmp(cmd, "status") == 0)
        return top(argc, argv, strcmp(cmd, "status") == 0);
    if (strcmp(cmd, "devices") == 0) {
        int brief = 0;
        for (int i = 2; i < argc; i++) {
            if (strcmp(argv[i], "--brief") == 0) {
                brief = 1;
            } else {
                fprintf(stderr, "vram devices: unknown option \"%s\"; accepted: --brief\n", argv[i]);
                return 2;
            }
        }
        return devices(brief);
    }
    fprintf(stderr, "vram: unknown command \"%s\"; vram --help lists the commands\n", cmd);
    return 2;
}
