/* api: the public functions of vram.h over the device table.
 *
 * State: the two layers of settings and the device table, guarded by one
 * mutex until first use. After that the table does not change (until
 * vram_shutdown), so the hot path reads it without locking: `ready` is
 * published with release order once everything it points to is built.
 */
#include "../../include/vram.h"
#include "../util/parse.h"
#include "../util/report.h"
#include "device.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pthread_mutex_t state_lock = PTHREAD_MUTEX_INITIALIZER;
static struct options call_opts, env_opts;
static bool call_opts_ready;
static struct device_table table;
static atomic_bool ready;

const char *vram_version(void) { return "0.1.0"; }

const char *vram_last_error(void) { return report_last(); }

const char *vram_status_name(vram_status status) { return report_status_name(status); }

/* ------------------------------------------------------- configuration */

static struct options *call_layer(void)
{
    if (!call_opts_ready) {
        options_clear(&call_opts);
        call_opts_ready = true;
    }
    return &call_opts;
}

/* Takes the state lock for a configuration change; refuses after first use. */
static vram_status begin_config(const char *what)
{
    pthread_mutex_lock(&state_lock);
    if (atomic_load_explicit(&ready, memory_order_acquire)) {
        pthread_mutex_unlock(&state_lock);
        return report_fail(VRAM_ERROR_FROZEN,
                           "%s cannot be changed after first use: the devices were already set "
                           "up by an earlier call. Configure before any call that uses devices "
                           "(or set the VRAM_* variable in the environment)",
                           what);
    }
    return VRAM_OK;
}

static vram_status check_physical_arg(const char *fn, int physical)
{
    if (physical < -1 || physical >= OPT_MAX_DEVICES)
        return report_fail(VRAM_ERROR_INVALID_ARGUMENT,
                           "%s: device %d; accepted: -1 (every device) or 0 to %d", fn, physical,
                           OPT_MAX_DEVICES - 1);
    return VRAM_OK;
}

vram_status vram_set_visible_devices(const char *spec)
{
    vram_status st = begin_config("the visible devices");
    if (st != VRAM_OK)
        return st;
    struct options *o = call_layer();
    if (!spec) {
        o->visible_set = false;
    } else if (strlen(spec) >= sizeof o->visible) {
        st = report_fail(VRAM_ERROR_INVALID_ARGUMENT, "vram_set_visible_devices: the list is "
                                                      "longer than %zu characters",
                         sizeof o->visible - 1);
    } else {
        o->visible_set = true;
        snprintf(o->visible, sizeof o->visible, "%s", spec);
        snprintf(o->visible_origin, sizeof o->visible_origin, "vram_set_visible_devices(\"%.60s\")",
                 spec);
    }
    pthread_mutex_unlock(&state_lock);
    return st;
}

static vram_status set_limit(const char *fn, int physical, struct limit_setting l)
{
    vram_status st = check_physical_arg(fn, physical);
    if (st != VRAM_OK)
        return st;
    if ((st = begin_config("the memory limit")) != VRAM_OK)
        return st;
    struct options *o = call_layer();
    if (physical < 0) {
        /* "Every device" replaces what was set for single devices. */
        for (int d = 0; d < OPT_MAX_DEVICES; d++)
            o->limit[d].kind = LIMIT_NONE;
        o->limit_all = l;
    } else {
        o->limit[physical] = l;
    }
    pthread_mutex_unlock(&state_lock);
    return VRAM_OK;
}

vram_status vram_set_memory_limit(int physical, uint64_t bytes)
{
    if (bytes == 0)
        return report_fail(VRAM_ERROR_INVALID_ARGUMENT,
                           "vram_set_memory_limit: a limit of 0 bytes; accepted: more than 0");
    struct limit_setting l = {.kind = LIMIT_BYTES, .bytes = bytes};
    snprintf(l.origin, sizeof l.origin, "vram_set_memory_limit(%d, %llu)", physical,
             (unsigned long long)bytes);
    return set_limit("vram_set_memory_limit", physical, l);
}

vram_status vram_set_memory_fraction(int physical, double fraction)
{
    if (!(fraction > 0.0 && fraction <= 1.0))
        return report_fail(VRAM_ERROR_INVALID_ARGUMENT,
                           "vram_set_memory_fraction: fraction %g; accepted: %s", fraction,
                           PARSE_FRACTION_FORMS);
    struct limit_setting l = {.kind = LIMIT_FRACTION, .fraction = fraction};
    snprintf(l.origin, sizeof l.origin, "vram_set_memory_fraction(%d, %g)", physical, fraction);
    return set_limit("vram_set_memory_fraction", physical, l);
}

