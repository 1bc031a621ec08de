#include "snapshot.h"

#include "history_view.h"
#include "../util/text.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

void snapshot_init(struct snapshot *s) { memset(s, 0, sizeof *s); }

void snapshot_free(struct snapshot *s)
{
    if (s->history)
        history_view_free(s->history);
    free(s->history);
    free(s->e);
    snapshot_init(s);
}

struct snap_entry *snapshot_add(struct snapshot *s)
{
    if (s->n == s->cap) {
        int cap = s->cap ? s->cap * 2 : 64;
        struct snap_entry *e = realloc(s->e, (size_t)cap * sizeof *e);
        if (!e)
            return NULL;
        s->e = e;
        s->cap = cap;
    }
    struct snap_entry *e = &s->e[s->n++];
    memset(e, 0, sizeof *e);
    return e;
}

const struct snap_device *snapshot_device(const struct snapshot *s, int index)
{
    for (int d = 0; d < s->ndev; d++)
        if (s->dev[d].index == index)
            return &s->dev[d];
    return NULL;
}

/* ------------------------------------------------------------ messages */

const char *snapshot_role_name(char role)
{
    return role == 'j' ? "job" : role == 'u' ? "user" : role == 'n' ? "unseen" : "process";
}

const char *snapshot_backend_name(char backend)
{
    return backend == SNAP_BY_DRIVER       ? "driver"
           : backend == SNAP_BY_INTERPOSER ? "interposer"
                                           : NULL;
}

static void add_name(struct proto_writer *w, const char *key, const char *value)
{
    char clean[PROTO_NAME_MAX];
    proto_name_clean(value, clean, sizeof clean);
    proto_add(w, key, clean);
}

int snapshot_encode_node(const struct snap_node *n, struct proto_writer *w)
{
    proto_begin(w, VERB_NODE);
    add_name(w, "host", n->host);
    add_name(w, "driver", n->driver);
    add_name(w, "nvml", n->nvml);
    add_name(w, "cuda", n->cuda);
    return proto_end(w);
}

int snapshot_encode_device(const struct snap_device *d, struct proto_writer *w)
{
    proto_begin(w, VERB_DEV);
    proto_add_u64(w, "index", (uint64_t)d->index);
    proto_add(w, "uuid", d->uuid);
    proto_add_u64(w, "total", d->total);
    proto_add_u64(w, "reserved", d->reserved);
    proto_add_u64(w, "granted", d->granted);
    proto_add_u64(w, "used", d->used);
    proto_add_u64(w, "unseen", d->unseen);
    proto_add_u64(w, "grantable", d->grantable);
    if (d->overcommitted)
        proto_add_u64(w, "overcommitted", 1);
    proto_add_u64(w, "waiting", (uint64_t)d->waiting);
    proto_add_u64(w, "refused", d->refused);
    proto_add_u64(w, "reclaimed", d->reclaimed);
    proto_add_u64(w, "reclaimed_bytes", d->reclaimed_bytes);
    proto_add_u64(w, "waits", d->waits);
    proto_add_u64(w, "waited_ms", d->waited_ms);
    if (d->pci_bus_id[0])
        add_name(w, "pci", d->pci_bus_id);
    if (d->minor >= 0)
        proto_add_u64(w, "minor", (uint64_t)d->minor);
    if (d->name[0]) /* may have spaces: the free text, last */
        proto_add_text(w, "%s", d->name);
    return proto_end(w);
}

