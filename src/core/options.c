#include "options.h"

#include "../util/parse.h"
#include "../util/report.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

extern char **environ;

enum opt_id { OPT_VISIBLE, OPT_LIMIT, OPT_FRACTION, OPT_GROWTH, OPT_VIRTUAL, OPT_LOG, OPT_OTHER };

/* Every VRAM_* variable that any part of vram reads. */
static const struct {
    const char *name;
    enum opt_id id;
    const char *forms;
} table[] = {
    {"VRAM_VISIBLE_DEVICES", OPT_VISIBLE,
     "a comma-separated list of device ordinals or UUID prefixes, e.g. \"1,0\" or "
     "\"GPU-5a1d\"; \"\" for none"},
    {"VRAM_MEMORY_LIMIT", OPT_LIMIT,
     "one size for every device or DEVICE=SIZE,...; a size is " PARSE_SIZE_FORMS},
    {"VRAM_MEMORY_FRACTION", OPT_FRACTION,
     "one fraction for every device or DEVICE=FRACTION,...; a fraction is " PARSE_FRACTION_FORMS},
    {"VRAM_ALLOW_GROWTH", OPT_GROWTH, PARSE_BOOL_FORMS},
    {"VRAM_VIRTUAL_DEVICES", OPT_VIRTUAL,
     "DEVICE:SIZE,SIZE,...;DEVICE:SIZE,... e.g. \"0:2GiB,2GiB;1:4GiB\"; a size is " PARSE_SIZE_FORMS},
    {"VRAM_LOG", OPT_LOG, "off, error, warn, info or debug"},
    {"VRAM_CUDA_LIBRARY", OPT_OTHER, "the path or name of the CUDA driver library"},
    {"VRAM_PRELOAD_LIBRARY", OPT_OTHER, "vram run: the interposer library to preload"},
    {"VRAM_DAEMON", OPT_OTHER, "vramd's socket path, or \"off\""},
    {"VRAM_WAIT", OPT_OTHER, "with vramd: the longest wait for memory (30s, 10m; 0: none) or true"},
    {"VRAM_JOB", OPT_OTHER, "with vramd: the job this process belongs to"},
    {"VRAM_RECORD", OPT_OTHER, "the directory to record GPU memory events into"},
    {"VRAM_SIM_DEVICES", OPT_OTHER, "simulated driver: device sizes"},
    {"VRAM_SIM_DIR", OPT_OTHER, "simulated driver: state directory"},
    {"VRAM_SIM_CONTEXT_SIZE", OPT_OTHER, "simulated driver: device memory each CUDA context takes"},
    {"VRAM_SIM_POOL_CHUNK", OPT_OTHER, "simulated driver: the chunks a stream-ordered pool grows in"},
    {"VRAM_SIM_DRIVER", OPT_OTHER, "simulated driver and NVML: the driver branch, 580 or 615"},
    {"VRAM_SIM_ACCOUNTING", OPT_OTHER, "simulated NVML: accounting mode, on or off (the default)"},
    {"VRAM_ISOLATE_CHILD", OPT_OTHER, "internal: set by vram_run_isolated in its child"},
    {"VRAM_COMMAND", OPT_OTHER, "set by vram run: the command whose GPU budget this process "
     "shares; vramd in a container: its job's, from vramd"},
    {"VRAM_CONTAINER_GPUS", OPT_OTHER, "vram-oci-runtime: the GPUs a container's budget is for "
     "(0, GPU-<uuid>, all, or a list)"},
    {"VRAM_OCI_RUNTIME", OPT_OTHER, "vram-oci-runtime: the OCI runtime it runs (default runc)"},
};

bool options_known(const char *name)
{
    for (size_t i = 0; i < sizeof table / sizeof *table; i++)
        if (strcmp(table[i].name, name) == 0)
            return true;
    return false;
}

void options_clear(struct options *o)
{
    memset(o, 0, sizeof *o);
    o->growth = -1;
    o->log_level = -1;
}

/* VRAM_MEMORY_LIMIT="4GiB", or --limit "4GiB" when the setting came from
 * a flag of that name: what the user wrote, named as they wrote it. */
static void named(char *out, size_t n, const char *name, const char *value, int width)
{
    snprintf(out, n, name[0] == '-' ? "%s \"%.*s\"" : "%s=\"%.*s\"", name, width, value);
}

static int bad(char *err, size_t n, const char *name, const char *value, const char *why,
               const char *forms)
{
    char what[600];
    named(what, sizeof what, name, value, 500);
    snprintf(err, n, "%s: %s; accepted: %s", what, why, forms);
    return -1;
}

/* One entry of a list is bad: named on its own only when the value has
 * more than it, so that a value is not repeated. */
