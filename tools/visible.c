/* visible: the GPUs a program under vram run will see, from the driver. */
#include "visible.h"

#include "../src/cuda/context_cost.h"
#include "../src/cuda/driver.h"
#include "../src/cuda/nvml_query.h"
#include "../src/util/parse.h"

#include <ctype.h>
#include <stdbool.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define DEVICES_FORMS                                                                          \
    "a comma-separated list of GPU ordinals or GPU UUIDs (or unique prefixes of them), as "    \
    "CUDA_VISIBLE_DEVICES takes them: 0,1 or GPU-5a1d; vram devices lists them"

/* Every GPU the driver shows in this environment. */
static int driver_gpus(struct visible *all, char *err, size_t n)
{
    struct cuda_driver cu;
    char why[512];
    if (driver_load(&cu, why, sizeof why) != 0) {
        snprintf(err, n, "cannot ask the CUDA driver which GPUs there are: %s", why);
        return -1;
    }
    int count = 0;
    CUresult rc = cu.cuDeviceGetCount(&count);
    all->n = 0;
    for (int o = 0; rc == CUDA_SUCCESS && o < count && all->n < OPT_MAX_DEVICES; o++) {
        struct visible_gpu *g = &all->gpu[all->n];
        CUdevice d;
        CUuuid u;
        size_t total;
        if ((rc = cu.cuDeviceGet(&d, o)) != CUDA_SUCCESS ||
            (rc = cu.cuDeviceGetUuid(&u, d)) != CUDA_SUCCESS ||
            (rc = cu.cuDeviceGetName(g->name, sizeof g->name, d)) != CUDA_SUCCESS ||
            (rc = cu.cuDeviceTotalMem(&total, d)) != CUDA_SUCCESS)
            break;
        g->ordinal = o;
        uuid_text((const unsigned char *)u.bytes, g->uuid);
        g->total = total;
        all->n++;
    }
    if (rc != CUDA_SUCCESS) {
        char buf[64];
        snprintf(err, n, "the CUDA driver could not list its GPUs: %s",
                 driver_error_text(&cu, rc, buf));
        driver_unload(&cu);
        return -1;
    }
    driver_unload(&cu);
    return 0;
}

/* `--devices "0,1"` or `VRAM_VISIBLE_DEVICES="0,1"`: the setting as a
 * message names it. */
static const char *setting(const char *origin, const char *devices, char *out, size_t n)
{
    if (origin[0] == '-')
        snprintf(out, n, "%s \"%s\"", origin, devices);
    else
        snprintf(out, n, "%s=\"%s\"", origin, devices);
    return out;
}

/* "this machine has 2 GPUs (...)", or, under an inherited
 * CUDA_VISIBLE_DEVICES, what it lets this process see. */
static void allowed(const struct visible *all, char *out, size_t n)
{
    char list[1024];
    visible_describe(all, list, sizeof list);
    const char *inherited = getenv("CUDA_VISIBLE_DEVICES");
    if (inherited)
        snprintf(out, n, "CUDA_VISIBLE_DEVICES=\"%.200s\" lets this process use %s", inherited,
                 list);
    else
        snprintf(out, n, "this machine has %s", list);
}

/* The one GPU an entry of the setting names, or -1 with the message. */
static int find(const struct visible *all, const char *item, const char *what, char *err,
                size_t n)
{
    char there[1400];
    allowed(all, there, sizeof there);
    uint64_t ord;
    parse_why why;
    if (isdigit((unsigned char)item[0])) {
        if (parse_uint(item, 1u << 20, &ord, &why) == 0 && ord < (uint64_t)all->n)
            return (int)ord;
        snprintf(err, n, "%s: there is no GPU %s; %s; accepted: " DEVICES_FORMS, what, item,
                 there);
        return -1;
    }
    /* An entry of the inherited CUDA_VISIBLE_DEVICES as it is written
     * there (a MIG instance's name, say) names that GPU. */
    for (int g = 0; g < all->n; g++)
        if (strcasecmp(all->gpu[g].entry, item) == 0)
            return g;
    if (strncasecmp(item, "GPU-", 4) != 0 || !item[4]) {
        snprintf(err, n, "%s: \"%s\" is neither an ordinal nor a GPU UUID; accepted: "
                 DEVICES_FORMS, what, item);
        return -1;
    }
    int found = -1;
    for (int g = 0; g < all->n; g++) {
        if (strncasecmp(all->gpu[g].uuid, item, strlen(item)) != 0)
            continue;
        if (found >= 0) {
            snprintf(err, n, "%s: \"%s\" matches more than one GPU (%s and %s); "
                     "give more of the UUID", what, item, all->gpu[found].uuid,
                     all->gpu[g].uuid);
            return -1;
        }
        found = g;
    }
    if (found < 0)
        snprintf(err, n, "%s: no GPU has the UUID %s; %s", what, item, there);
    return found;
}

/* How a child names each GPU in its own CUDA_VISIBLE_DEVICES: the
 * inherited variable's entry for it, as written there (an ordinal, a UUID,
 * a MIG instance), since the driver shows exactly its leading valid
 * entries in their order; the UUID where the entry does not plainly name
 * that GPU; the ordinal when nothing was inherited. */
