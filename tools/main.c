/* vram: the command-line front of libvram, vram run and vramd's ledger.
 * Each subcommand is in its own file; this one only dispatches. */
#include "../include/vram.h"
#include "../src/client/client.h"
#include "cli.h"

#include <stdio.h>
#include <string.h>

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
            "  devices          the GPUs, their memory, and the processes holding it\n"
            "                   (pid, user, command, used, budget); --brief, --json\n"
            "  top              live view of vramd's ledger: devices, users, processes, and\n"
            "                   the trend of each device and job; vram top --help says more\n"
            "  status           the ledger once: --json for scripts (with the last hour),\n"
            "                   --prometheus for metrics\n"
            "  plot FILE -o OUT draw a recording's memory over time: OUT.html (a page) or\n"
            "                   OUT.svg; with --job NAME instead of FILE, a job's, from\n"
            "                   vramd's history; vram plot --help says more\n"
            "  cdi generate     a CDI spec that puts containers under vram (podman run\n"
            "                   --device vram.dev/gpu=0), each container one vramd job;\n"
            "                   vram cdi --help says more (the spec has the runtime run\n"
            "                   vram oci-hook; Docker 20.10 runs vram-oci-runtime)\n"
            "  record convert IN OUT | record info FILE\n"
            "                   a recording as RMM's CSV, Perfetto's JSON or vram's own;\n"
            "                   its peak, budget and refusals; vram record --help says more\n"
            "  --help           this text\n"
            "  --version        the version of vram\n"
            "\n"
            "environment (read by vram and by every program using libvram):\n"
            "  VRAM_VISIBLE_DEVICES  devices to use, in order: \"1,0\" or UUID prefixes\n"
            "  VRAM_MEMORY_LIMIT     limit per device: \"4GiB\" or \"0=4GiB,1=2GiB\"\n"
            "  VRAM_MEMORY_FRACTION  limit as a share of each device's total: \"0.33\", \"33%%\"\n"
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
            "  VRAM_PRELOAD_LIBRARY  vram run: the interposer (default: the installed one)\n"            "  VRAM_CONTAINER_GPUS   vram-oci-runtime (Docker 20.10): the GPUs a container's\n"
            "                        budget is for: 0, GPU-<uuid>, all, or a list\n"
            "  VRAM_OCI_RUNTIME      vram-oci-runtime: the OCI runtime it runs (runc)\n"
            "  VRAM_RECORD           the interposer: record GPU memory events into this\n"
            "                        directory (vram run --record sets it)\n"
            "  VRAM_SIM_DEVICES      simulated driver: device sizes, e.g. \"12GiB,12GiB\"\n"
            "  VRAM_SIM_DIR          simulated driver: shared state (default /tmp/vram-sim)\n"
            "  VRAM_SIM_CONTEXT_SIZE simulated driver: memory each context takes (518MiB)\n"
            "  VRAM_SIM_POOL_CHUNK   simulated driver: the chunks a stream-ordered pool grows\n"
            "                        in (32MiB, as on an H100 and H200)\n"
            "  VRAM_SIM_DRIVER       simulated driver and NVML: the driver branch, 580 (as\n"
            "                        measured) or 615 (per-cgroup memory limits)\n"
            "  VRAM_SIM_ACCOUNTING   simulated NVML: accounting, off (as on a new GPU) or on\n"
            "\n"
            "Sizes: 4G, 4Gi, 4GiB, 512MiB, 1.5GiB (K/M/G/T, Ki/Mi/Gi/Ti and KiB/MiB/GiB/TiB\n"
            "are powers of 1024: 4G is 4 GiB, as Slurm's --mem=4G; KB/MB/GB/TB, in any case,\n"
            "are powers of 1000: 4GB and 4gb are 4,000,000,000 bytes, 3.73 GiB); a number\n"
            "without a unit is bytes, and at least 1 MiB. Fractions: 0.33 or 33%%.\n"
            "Durations: seconds (1, 2.5) or 500ms, 30s, 10m, 1.5h.\n");
}

int main(int argc, char **argv)
{
    /* Run as vram-oci-runtime (a link to vram): a container engine's runtime. */
    const char *self = strrchr(argv[0], '/');
    if (strcmp(self ? self + 1 : argv[0], "vram-oci-runtime") == 0)
        return cmd_oci_runtime(argc, argv, 1);
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
    static const struct {
        const char *name;
        int (*fn)(int, char **);
    } commands[] = {
        {"run", cmd_run}, {"devices", cmd_devices}, {"top", cmd_top}, {"status", cmd_status},
        {"record", cmd_record}, {"plot", cmd_plot}, {"cdi", cmd_cdi}, {"oci-hook", cmd_oci_hook},
    };
    if (strcmp(cmd, "oci-runtime") == 0)
        return cmd_oci_runtime(argc, argv, 2);
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
        if (strcmp(cmd, commands[i].name) == 0)
            return commands[i].fn(argc, argv);
    fprintf(stderr, "vram: unknown command \"%s\"; vram --help lists the commands\n", cmd);
    return 2;
}