static int bad_entry(char *err, size_t n, const char *name, const char *value, int count,
                     const char *entry, const char *why, const char *forms)
{
    char w[1400];
    if (count > 1 || strcmp(entry, value) != 0)
        snprintf(w, sizeof w, "\"%s\": %s", entry, why);
    else
        snprintf(w, sizeof w, "%s", why);
    return bad(err, n, name, value, w, forms);
}

static int set_limits(struct options *o, const char *name, const char *value, bool fraction,
                      const char *forms, char *err, size_t n)
{
    parse_entry entries[PARSE_MAX_ENTRIES];
    parse_why why;
    int count = parse_device_list(value, entries, PARSE_MAX_ENTRIES, &why);
    if (count < 0)
        return bad(err, n, name, value, why.text, forms);
    struct limit_setting parsed[PARSE_MAX_ENTRIES];
    for (int i = 0; i < count; i++) {
        struct limit_setting *l = &parsed[i];
        memset(l, 0, sizeof *l);
        if (entries[i].device >= OPT_MAX_DEVICES) {
            char w[96];
            snprintf(w, sizeof w, "device %d is beyond the %d devices vram supports",
                     entries[i].device, OPT_MAX_DEVICES);
            return bad(err, n, name, value, w, forms);
        }
        if (fraction) {
            l->kind = LIMIT_FRACTION;
            if (parse_fraction(entries[i].value, &l->fraction, &why) != 0)
                return bad_entry(err, n, name, value, count, entries[i].value, why.text, forms);
        } else {
            l->kind = LIMIT_BYTES;
            const char *problem = NULL;
            if (parse_size(entries[i].value, &l->bytes, &why) != 0)
                problem = why.text;
            else if (l->bytes == 0)
                problem = "a limit must be more than 0";
            if (problem)
                return bad_entry(err, n, name, value, count, entries[i].value, problem, forms);
        }
        named(l->origin, sizeof l->origin, name, value, 60);
    }
    /* Only once all of it parsed: a bad value changes nothing. */
    for (int i = 0; i < count; i++) {
        if (entries[i].device < 0)
            o->limit_all = parsed[i];
        else
            o->limit[entries[i].device] = parsed[i];
    }
    return 0;
}

static int set_virtual(struct options *o, const char *name, const char *value, const char *forms,
                       char *err, size_t n)
{
    char groups[PARSE_MAX_ENTRIES][64];
    parse_why why;
    int ng = parse_split(value, ';', groups, PARSE_MAX_ENTRIES, &why);
    if (ng < 0)
        return bad(err, n, name, value, why.text, forms);
    struct virtual_setting parsed[OPT_MAX_DEVICES];
    int devs[OPT_MAX_DEVICES];
    for (int g = 0; g < ng; g++) {
        char *colon = strchr(groups[g], ':');
        char w[1400];
        if (!colon) {
            snprintf(w, sizeof w, "\"%s\" has no DEVICE: before its sizes", groups[g]);
            return bad(err, n, name, value, w, forms);
        }
        *colon = 0;
        uint64_t dev;
        if (parse_uint(groups[g], OPT_MAX_DEVICES - 1, &dev, &why) != 0) {
            snprintf(w, sizeof w, "device \"%s\": %s", groups[g], why.text);
            return bad(err, n, name, value, w, forms);
        }
        for (int k = 0; k < g; k++)
            if (devs[k] == (int)dev) {
                snprintf(w, sizeof w, "device %d is given twice", (int)dev);
                return bad(err, n, name, value, w, forms);
            }
        devs[g] = (int)dev;
        char sizes[OPT_MAX_VIRTUAL][64];
        int ns = parse_split(colon + 1, ',', sizes, OPT_MAX_VIRTUAL, &why);
        if (ns < 0) {
            snprintf(w, sizeof w, "device %d: %s", (int)dev, why.text);
            return bad(err, n, name, value, w, forms);
        }
        struct virtual_setting *v = &parsed[g];
        memset(v, 0, sizeof *v);
        v->set = true;
        v->count = ns;
        for (int s = 0; s < ns; s++) {
            const char *problem = NULL;
            if (parse_size(sizes[s], &v->limits[s], &why) != 0)
                problem = why.text;
            else if (v->limits[s] == 0)
                problem = "must be more than 0";
            if (problem) {
                snprintf(w, sizeof w, "device %d size \"%s\": %s", (int)dev, sizes[s], problem);
                return bad(err, n, name, value, w, forms);
            }
        }
        snprintf(v->origin, sizeof v->origin, "%s=\"%.60s\"", name, value);
    }
    for (int g = 0; g < ng; g++)
        o->virt[devs[g]] = parsed[g];
    return 0;
}

