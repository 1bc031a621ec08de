#include "config.h"

#include "../src/cuda/granularity.h"
#include "../src/cuda/uuid.h"
#include "../src/util/parse.h"
#include "occupancy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int sim_config_devices(uint64_t *total)
{
    const char *spec = getenv("VRAM_SIM_DEVICES");
    if (!spec || !*spec) {
        total[0] = SIM_DEVICE_TOTAL - SIM_DEVICE_RESERVED;
        return 1;
    }
    char items[SIM_MAX_DEVICES][64];
    parse_why why;
    int n = parse_split(spec, ',', items, SIM_MAX_DEVICES, &why);
    if (n < 0) {
        fprintf(stderr, "vram-sim: VRAM_SIM_DEVICES=\"%s\": %s; expected a comma-separated list "
                        "of device sizes (at most %d), each %s\n",
                spec, why.text, SIM_MAX_DEVICES, PARSE_SIZE_FORMS);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        uint64_t bytes = 0;
        const char *problem = NULL;
        if (parse_size(items[i], &bytes, &why) != 0)
            problem = why.text;
        else if (bytes == 0)
            problem = "must be more than 0";
        if (problem) {
            fprintf(stderr, "vram-sim: VRAM_SIM_DEVICES=\"%s\": device %d size \"%s\": %s; "
                            "expected %s\n",
                    spec, i, items[i], problem, PARSE_SIZE_FORMS);
            return -1;
        }
        total[i] = bytes;
    }
    return n;
}

uint64_t sim_config_reserved(void)
{
    const char *spec = getenv("VRAM_SIM_DEVICES");
    return spec && *spec ? 0 : SIM_DEVICE_RESERVED;
}

int sim_config_context_size(uint64_t *bytes)
{
    const char *spec = getenv("VRAM_SIM_CONTEXT_SIZE");
    if (!spec || !*spec) {
        *bytes = SIM_CONTEXT_SIZE_DEFAULT;
        return 0;
    }
    parse_why why;
    if (parse_size(spec, bytes, &why) != 0) {
        fprintf(stderr, "vram-sim: VRAM_SIM_CONTEXT_SIZE=\"%s\": %s; expected the device memory "
                        "each CUDA context takes, %s (0 for none)\n",
                spec, why.text, PARSE_SIZE_FORMS);
        return -1;
    }
    return 0;
}

int sim_config_pool_chunk(uint64_t *bytes)
{
    const char *spec = getenv("VRAM_SIM_POOL_CHUNK");
    *bytes = POOL_CHUNK;
    if (!spec || !*spec)
        return 0;
    parse_why why;
    const char *wrong = NULL;
    if (parse_size(spec, bytes, &why) != 0)
        wrong = why.text;
    else if (*bytes == 0 || *bytes % DEVICE_PAGE)
        wrong = "not a whole number of 2 MiB pages";
    if (wrong) {
        fprintf(stderr, "vram-sim: VRAM_SIM_POOL_CHUNK=\"%s\": %s; expected the chunks a "
                        "stream-ordered pool grows in, a whole number of 2 MiB pages (%s)\n",
                spec, wrong, PARSE_SIZE_FORMS);
        return -1;
    }
    return 0;
}

int sim_config_module_loading(bool *lazy)
{
    const char *spec = getenv("CUDA_MODULE_LOADING");
    *lazy = true;
    if (!spec || !*spec || strcmp(spec, "LAZY") == 0)
        return 0;
    if (strcmp(spec, "EAGER") == 0) {
        *lazy = false;
        return 0;
    }
    fprintf(stderr, "vram-sim: CUDA_MODULE_LOADING=\"%s\": not a loading mode; expected LAZY "
                    "(a module's code reaches the device at its first launch, the default) or "
                    "EAGER (at its load)\n",
            spec);
    return -1;
}

int sim_config_driver(void)
{
    const char *spec = getenv("VRAM_SIM_DRIVER");
    if (!spec || !*spec || strcmp(spec, "580") == 0)
        return SIM_DRIVER_DEFAULT;
    if (strcmp(spec, "615") == 0)
        return SIM_DRIVER_R615;
    fprintf(stderr, "vram-sim: VRAM_SIM_DRIVER=\"%s\": not a driver the simulator models; "
                    "expected 580 (the measured H100's driver, the default) or 615 (R615, whose "
                    "NVML sets per-cgroup memory limits)\n",
            spec);
    return -1;
}

void sim_config_uuid(int phys, unsigned char out[16])
{
    static const unsigned char base[16] = {0x5a, 0x1d, 0x0e, 0x5a, 0x00, 0x00, 0x40, 0x00,
                                           0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
    memcpy(out, base, 16);
    out[15] = (unsigned char)phys;
    out[4] = (unsigned char)(0xa0 + phys);
}

void sim_config_uuid_text(int phys, char out[48])
{
    unsigned char b[16];
    sim_config_uuid(phys, b);
    uuid_text(b, out);
}

int sim_config_pci_bus(int phys) { return 0x18 + 0x0e * phys; }
