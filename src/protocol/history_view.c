/* history_view.c: vramd's history as a reader gets it (history_view.h). */
#include "history_view.h"

#include "../util/report.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void history_view_init(struct history_view *v) { memset(v, 0, sizeof *v); }

static void ring_free(struct history_ring *r)
{
    free(r->used);
    free(r->budget);
}

void history_view_free(struct history_view *v)
{
    for (int i = 0; i < v->n; i++) {
        ring_free(&v->line[i].recent);
        ring_free(&v->line[i].hour);
    }
    free(v->line);
    history_view_init(v);
}

/* Reads the numeric fields `keys` (all required) into out. */
static int numbers(const struct proto_msg *m, const char *const *keys, const uint64_t *max,
                   int n, uint64_t *out, char *err, size_t errlen)
{
    for (int i = 0; i < n; i++) {
        char why[256] = "";
        int r = proto_get_u64(m, keys[i], max[i], &out[i], why, sizeof why);
        if (r > 0)
            return report_into(err, errlen, "%s: %s= is missing", proto_verb_name(m->verb),
                               keys[i]);
        if (r < 0)
            return report_into(err, errlen, "%s: %s", proto_verb_name(m->verb), why);
    }
    return 0;
}

static int name(const struct proto_msg *m, const char *key, char *out, size_t n, char *err,
                size_t errlen)
{
    const char *v = proto_get(m, key);
    if (!v || !proto_name_ok(v) || strlen(v) >= n)
        return report_into(err, errlen, "SERIES: missing or malformed %s", key);
    snprintf(out, n, "%s", v);
    return 0;
}

static int take_series(struct history_view *v, const struct proto_msg *m, char *err,
                       size_t errlen)
{
    static const char *const keys[] = {"key", "dev", "begin"};
    static const uint64_t max[] = {UINT64_MAX, SNAP_MAX_DEVICES - 1, UINT64_MAX};
    uint64_t f[3], end = 0;
    char why[256] = "";
    if (numbers(m, keys, max, 3, f, err, errlen) != 0)
        return -1;
    if (proto_get_u64(m, "end", UINT64_MAX, &end, why, sizeof why) < 0)
        return report_into(err, errlen, "SERIES: %s", why);
    const char *kind = proto_get(m, "kind");
    struct history_line l = {.key = f[0], .dev = (int)f[1], .begin_ms = f[2], .end_ms = end};
    if (kind && strcmp(kind, "device") == 0) {
        l.kind = 'd';
        if (l.key != (uint64_t)l.dev + 1)
            return report_into(err, errlen, "SERIES: key=%llu is not device %d's",
                       (unsigned long long)l.key, l.dev);
    } else if (kind && (strcmp(kind, "process") == 0 || strcmp(kind, "job") == 0)) {
        static const char *const ck[] = {"id", "pid", "uid"};
        static const uint64_t cmax[] = {INT32_MAX, INT32_MAX, UINT32_MAX};
        uint64_t c[3];
        if (numbers(m, ck, cmax, 3, c, err, errlen) != 0 ||
            name(m, "user", l.user, sizeof l.user, err, errlen) ||
            name(m, "cmd", l.cmd, sizeof l.cmd, err, errlen) ||
            name(m, "job", l.job, sizeof l.job, err, errlen))
            return -1;
        l.kind = kind[0];
        l.id = (int)c[0], l.pid = (int)c[1], l.uid = (uint32_t)c[2];
        if (l.key != ((uint64_t)l.id << 5 | (unsigned)l.dev))
            return report_into(err, errlen, "SERIES: key=%llu is not client %d's on device %d",
                       (unsigned long long)l.key, l.id, l.dev);
    } else {
        return report_into(err, errlen, "SERIES: kind= must be device, process or job");
    }
    if (v->n && l.key <= v->line[v->n - 1].key)
        return report_into(err, errlen, "SERIES: key=%llu out of order", (unsigned long long)l.key);
    if (v->n == v->cap) {
        int cap = v->cap ? v->cap * 2 : 16;
        struct history_line *g = realloc(v->line, (size_t)cap * sizeof *g);
        if (!g)
            return report_into(err, errlen, "out of memory");
        v->line = g;
        v->cap = cap;
    }
    v->line[v->n++] = l;
    return 0;
}