vram_status vram_set_allow_growth(int allow)
{
    vram_status st = begin_config("memory growth");
    if (st != VRAM_OK)
        return st;
    struct options *o = call_layer();
    o->growth = allow != 0;
    snprintf(o->growth_origin, sizeof o->growth_origin, "vram_set_allow_growth(%d)", allow);
    pthread_mutex_unlock(&state_lock);
    return VRAM_OK;
}

vram_status vram_set_virtual_devices(int physical, int count, const uint64_t *limits)
{
    const char *fn = "vram_set_virtual_devices";
    if (physical < 0 || physical >= OPT_MAX_DEVICES)
        return report_fail(VRAM_ERROR_INVALID_ARGUMENT, "%s: device %d; accepted: 0 to %d", fn,
                           physical, OPT_MAX_DEVICES - 1);
    if (count < 0 || count > OPT_MAX_VIRTUAL || (count > 0 && !limits))
        return report_fail(VRAM_ERROR_INVALID_ARGUMENT,
                           "%s: %d virtual devices%s; accepted: 0 (no split) to %d, with a limit "
                           "for each",
                           fn, count, count > 0 && !limits ? " and no limits" : "", OPT_MAX_VIRTUAL);
    for (int k = 0; k < count; k++)
        if (limits[k] == 0)
            return report_fail(VRAM_ERROR_INVALID_ARGUMENT,
                               "%s: virtual device %d has a limit of 0 bytes; accepted: more than 0",
                               fn, k);
    vram_status st = begin_config("the virtual devices");
    if (st != VRAM_OK)
        return st;
    struct virtual_setting *v = &call_layer()->virt[physical];
    memset(v, 0, sizeof *v);
    v->set = true;
    v->count = count;
    for (int k = 0; k < count; k++)
        v->limits[k] = limits[k];
    snprintf(v->origin, sizeof v->origin, "vram_set_virtual_devices(%d, %d, ...)", physical, count);
    pthread_mutex_unlock(&state_lock);
    return VRAM_OK;
}

vram_status vram_configure(const char *name, const char *value)
{
    if (!name)
        return report_fail(VRAM_ERROR_INVALID_ARGUMENT, "vram_configure: no option name");
    vram_status st = begin_config(name);
    if (st != VRAM_OK)
        return st;
    char err[1024];
    struct options *o = call_layer();
    struct options trial = *o; /* a bad value leaves the settings as they were */
    if (options_set(&trial, name, value, err, sizeof err) != 0)
        st = report_fail(VRAM_ERROR_CONFIG, "%s", err);
    else
        *o = trial;
    pthread_mutex_unlock(&state_lock);
    return st;
}

vram_status vram_init(void)
{
    if (atomic_load_explicit(&ready, memory_order_acquire))
        return VRAM_OK;
    pthread_mutex_lock(&state_lock);
    vram_status st = VRAM_OK;
    if (!atomic_load_explicit(&ready, memory_order_relaxed)) {
        struct options *call = call_layer();
        char err[1024];
        options_clear(&env_opts);
        if (options_from_environment(&env_opts, err, sizeof err) != 0) {
            st = report_fail(VRAM_ERROR_CONFIG, "%s", err);
        } else {
            int lvl = call->log_level >= 0 ? call->log_level : env_opts.log_level;
            if (lvl >= 0)
                log_set_level(lvl);
            bool under_interposer = dlsym(RTLD_DEFAULT, "vram_preload_active") != NULL;
            /* Unknown variables are said once for the process: inside a
             * vram run command vram run said it; under the interposer, the
             * interposer does where VRAM_LOG lets it (its default is off). */
            if (!getenv("VRAM_COMMAND") /* COMMAND_ENV, command.h */ &&
                !(under_interposer && env_opts.log_level >= LOG_WARN))
                options_warn_unknown();
            if (under_interposer) {
                /* Under vram run the interposer enforces the environment's
                 * budget and shows it as the device size; limits from the
                 * environment are not applied a second time. */
                vlog(LOG_INFO, "running under the vram interposer: the device size seen is the "
                               "budget; VRAM_MEMORY_LIMIT/FRACTION are enforced there");
                env_opts.limit_all.kind = LIMIT_NONE;
                for (int d = 0; d < OPT_MAX_DEVICES; d++)
                    env_opts.limit[d].kind = LIMIT_NONE;
            }
            int growth = call->growth >= 0 ? call->growth : env_opts.growth;
            /* Under the interposer, the interposer is the one that talks to vramd. */
            st = devices_open(&table, call, &env_opts, growth != 0, !under_interposer);
            if (st == VRAM_OK)
                atomic_store_explicit(&ready, true, memory_order_release);
        }
    }
    pthread_mutex_unlock(&state_lock);
    return st;
}

