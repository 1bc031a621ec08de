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

int sim_config_accounting(void)
{
    const char *spec = getenv("VRAM_SIM_ACCOUNTING");
    bool on = false;
    parse_why why;
    if (!spec || !*spec)
        return 0;
    if (parse_bool(spec, &on, &why) != 0) {
        fprintf(stderr, "vram-sim: VRAM_SIM_ACCOUNTING=\"%s\": %s; expected %s (whether NVML's "
                        "per-process accounting is on, as nvidia-smi -am 1 sets it; off by default)\n",
                spec, why.text, PARSE_BOOL_FORMS);
        return -1;
    }
    return on;
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

/* ------------------------------------------------------ the host's topology */

#define WORD_BITS (8 * (int)sizeof(unsigned long))

/* One of the kernel's lists of CPUs or nodes ("0-3,8,10-11"), from `path`,
 * into a bitmask; what lies beyond the mask is left out. -1 when the file
 * cannot be read or holds no such list. */
static int read_list(const char *path, unsigned long set[SIM_CPU_WORDS])
{
    memset(set, 0, SIM_CPU_WORDS * sizeof *set);
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    char text[8192];
    bool ok = fgets(text, sizeof text, f) != NULL;
    fclose(f);
    for (char *p = text; ok && *p && *p != '\n';) {
        char *end;
        unsigned long first = strtoul(p, &end, 10), last = first;
        if (end == p)
            return -1;
        if (*end == '-') {
            p = end + 1;
            last = strtoul(p, &end, 10);
            if (end == p || last < first)
                return -1;
        }
        for (unsigned long i = first; i <= last && i < SIM_CPU_WORDS * WORD_BITS; i++)
            set[i / WORD_BITS] |= 1ul << (i % WORD_BITS);
        p = *end == ',' ? end + 1 : end;
    }
    return ok ? 0 : -1;
}

static bool has(const unsigned long set[SIM_CPU_WORDS], int i)
{
    return i >= 0 && i < SIM_CPU_WORDS * WORD_BITS && (set[i / WORD_BITS] >> (i % WORD_BITS) & 1);
}

static int node_cpus(int node, unsigned long set[SIM_CPU_WORDS])
{
    char path[96];
    snprintf(path, sizeof path, "/sys/devices/system/node/node%d/cpulist", node);
    return node < 0 ? read_list("/sys/devices/system/cpu/online", set) : read_list(path, set);
}

/* The package (socket) CPU `cpu` is on, or -1. */
static int package_of(int cpu)
{
    char path[96];
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/physical_package_id", cpu);
    FILE *f = fopen(path, "re");
    int package = -1;
    if (f) {
        if (fscanf(f, "%d", &package) != 1)
            package = -1;
        fclose(f);
    }
    return package;
}

int sim_config_device_node(int phys, int count)
{
    unsigned long nodes[SIM_CPU_WORDS];
    if (read_list("/sys/devices/system/node/has_cpu", nodes) != 0)
        return -1;
    int n = 0;
    for (int i = 0; i < SIM_CPU_WORDS * WORD_BITS; i++)
        n += has(nodes, i);
    if (n == 0)
        return -1;
    int k = count > 0 ? phys * n / count : 0; /* the k-th node with CPUs */
    for (int i = 0; i < SIM_CPU_WORDS * WORD_BITS; i++)
        if (has(nodes, i) && k-- == 0)
            return i;
    return -1;
}

/* The online CPUs on the packages of node's CPUs. */
static int socket_cpus(int node, unsigned long set[SIM_CPU_WORDS])
{
    unsigned long near[SIM_CPU_WORDS], online[SIM_CPU_WORDS];
    bool package[256] = {false};
    if (node_cpus(node, near) != 0 || node_cpus(-1, online) != 0)
        return -1;
    for (int i = 0; i < SIM_CPU_WORDS * WORD_BITS; i++) {
        int p = has(near, i) ? package_of(i) : -1;
        if (p >= 0 && p < 256)
            package[p] = true;
    }
    memcpy(set, near, sizeof near);
    for (int i = 0; i < SIM_CPU_WORDS * WORD_BITS; i++) {
        int p = has(online, i) ? package_of(i) : -1;
        if (p >= 0 && p < 256 && package[p])
            set[i / WORD_BITS] |= 1ul << (i % WORD_BITS);
    }
    return 0;
}

int sim_config_cpus(int node, bool socket, unsigned long set[SIM_CPU_WORDS])
{
    return socket ? socket_cpus(node, set) : node_cpus(node, set);
}

int sim_config_nodes(int node, bool socket, unsigned long set[SIM_CPU_WORDS])
{
    memset(set, 0, SIM_CPU_WORDS * sizeof *set);
    if (node < 0) {
        set[0] = 1; /* without NUMA, all memory is node 0 */
        return 0;
    }
    set[node / WORD_BITS] |= 1ul << (node % WORD_BITS);
    if (!socket)
        return 0;
    unsigned long nodes[SIM_CPU_WORDS], cpus[SIM_CPU_WORDS], theirs[SIM_CPU_WORDS];
    if (read_list("/sys/devices/system/node/has_cpu", nodes) != 0 || socket_cpus(node, cpus) != 0)
        return -1;
    for (int i = 0; i < SIM_CPU_WORDS * WORD_BITS; i++) {
        if (!has(nodes, i) || node_cpus(i, theirs) != 0)
            continue;
        for (int w = 0; w < SIM_CPU_WORDS; w++)
            if (theirs[w] & cpus[w]) {
                set[i / WORD_BITS] |= 1ul << (i % WORD_BITS);
                break;
            }
    }
    return 0;
}