static int take_samples(struct history_view *v, const struct proto_msg *m, char *err,
                        size_t errlen)
{
    static const char *const keys[] = {"key", "first", "step"};
    static const uint64_t max[] = {UINT64_MAX, UINT64_MAX / 2, 86400000};
    uint64_t f[3];
    if (numbers(m, keys, max, 3, f, err, errlen) != 0)
        return -1;
    if (!v->n || v->line[v->n - 1].key != f[0])
        return report_into(err, errlen, "SAMPLES: key=%llu is not the series just begun",
                   (unsigned long long)f[0]);
    const char *tier = proto_get(m, "tier");
    struct history_line *l = &v->line[v->n - 1];
    struct history_ring *r = tier && strcmp(tier, "recent") == 0 ? &l->recent
                             : tier && strcmp(tier, "hour") == 0 ? &l->hour
                                                                 : NULL;
    if (!r)
        return report_into(err, errlen, "SAMPLES: tier= must be recent or hour");
    if (f[2] == 0)
        return report_into(err, errlen, "SAMPLES: step=0");
    if (r->n && (f[2] != r->step_ms || f[1] != r->first_ms + (uint64_t)r->n * r->step_ms))
        return report_into(err, errlen, "SAMPLES: first=%llu does not follow the samples before",
                   (unsigned long long)f[1]);
    uint64_t used[PROTO_MAX], budget[PROTO_MAX];
    int nu = 0, nb = 0, room = HISTORY_VIEW_MAX_SAMPLES - r->n;
    int most = room < PROTO_MAX ? room : PROTO_MAX;
    char why[256] = "";
    if (proto_get_runs(m, "used", UINT64_MAX, used, most, &nu, why, sizeof why) != 0 ||
        proto_get_runs(m, "budget", UINT64_MAX, budget, most, &nb, why, sizeof why) != 0)
        return report_into(err, errlen, "SAMPLES: %s",
                           why[0] ? why : "used= and budget= are required");
    if (nu != nb)
        return report_into(err, errlen, "SAMPLES: %d used and %d budget figures", nu, nb);
    uint64_t *gu = realloc(r->used, (size_t)(r->n + nu) * sizeof *gu);
    if (gu)
        r->used = gu;
    uint64_t *gb = gu ? realloc(r->budget, (size_t)(r->n + nu) * sizeof *gb) : NULL;
    if (!gb)
        return report_into(err, errlen, "out of memory");
    r->budget = gb;
    if (!r->n)
        r->first_ms = f[1], r->step_ms = f[2];
    memcpy(r->used + r->n, used, (size_t)nu * sizeof *used);
    memcpy(r->budget + r->n, budget, (size_t)nu * sizeof *budget);
    r->n += nu;
    return 0;
}

int history_view_take(struct history_view *v, const struct proto_msg *m, uint64_t *next,
                      char *err, size_t errlen)
{
    switch (m->verb) {
    case VERB_SERIES: return take_series(v, m, err, errlen);
    case VERB_SAMPLES: return take_samples(v, m, err, errlen);
    case VERB_END: {
        static const char *const keys[] = {"now", "wall"};
        static const uint64_t max[] = {INT64_MAX, INT64_MAX};
        uint64_t f[2];
        char why[256] = "";
        *next = 0;
        if (numbers(m, keys, max, 2, f, err, errlen) != 0)
            return -1;
        if (proto_get_u64(m, "next", UINT64_MAX, next, why, sizeof why) < 0)
            return report_into(err, errlen, "END: %s", why);
        v->now_ms = f[0];
        v->wall_offset_ms = (int64_t)f[1] - (int64_t)f[0];
        return 1;
    }
    default:
        return report_into(err, errlen, "unexpected %s in a history reply",
                           proto_verb_name(m->verb));
    }
}

static const struct history_line *by_key(const struct history_view *v, uint64_t key)
{
    int lo = 0, hi = v->n - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        if (v->line[mid].key == key)
            return &v->line[mid];
        if (v->line[mid].key < key)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return NULL;
}

const struct history_line *history_view_device(const struct history_view *v, int dev)
{
    return v ? by_key(v, (uint64_t)dev + 1) : NULL;
}

const struct history_line *history_view_client(const struct history_view *v, int id, int dev)
{
    return v ? by_key(v, (uint64_t)id << 5 | (unsigned)dev) : NULL;
}