void vram_shutdown(void)
{
    pthread_mutex_lock(&state_lock);
    if (atomic_load(&ready))
        devices_close(&table);
    atomic_store(&ready, false);
    options_clear(&call_opts);
    options_clear(&env_opts);
    pthread_mutex_unlock(&state_lock);
}

/* -------------------------------------------------------------- devices */

static vram_status logical_of(int device, struct logical_device **out)
{
    vram_status st = vram_init();
    if (st != VRAM_OK)
        return st;
    if (device < 0 || device >= table.nlogical)
        return report_fail(VRAM_ERROR_NO_DEVICE, "no device %d: there %s %d device%s%s", device,
                           table.nlogical == 1 ? "is" : "are", table.nlogical,
                           table.nlogical == 1 ? "" : "s",
                           table.nlogical ? "" : " (check VRAM_VISIBLE_DEVICES)");
    *out = &table.logical[device];
    return VRAM_OK;
}

static vram_status physical_of(int physical, struct physical_device **out)
{
    vram_status st = vram_init();
    if (st != VRAM_OK)
        return st;
    if (physical < 0 || physical >= table.nphys)
        return report_fail(VRAM_ERROR_NO_DEVICE, "no physical device %d: %d %s visible",
                           physical, table.nphys, table.nphys == 1 ? "is" : "are");
    *out = &table.phys[physical];
    return VRAM_OK;
}

static vram_status count_of(const char *fn, int *count, const int *n)
{
    if (!count)
        return report_fail(VRAM_ERROR_INVALID_ARGUMENT, "%s: count is NULL", fn);
    vram_status st = vram_init();
    if (st == VRAM_OK)
        *count = *n;
    return st;
}

vram_status vram_device_count(int *count)
{
    return count_of("vram_device_count", count, &table.nlogical);
}

vram_status vram_physical_device_count(int *count)
{
    return count_of("vram_physical_device_count", count, &table.nphys);
}

static void fill_info(vram_device_info *info, int index, struct physical_device *p)
{
    memset(info, 0, sizeof *info);
    info->index = index;
    info->physical = (int)(p - table.phys);
    info->ordinal = p->ordinal;
    info->virtual_count = p->nlogical;
    snprintf(info->name, sizeof info->name, "%s", p->name);
    snprintf(info->uuid, sizeof info->uuid, "%s", p->uuid);
    info->total = p->total;
    uint64_t total;
    if (devices_driver_meminfo(&table, p, &info->driver_free, &total) != VRAM_OK)
        info->driver_free = 0;
}

vram_status vram_device_get_info(int device, vram_device_info *info)
{
    struct logical_device *l;
    vram_status st = info ? logical_of(device, &l)
                          : report_fail(VRAM_ERROR_INVALID_ARGUMENT, "vram_device_get_info: info is NULL");
    if (st != VRAM_OK)
        return st;
    fill_info(info, device, l->phys);
    info->virtual_index = l->virtual_index;
    info->limit = l->limit;
    return VRAM_OK;
}

vram_status vram_physical_device_get_info(int physical, vram_device_info *info)
{
    struct physical_device *p;
    vram_status st = info ? physical_of(physical, &p)
                          : report_fail(VRAM_ERROR_INVALID_ARGUMENT,
                                        "vram_physical_device_get_info: info is NULL");
    if (st != VRAM_OK)
        return st;
    fill_info(info, physical, p);
    for (int k = 0; k < p->nlogical; k++)
        info->limit += table.logical[p->first_logical + k].limit;
    return VRAM_OK;
}

/* ----------------------------------------------------------- allocation */

