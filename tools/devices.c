/* vram devices: what the driver shows and what libvram makes of it. */
#include "../include/vram.h"
#include "../src/util/parse.h"
#include "cli.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static int fail(void)
{
    fprintf(stderr, "vram devices: %s\n", vram_last_error());
    return 1;
}

static void bar(char *out, size_t n, uint64_t used, uint64_t total)
{
    size_t width = n - 1, fill = total ? (size_t)((double)used / (double)total * (double)width + 0.5) : 0;
    for (size_t i = 0; i < width; i++)
        out[i] = i < fill ? '#' : '.';
    out[width] = 0;
}

static int brief_listing(int nphys)
{
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

static int full_listing(int nphys, int nlog)
{
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

static void devices_usage(FILE *out)
{
    fprintf(out,
            "usage: vram devices [--brief]\n"
            "\n"
            "The GPUs the driver shows (total and free memory, name, UUID) and the logical\n"
            "devices libvram makes of them with this environment's settings\n"
            "(VRAM_VISIBLE_DEVICES, VRAM_MEMORY_LIMIT, VRAM_MEMORY_FRACTION,\n"
            "VRAM_VIRTUAL_DEVICES): their limits.\n"
            "\n"
            "  --brief             one line per GPU: how full it is\n");
}

int cmd_devices(int argc, char **argv)
{
    const char *brief = NULL, *help = NULL;
    const struct cli_option table[] = {
        {"--brief", CLI_FLAG, &brief}, {"--help", CLI_FLAG, &help}, {"-h", CLI_FLAG, &help},
        {NULL, 0, NULL},
    };
    if (cli_parse("devices", table, argc, argv, 2, false) < 0)
        return 2;
    if (help) {
        devices_usage(stdout);
        return 0;
    }
    /* A listing is not a user of the GPU: it asks vramd for nothing. */
    setenv("VRAM_DAEMON", "off", 1);
    int nphys, nlog;
    if (vram_physical_device_count(&nphys) != VRAM_OK || vram_device_count(&nlog) != VRAM_OK)
        return fail();
    return brief ? brief_listing(nphys) : full_listing(nphys, nlog);
}
