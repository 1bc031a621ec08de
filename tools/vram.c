/* vram: the command-line front of libvram. */
#include "../include/vram.h"
#include "../src/util/parse.h"

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
            "  devices          list physical and logical devices: total, limit, free\n"
            "  devices --brief  one line per physical device: how full it is\n"
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