static vram_status out_of_memory(struct logical_device *l, const struct heap_oom *oom)
{
    uint64_t dfree = 0, dtotal = 0;
    char driver[256] = "";
    if (devices_driver_meminfo(&table, l->phys, &dfree, &dtotal) == VRAM_OK) {
        uint64_t mine = oom->stats.bytes_reserved;
        uint64_t others = dtotal - dfree > mine ? dtotal - dfree - mine : 0;
        snprintf(driver, sizeof driver,
                 "; the driver reports %s free of %s in total, so other processes and contexts "
                 "hold about %s",
                 format_size(dfree).text, format_size(dtotal).text, format_size(others).text);
    }
    char hint[384] = "", limit[160];
    const struct heap_stats *s = &oom->stats;
    /* The limit named by what set it: the setting to raise. */
    if (l->limit_origin[0])
        snprintf(limit, sizeof limit, "the limit (%s)", l->limit_origin);
    else
        snprintf(limit, sizeof limit, "the device");
    if (oom->rounded > s->bytes_limit)
        snprintf(hint, sizeof hint, ". The request alone is larger than %s%s", limit,
                 l->limit_origin[0] ? ": raise it" : "");
    else if (s->bytes_reserved - s->bytes_in_use >= oom->rounded)
        snprintf(hint, sizeof hint, ". Enough is free in total but not in one block "
                                    "(fragmentation %.0f%%): free or reuse large blocks earlier",
                 s->fragmentation * 100);
    else if (oom->driver_error)
        snprintf(hint, sizeof hint, ". The driver refused %s: the device is full, not the limit",
                 format_size(oom->driver_refused).text);
    else
        snprintf(hint, sizeof hint, ". %c%s is reached: free memory%s", limit[0] - 'a' + 'A',
                 limit + 1, l->limit_origin[0] ? " or raise it" : "");
    return report_fail(VRAM_ERROR_OUT_OF_MEMORY,
                       "out of memory on device %d (%s, limit %s): requested %s (%llu bytes, "
                       "rounded to %llu); in use %s, reserved %s, largest free block %s, waiting "
                       "on streams %s%s%s",
                       l->index, l->phys->name, format_size(s->bytes_limit).text,
                       format_size(oom->requested).text, (unsigned long long)oom->requested,
                       (unsigned long long)oom->rounded, format_size(s->bytes_in_use).text,
                       format_size(s->bytes_reserved).text, format_size(s->largest_free_block).text,
                       format_size(s->bytes_pending).text, driver, hint);
}

vram_status vram_malloc(int device, size_t size, vram_stream stream, void **ptr)
{
    if (!ptr)
        return report_fail(VRAM_ERROR_INVALID_ARGUMENT, "vram_malloc: ptr is NULL");
    struct logical_device *l;
    vram_status st = logical_of(device, &l);
    if (st != VRAM_OK)
        return st;
    if (size == 0) {
        *ptr = NULL;
        return VRAM_OK;
    }
    uint64_t addr;
    struct heap_oom oom;
    int rc = heap_alloc(&l->heap, size, stream, &addr, &oom);
    if (rc == HEAP_OUT_OF_MEMORY)
        return out_of_memory(l, &oom);
    if (rc != HEAP_OK)
        return report_fail(VRAM_ERROR_SYSTEM, "vram_malloc: out of host memory for bookkeeping");
    *ptr = (void *)(uintptr_t)addr;
    return VRAM_OK;
}

vram_status vram_free(void *ptr, vram_stream stream)
{
    if (!ptr)
        return VRAM_OK;
    if (atomic_load_explicit(&ready, memory_order_acquire))
        for (int i = 0; i < table.nlogical; i++)
            if (heap_free(&table.logical[i].heap, (uint64_t)(uintptr_t)ptr, stream) == HEAP_OK)
                return VRAM_OK;
    return report_fail(VRAM_ERROR_UNKNOWN_POINTER,
                       "vram_free: %p was not allocated by vram_malloc, or was already freed", ptr);
}

vram_status vram_allocation_size(const void *ptr, size_t *size)
{
    if (!size)
        return report_fail(VRAM_ERROR_INVALID_ARGUMENT, "vram_allocation_size: size is NULL");
    if (ptr && atomic_load_explicit(&ready, memory_order_acquire))
        for (int i = 0; i < table.nlogical; i++) {
            uint64_t s = heap_size_of(&table.logical[i].heap, (uint64_t)(uintptr_t)ptr);
            if (s) {
                *size = (size_t)s;
                return VRAM_OK;
            }
        }
    return report_fail(VRAM_ERROR_UNKNOWN_POINTER,
                       "vram_allocation_size: %p is not a live allocation of vram", ptr);
}