int snapshot_encode_entry(const struct snap_entry *e, struct proto_writer *w)
{
    proto_begin(w, VERB_PROC);
    proto_add_u64(w, "dev", (uint64_t)e->dev);
    proto_add_u64(w, "id", (uint64_t)e->id);
    proto_add_u64(w, "pid", (uint64_t)e->pid);
    proto_add_u64(w, "uid", e->uid);
    proto_add(w, "role", snapshot_role_name(e->role));
    proto_add(w, "user", e->user);
    proto_add(w, "cmd", e->cmd);
    proto_add(w, "job", e->job);
    proto_add_u64(w, "grant", e->grant);
    proto_add_u64(w, "used", e->used);
    proto_add_u64(w, "peak", e->peak);
    proto_add_u64(w, "nvml", e->nvml);
    proto_add_u64(w, "want", e->want);
    proto_add_u64(w, "waiting", e->waiting);
    proto_add_u64(w, "over", e->over);
    if (e->unseen)
        proto_add_u64(w, "unseen", e->unseen);
    if (e->start)
        proto_add_u64(w, "start", e->start);
    if (e->procs)
        proto_add_u64(w, "procs", (uint64_t)e->procs);
    if (e->queue)
        proto_add_u64(w, "queue", (uint64_t)e->queue);
    if (snapshot_backend_name(e->backend))
        proto_add(w, "backend", snapshot_backend_name(e->backend));
    return proto_end(w);
}

static int name_field(const struct proto_msg *m, const char *key, char *out, size_t n, char *err,
                      size_t errlen)
{
    const char *v = proto_get(m, key);
    if (!v || !proto_name_ok(v) || strlen(v) >= n) {
        snprintf(err, errlen, "%s: missing or malformed %s", proto_verb_name(m->verb), key);
        return -1;
    }
    snprintf(out, n, "%s", v);
    return 0;
}

/* An optional number: 0 if absent; -1 with err if malformed. */
static int optional(const struct proto_msg *m, const char *key, uint64_t max, uint64_t *out,
                    char *err, size_t errlen)
{
    *out = 0;
    return proto_get_u64(m, key, max, out, err, errlen) < 0 ? -1 : 0;
}

/* A name of the node: "-" (or absent) is unknown. */
static int node_field(const struct proto_msg *m, const char *key, char *out, size_t n, char *err,
                      size_t errlen)
{
    const char *v = proto_get(m, key);
    out[0] = 0;
    if (!v)
        return 0;
    if (!proto_name_ok(v) || strlen(v) >= n) {
        snprintf(err, errlen, "NODE: malformed %s", key);
        return -1;
    }
    if (strcmp(v, "-") != 0)
        snprintf(out, n, "%s", v);
    return 0;
}