static void name_entries(struct visible *all)
{
    const char *inherited = getenv("CUDA_VISIBLE_DEVICES");
    const char *p = inherited;
    for (int g = 0; g < all->n; g++) {
        struct visible_gpu *v = &all->gpu[g];
        if (!inherited) {
            snprintf(v->entry, sizeof v->entry, "%d", v->ordinal);
            continue;
        }
        char e[sizeof v->entry] = "";
        if (p) {
            size_t len = strcspn(p, ",");
            while (len && isspace((unsigned char)*p))
                p++, len--;
            size_t keep = len;
            while (keep && isspace((unsigned char)p[keep - 1]))
                keep--;
            if (keep < sizeof e) {
                memcpy(e, p, keep);
                e[keep] = 0;
            }
            p = p[len] ? p + len + 1 : NULL;
        }
        bool plain = e[0] && !(strncasecmp(e, "GPU-", 4) == 0 &&
                               strncasecmp(v->uuid, e, strlen(e)) != 0);
        snprintf(v->entry, sizeof v->entry, "%s", plain ? e : v->uuid);
    }
}

int visible_gpus(const char *devices, const char *origin, struct visible *out, char *err,
                 size_t n)
{
    /* The driver is asked under the inherited CUDA_VISIBLE_DEVICES: what a
     * scheduler or the user excluded stays excluded, and the setting's
     * ordinals are those the program would have had without it, as vram
     * devices and --limit 0=... number them. */
    static struct visible all; /* large: not on the stack */
    if (driver_gpus(&all, err, n) != 0)
        return -1;
    name_entries(&all);
    if (!devices) {
        *out = all;
        return 0;
    }
    char what[700];
    setting(origin ? origin : "--devices", devices, what, sizeof what);
    out->n = 0;
    if (!*devices) /* "" for none, as CUDA_VISIBLE_DEVICES takes it */
        return 0;
    char items[OPT_MAX_DEVICES][64];
    parse_why why;
    int count = parse_split(devices, ',', items, OPT_MAX_DEVICES, &why);
    if (count < 0) {
        snprintf(err, n, "%s: %s; accepted: " DEVICES_FORMS, what, why.text);
        return -1;
    }
    for (int i = 0; i < count; i++) {
        int g = find(&all, items[i], what, err, n);
        if (g < 0)
            return -1;
        for (int j = 0; j < out->n; j++)
            if (out->gpu[j].ordinal == all.gpu[g].ordinal) {
                snprintf(err, n, "%s: GPU %d (%s) is listed twice", what, g, all.gpu[g].uuid);
                return -1;
            }
        out->gpu[out->n++] = all.gpu[g];
    }
    return 0;
}

void visible_environment(const struct visible *v, char *out, size_t n)
{
    size_t used = 0;
    out[0] = 0;
    for (int i = 0; i < v->n && used < n; i++)
        used += (size_t)snprintf(out + used, n - used, "%s%s", i ? "," : "", v->gpu[i].entry);
}

/* What NVML says this process holds on the GPU, or -1. */
static int64_t nvml_own(const char *uuid)
{
    struct nvml_process *p;
    nvmlDevice_t d;
    char err[256];
    int n = nvml_by_uuid(uuid, &d, err, sizeof err) == 0
                ? nvml_processes_on(d, &p, err, sizeof err)
                : -1;
    int64_t held = -1;
    for (int i = 0; i < n; i++)
        if (p[i].pid == (unsigned)getpid() && p[i].used_known)
            held = (int64_t)p[i].used;
    if (n >= 0)
        free(p);
    return held;
}

void visible_measure_contexts(struct visible *v)
{
    struct cuda_driver cu;
    char why[512];
    if (v->n == 0 || driver_load(&cu, why, sizeof why) != 0)
        return;
    struct context_calls calls = {
        cu.cuCtxPushCurrent, cu.cuCtxPopCurrent, cu.cuMemGetInfo,
        (PFN_cuCtxCreate_v2)dlsym(cu.lib, "cuCtxCreate_v2"),
        (PFN_cuCtxDestroy_v2)dlsym(cu.lib, "cuCtxDestroy_v2"),
    };
    bool nvml = nvml_open(NULL, "vram run", why, sizeof why) == 0;
    for (int i = 0; i < v->n; i++) {
        CUdevice d;
        CUcontext ctx;
        if (cu.cuDeviceGet(&d, v->gpu[i].ordinal) != CUDA_SUCCESS ||
            cu.cuDevicePrimaryCtxRetain(&ctx, d) != CUDA_SUCCESS)
            continue;
        int64_t held = nvml ? nvml_own(v->gpu[i].uuid) : -1;
        uint64_t bytes;
        if (held >= 0)
            v->gpu[i].context = (uint64_t)held;
        else if (context_cost_by_scratch(&calls, ctx, d, &bytes) == 0)
            v->gpu[i].context = bytes;
        cu.cuDevicePrimaryCtxRelease(d);
    }
    if (nvml)
        nvml_close();
    driver_unload(&cu);
}

void visible_describe(const struct visible *v, char *out, size_t n)
{
    if (v->n == 0) {
        snprintf(out, n, "no GPU");
        return;
    }
    size_t used = (size_t)snprintf(out, n, "%d GPU%s (", v->n, v->n == 1 ? "" : "s");
    for (int i = 0; i < v->n && used < n; i++)
        used += (size_t)snprintf(out + used, n - used, "%s%d: %s, %s", i ? "; " : "", i,
                                 v->gpu[i].uuid, format_size(v->gpu[i].total).text);
    if (used < n)
        snprintf(out + used, n - used, ")");
}