/* ---------------------------------------------------------------- stats */

static void copy_stats(vram_stats *out, const struct heap_stats *h)
{
    memset(out, 0, sizeof *out);
    out->bytes_in_use = h->bytes_in_use;
    out->peak_bytes_in_use = h->peak_bytes_in_use;
    out->bytes_reserved = h->bytes_reserved;
    out->peak_bytes_reserved = h->peak_bytes_reserved;
    out->bytes_limit = h->bytes_limit;
    out->bytes_pending = h->bytes_pending;
    out->num_allocs = h->num_allocs;
    out->active_allocs = h->active_allocs;
    out->largest_alloc_size = h->largest_alloc_size;
    out->largest_free_block = h->largest_free_block;
    out->num_regions = h->num_regions;
    out->num_ooms = h->num_ooms;
    out->num_alloc_retries = h->num_alloc_retries;
    out->fragmentation = h->fragmentation;
}

vram_status vram_get_stats(int device, vram_stats *stats)
{
    struct logical_device *l;
    vram_status st = stats ? logical_of(device, &l)
                           : report_fail(VRAM_ERROR_INVALID_ARGUMENT, "vram_get_stats: stats is NULL");
    if (st != VRAM_OK)
        return st;
    struct heap_stats h;
    heap_stats(&l->heap, &h);
    copy_stats(stats, &h);
    return devices_driver_meminfo(&table, l->phys, &stats->device_free, &stats->device_total);
}

#define MAX(a, b) ((a) > (b) ? (a) : (b))

vram_status vram_get_physical_stats(int physical, vram_stats *stats)
{
    struct physical_device *p;
    vram_status st = stats ? physical_of(physical, &p)
                           : report_fail(VRAM_ERROR_INVALID_ARGUMENT,
                                         "vram_get_physical_stats: stats is NULL");
    if (st != VRAM_OK)
        return st;
    memset(stats, 0, sizeof *stats);
    for (int k = 0; k < p->nlogical; k++) {
        struct heap_stats h;
        heap_stats(&table.logical[p->first_logical + k].heap, &h);
        stats->bytes_in_use += h.bytes_in_use;
        stats->peak_bytes_in_use += h.peak_bytes_in_use;
        stats->bytes_reserved += h.bytes_reserved;
        stats->peak_bytes_reserved += h.peak_bytes_reserved;
        stats->bytes_limit += h.bytes_limit;
        stats->bytes_pending += h.bytes_pending;
        stats->num_allocs += h.num_allocs;
        stats->active_allocs += h.active_allocs;
        stats->num_regions += h.num_regions;
        stats->num_ooms += h.num_ooms;
        stats->num_alloc_retries += h.num_alloc_retries;
        stats->largest_alloc_size = MAX(stats->largest_alloc_size, h.largest_alloc_size);
        stats->largest_free_block = MAX(stats->largest_free_block, h.largest_free_block);
        stats->fragmentation = MAX(stats->fragmentation, h.fragmentation);
    }
    return devices_driver_meminfo(&table, p, &stats->device_free, &stats->device_total);
}

/* Applies fn to one logical device, or to all with -1. */
static vram_status each_device(int device, void (*fn)(struct logical_device *, void *), void *arg)
{
    if (device == -1) {
        vram_status st = vram_init();
        if (st != VRAM_OK)
            return st;
        for (int i = 0; i < table.nlogical; i++)
            fn(&table.logical[i], arg);
        return VRAM_OK;
    }
    struct logical_device *l;
    vram_status st = logical_of(device, &l);
    if (st == VRAM_OK)
        fn(l, arg);
    return st;
}

static void reset_one(struct logical_device *l, void *arg)
{
    (void)arg;
    heap_reset_peaks(&l->heap);
}

static void trim_one(struct logical_device *l, void *arg)
{
    uint64_t released = heap_trim(&l->heap);
    *(uint64_t *)arg += released;
    if (released)
        vlog(LOG_INFO, "device %d: returned %s to the driver", l->index, format_size(released).text);
}

vram_status vram_reset_peak_stats(int device) { return each_device(device, reset_one, NULL); }

vram_status vram_trim(int device, uint64_t *released)
{
    uint64_t total = 0;
    vram_status st = each_device(device, trim_one, &total);
    if (released)
        *released = total;
    return st;
}