static int set_as(struct options *o, const char *name, const char *shown, const char *value,
                  char *err, size_t n)
{
    size_t i = 0;
    while (i < sizeof table / sizeof *table && strcmp(table[i].name, name) != 0)
        i++;
    if (i == sizeof table / sizeof *table || table[i].id == OPT_OTHER) {
        snprintf(err, n, "unknown option \"%s\"; options: VRAM_VISIBLE_DEVICES, VRAM_MEMORY_LIMIT, "
                         "VRAM_MEMORY_FRACTION, VRAM_ALLOW_GROWTH, VRAM_VIRTUAL_DEVICES, VRAM_LOG",
                 name);
        return -1;
    }
    if (!value)
        return bad(err, n, shown, "(null)", "no value", table[i].forms);
    const char *forms = table[i].forms;
    parse_why why;
    switch (table[i].id) {
    case OPT_VISIBLE:
        if (strlen(value) >= sizeof o->visible)
            return bad(err, n, shown, value, "too long", forms);
        o->visible_set = true;
        snprintf(o->visible, sizeof o->visible, "%s", value);
        named(o->visible_origin, sizeof o->visible_origin, shown, value, 60);
        return 0;
    case OPT_LIMIT: return set_limits(o, shown, value, false, forms, err, n);
    case OPT_FRACTION: return set_limits(o, shown, value, true, forms, err, n);
    case OPT_GROWTH: {
        bool b;
        if (parse_bool(value, &b, &why) != 0)
            return bad(err, n, shown, value, why.text, forms);
        o->growth = b;
        named(o->growth_origin, sizeof o->growth_origin, shown, value, 60);
        return 0;
    }
    case OPT_VIRTUAL: return set_virtual(o, shown, value, forms, err, n);
    case OPT_LOG: {
        static const char *levels[] = {"off", "error", "warn", "info", "debug"};
        for (int l = 0; l < 5; l++)
            if (strcasecmp(value, levels[l]) == 0) {
                o->log_level = l;
                return 0;
            }
        return bad(err, n, shown, value, "unknown level", forms);
    }
    case OPT_OTHER: break;
    }
    return -1;
}

int options_set(struct options *o, const char *name, const char *value, char *err, size_t n)
{
    return set_as(o, name, name, value, err, n);
}

int options_set_as(struct options *o, const char *name, const char *shown, const char *value,
                   char *err, size_t n)
{
    return set_as(o, name, shown, value, err, n);
}

void options_warn_unknown(void)
{
    for (char **e = environ; e && *e; e++) {
        if (strncmp(*e, "VRAM_", 5) != 0)
            continue;
        const char *eq = strchr(*e, '=');
        if (!eq)
            continue;
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)(eq - *e), *e);
        if (!options_known(name))
            vlog(LOG_WARN, "unknown variable %s is ignored (is it misspelt? vram --help lists "
                           "the variables)", name);
    }
}

int options_from_environment(struct options *o, char *err, size_t n)
{
    if (getenv("VRAM_MEMORY_LIMIT") && getenv("VRAM_MEMORY_FRACTION")) {
        snprintf(err, n, "VRAM_MEMORY_LIMIT=\"%s\" and VRAM_MEMORY_FRACTION=\"%s\" are both set; "
                         "set one of them (a limit in bytes, or a fraction of each device)",
                 getenv("VRAM_MEMORY_LIMIT"), getenv("VRAM_MEMORY_FRACTION"));
        return -1;
    }
    for (size_t i = 0; i < sizeof table / sizeof *table; i++) {
        if (table[i].id == OPT_OTHER)
            continue;
        const char *v = getenv(table[i].name);
        if (v && options_set(o, table[i].name, v, err, n) != 0)
            return -1;
    }
    if (o->growth < 0) {
        /* TensorFlow's meaning: exactly "true" or "false"; TensorFlow logs
         * anything else as an error, and so do we, but refuse it. */
        const char *tf = getenv("TF_FORCE_GPU_ALLOW_GROWTH");
        if (tf) {
            if (strcmp(tf, "true") == 0 || strcmp(tf, "false") == 0) {
                o->growth = tf[0] == 't';
                snprintf(o->growth_origin, sizeof o->growth_origin,
                         "TF_FORCE_GPU_ALLOW_GROWTH=\"%s\"", tf);
            } else {
                snprintf(err, n, "TF_FORCE_GPU_ALLOW_GROWTH=\"%s\": TensorFlow accepts only "
                                 "\"true\" or \"false\"; set VRAM_ALLOW_GROWTH to override it", tf);
                return -1;
            }
        }
    }
    return 0;
}

const struct limit_setting *options_limit(const struct options *call, const struct options *env,
                                          int dev)
{
    if (call->limit[dev].kind)
        return &call->limit[dev];
    if (call->limit_all.kind)
        return &call->limit_all;
    if (env->limit[dev].kind)
        return &env->limit[dev];
    return &env->limit_all;
}

const struct virtual_setting *options_virtual(const struct options *call,
                                              const struct options *env, int dev)
{
    return call->virt[dev].set ? &call->virt[dev] : &env->virt[dev];
}