int snapshot_decode(struct snapshot *s, const struct proto_msg *m, char *err, size_t errlen)
{
    uint64_t v[16] = {0};
    if (m->verb == VERB_NODE) {
        struct snap_node *n = &s->node;
        return node_field(m, "host", n->host, sizeof n->host, err, errlen) ||
                       node_field(m, "driver", n->driver, sizeof n->driver, err, errlen) ||
                       node_field(m, "nvml", n->nvml, sizeof n->nvml, err, errlen) ||
                       node_field(m, "cuda", n->cuda, sizeof n->cuda, err, errlen)
                   ? -1
                   : 0;
    }
    if (m->verb == VERB_DEV) {
        static const char *keys[] = {"index", "total", "reserved", "granted", "used", "unseen"};
        for (int i = 0; i < 6; i++)
            if (proto_get_u64(m, keys[i], UINT64_MAX, &v[i], err, errlen) != 0) {
                if (!err[0])
                    snprintf(err, errlen, "DEV: missing %s", keys[i]);
                return -1;
            }
        if (s->ndev == SNAP_MAX_DEVICES || v[0] >= SNAP_MAX_DEVICES) {
            snprintf(err, errlen, "DEV: more devices than %d", SNAP_MAX_DEVICES);
            return -1;
        }
        struct snap_device *d = &s->dev[s->ndev];
        if (name_field(m, "uuid", d->uuid, sizeof d->uuid, err, errlen) != 0)
            return -1;
        d->index = (int)v[0];
        d->total = v[1], d->reserved = v[2], d->granted = v[3], d->used = v[4], d->unseen = v[5];
        static const char *counters[] = {"overcommitted", "waiting", "refused", "reclaimed",
                                         "reclaimed_bytes", "waits", "waited_ms"};
        uint64_t c[7], minor = 0;
        for (int i = 0; i < 7; i++)
            if (optional(m, counters[i], i == 0 ? 1 : i == 1 ? INT32_MAX : UINT64_MAX, &c[i],
                         err, errlen) != 0)
                return -1;
        d->overcommitted = c[0] != 0;
        d->waiting = (int)c[1];
        d->refused = c[2], d->reclaimed = c[3], d->reclaimed_bytes = c[4];
        d->waits = c[5], d->waited_ms = c[6];
        /* A vramd from before it said: what the picture itself tells. */
        uint64_t busy = d->granted + d->reserved + d->unseen;
        d->grantable = busy < d->total ? d->total - busy : 0;
        uint64_t grantable;
        int said = proto_get_u64(m, "grantable", d->total, &grantable, err, errlen);
        if (said < 0)
            return -1;
        if (said == 0)
            d->grantable = grantable;
        d->minor = -1;
        int r = proto_get_u64(m, "minor", 1u << 20, &minor, err, errlen);
        if (r < 0)
            return -1;
        if (r == 0)
            d->minor = (int)minor;
        const char *pci = proto_get(m, "pci"), *name = proto_get(m, "text");
        if (pci && (!proto_name_ok(pci) || strlen(pci) >= sizeof d->pci_bus_id)) {
            snprintf(err, errlen, "DEV: malformed pci");
            return -1;
        }
        snprintf(d->pci_bus_id, sizeof d->pci_bus_id, "%s", pci ? pci : "");
        /* The model's name, printable only: it is shown on terminals. */
        text_printable(d->name, sizeof d->name, name ? name : "");
        s->ndev++;
        return 0;
    }
    if (m->verb != VERB_PROC) {
        snprintf(err, errlen, "unexpected %s in a status reply", proto_verb_name(m->verb));
        return -1;
    }
    static const char *keys[] = {"dev", "id", "pid", "uid", "grant", "used", "peak",
                                 "nvml", "want", "waiting", "over"};
    for (int i = 0; i < 11; i++)
        if (proto_get_u64(m, keys[i], UINT64_MAX, &v[i], err, errlen) != 0) {
            if (!err[0])
                snprintf(err, errlen, "PROC: missing %s", keys[i]);
            return -1;
        }
    if (v[0] >= SNAP_MAX_DEVICES || v[1] > INT32_MAX || v[2] > INT32_MAX || v[3] > UINT32_MAX) {
        snprintf(err, errlen, "PROC: a number out of range");
        return -1;
    }
    struct snap_entry *e = snapshot_add(s);
    if (!e) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    const char *role = proto_get(m, "role");
    if (name_field(m, "user", e->user, sizeof e->user, err, errlen) ||
        name_field(m, "cmd", e->cmd, sizeof e->cmd, err, errlen) ||
        name_field(m, "job", e->job, sizeof e->job, err, errlen)) {
        s->n--;
        return -1;
    }
    e->dev = (int)v[0], e->id = (int)v[1], e->pid = (int)v[2], e->uid = (uint32_t)v[3];
    e->role = !role                         ? 'p'
              : strcmp(role, "job") == 0    ? 'j'
              : strcmp(role, "user") == 0   ? 'u'
              : strcmp(role, "unseen") == 0 ? 'n'
                                            : 'p';
    e->grant = v[4], e->used = v[5], e->peak = v[6], e->nvml = v[7], e->want = v[8];
    e->waiting = v[9] != 0, e->over = v[10] != 0;
    uint64_t procs, queue;
    if (optional(m, "unseen", UINT64_MAX, &e->unseen, err, errlen) ||
        optional(m, "start", UINT64_MAX, &e->start, err, errlen) ||
        optional(m, "procs", INT32_MAX, &procs, err, errlen) ||
        optional(m, "queue", INT32_MAX, &queue, err, errlen)) {
        s->n--;
        return -1;
    }
    e->procs = (int)procs, e->queue = (int)queue;
    /* Absent from an older vramd; a value this reader does not know is
     * left unknown rather than refused, for a newer one. */
    const char *backend = proto_get(m, "backend");
    e->backend = !backend                            ? 0
                 : strcmp(backend, "driver") == 0     ? SNAP_BY_DRIVER
                 : strcmp(backend, "interposer") == 0 ? SNAP_BY_INTERPOSER
                                                      : 0;
    return 0;
}

