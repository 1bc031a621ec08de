#include "snapshot.h"

#include "../util/parse.h"
#include "client.h"
#include "history_view.h"
#include "trend.h"

#include <errno.h>
#include <unistd.h>

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

/* ------------------------------------------------------------ messages */

static const char *role_name(char role)
{
    return role == 'j' ? "job" : role == 'u' ? "user" : "process";
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
    if (d->overcommitted)
        proto_add_u64(w, "overcommitted", 1);
    return proto_end(w);
}

int snapshot_encode_entry(const struct snap_entry *e, struct proto_writer *w)
{
    proto_begin(w, VERB_PROC);
    proto_add_u64(w, "dev", (uint64_t)e->dev);
    proto_add_u64(w, "id", (uint64_t)e->id);
    proto_add_u64(w, "pid", (uint64_t)e->pid);
    proto_add_u64(w, "uid", e->uid);
    proto_add(w, "role", role_name(e->role));
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

int snapshot_decode(struct snapshot *s, const struct proto_msg *m, char *err, size_t errlen)
{
    uint64_t v[16] = {0};
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
        uint64_t over = 0;
        if (proto_get_u64(m, "overcommitted", 1, &over, err, errlen) < 0)
            return -1;
        d->overcommitted = over != 0;
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
    e->role = !role ? 'p' : strcmp(role, "job") == 0 ? 'j' : strcmp(role, "user") == 0 ? 'u' : 'p';
    e->grant = v[4], e->used = v[5], e->peak = v[6], e->nvml = v[7], e->want = v[8];
    e->waiting = v[9] != 0, e->over = v[10] != 0;
    return 0;
}

int snapshot_fetch(const char *socket_path, struct snapshot *s, char *err, size_t errlen)
{
    snapshot_init(s);
    int fd = ledger_connect(socket_path);
    if (fd < 0) {
        snprintf(err, errlen, "cannot reach vramd at %s: %s", socket_path, strerror(errno));
        return -1;
    }
    char who[256];
    if (!ledger_peer_trusted(fd, who, sizeof who)) {
        snprintf(err, errlen, "not asking %s: %s", socket_path, who);
        close(fd);
        return -1;
    }
    struct proto_writer w;
    struct proto_msg m;
    int rc = -1;
    uint64_t after = 0;
    /* Page after page, each a bounded answer; a cursor that does not move
     * on would be a daemon gone wrong: stop there. */
    for (int pages = 0; rc != 0 && pages < 100000; pages++) {
        proto_begin(&w, VERB_STATUS);
        if (after)
            proto_add_u64(&w, "after", after);
        if (ledger_send(fd, &w) != 0) {
            snprintf(err, errlen, "vramd closed the connection");
            break;
        }
        bool more = false, bad = false;
        while (!bad && ledger_recv(fd, &m, 5000, err, errlen) == 0) {
            if (m.verb == VERB_END) {
                uint64_t next = 0;
                char why[256] = "";
                if (proto_get_u64(&m, "next", UINT64_MAX, &next, why, sizeof why) < 0 ||
                    (next && next <= after)) {
                    snprintf(err, errlen, "a status page that does not move on (%s)", why);
                    bad = true;
                    break;
                }
                if (next)
                    after = next, more = true;
                else
                    rc = 0;
                break;
            }
            char why[256] = "";
            if ((m.verb == VERB_DEV && after) || snapshot_decode(s, &m, why, sizeof why) != 0) {
                snprintf(err, errlen, "a status message that cannot be read: %s",
                         why[0] ? why : "DEV after the first page");
                bad = true;
            }
        }
        if (!more)
            break;
    }
    close(fd);
    if (rc != 0)
        snapshot_free(s);
    return rc;
}

/* ---------------------------------------------------------------- JSON */

/* Names are protocol names ([A-Za-z0-9._:@+/-]), so they need no escaping. */
void snapshot_json(const struct snapshot *s, FILE *out)
{
    fprintf(out, "{\"devices\":[");
    for (int d = 0; d < s->ndev; d++) {
        const struct snap_device *x = &s->dev[d];
        fprintf(out,
                "%s{\"index\":%d,\"uuid\":\"%s\",\"total\":%llu,\"reserved\":%llu,"
                "\"granted\":%llu,\"used\":%llu,\"unseen\":%llu,\"overcommitted\":%s",
                d ? "," : "", x->index, x->uuid, (unsigned long long)x->total,
                (unsigned long long)x->reserved, (unsigned long long)x->granted,
                (unsigned long long)x->used, (unsigned long long)x->unseen,
                x->overcommitted ? "true" : "false");
        history_view_json(out, s->history, history_view_device(s->history, x->index));
        fputc('}', out);
    }
    fprintf(out, "],\"clients\":[");
    for (int i = 0; i < s->n; i++) {
        const struct snap_entry *e = &s->e[i];
        fprintf(out,
                "%s{\"device\":%d,\"id\":%d,\"pid\":%d,\"uid\":%u,\"user\":\"%s\",\"role\":\"%s\","
                "\"command\":\"%s\",\"job\":\"%s\",\"budget\":%llu,\"used\":%llu,\"peak\":%llu,"
                "\"nvml_used\":%llu,\"waiting_for\":%llu,\"over_budget\":%s",
                i ? "," : "", e->dev, e->id, e->pid, e->uid, e->user, role_name(e->role), e->cmd,
                e->job, (unsigned long long)e->grant,
                (unsigned long long)e->used, (unsigned long long)e->peak,
                (unsigned long long)e->nvml, (unsigned long long)e->want,
                e->over ? "true" : "false");
        if (e->role != 'u')
            history_view_json(out, s->history, history_view_client(s->history, e->id, e->dev));
        fputc('}', out);
    }
    fprintf(out, "]}\n");
}

/* ---------------------------------------------------------- Prometheus */

struct gauge {
    const char *name, *help;
    size_t offset; /* of a uint64_t in the record */
};

/* One gauge: HELP, TYPE, and a sample per record. */
static void gauge(FILE *out, const struct gauge *g, const void *records, size_t size, int n,
                  void (*labels)(FILE *, const void *))
{
    fprintf(out, "# HELP %s %s\n# TYPE %s gauge\n", g->name, g->help, g->name);
    for (int i = 0; i < n; i++) {
        const char *r = (const char *)records + (size_t)i * size;
        fprintf(out, "%s{", g->name);
        labels(out, r);
        fprintf(out, "} %llu\n", (unsigned long long)*(const uint64_t *)(r + g->offset));
    }
}

static void device_labels(FILE *out, const void *r)
{
    const struct snap_device *d = r;
    fprintf(out, "device=\"%d\",uuid=\"%s\"", d->index, d->uuid);
}

static void client_labels(FILE *out, const void *r)
{
    const struct snap_entry *e = r;
    fprintf(out, "device=\"%d\",client=\"%d\",pid=\"%d\",user=\"%s\",job=\"%s\",role=\"%s\"",
            e->dev, e->id, e->pid, e->user, e->job, role_name(e->role));
}

void snapshot_prometheus(const struct snapshot *s, FILE *out)
{
    static const struct gauge devices[] = {
        {"vram_device_total_bytes", "Memory of the device.", offsetof(struct snap_device, total)},
        {"vram_device_reserved_bytes",
         "Memory reserved for named users or jobs and not yet held by them.",
         offsetof(struct snap_device, reserved)},
        {"vram_device_granted_bytes", "Memory granted as budgets.",
         offsetof(struct snap_device, granted)},
        {"vram_device_used_bytes", "Memory in use (reported by clients, NVML where larger).",
         offsetof(struct snap_device, used)},
        {"vram_device_unseen_bytes", "Memory NVML shows in use by processes without a grant.",
         offsetof(struct snap_device, unseen)},
    };
    static const struct gauge clients[] = {
        {"vram_client_budget_bytes", "The client's grant.", offsetof(struct snap_entry, grant)},
        {"vram_client_used_bytes", "Memory the client reports in use.",
         offsetof(struct snap_entry, used)},
        {"vram_client_peak_bytes", "The most the client has had in use.",
         offsetof(struct snap_entry, peak)},
        {"vram_client_nvml_used_bytes", "Memory NVML shows for the client's process.",
         offsetof(struct snap_entry, nvml)},
        {"vram_client_waiting_bytes", "Memory the client waits to be granted.",
         offsetof(struct snap_entry, want)},
    };
    for (size_t k = 0; k < sizeof devices / sizeof *devices; k++)
        gauge(out, &devices[k], s->dev, sizeof *s->dev, s->ndev, device_labels);
    for (size_t k = 0; k < sizeof clients / sizeof *clients; k++)
        gauge(out, &clients[k], s->e, sizeof *s->e, s->n, client_labels);
}

/* ----------------------------------------------------------------- top */

static const char *sz(uint64_t b, char buf[24])
{
    /* Compact for 80 columns: "12.0G", "512M", "0". */
    static const char units[] = "BKMGTP";
    double v = (double)b;
    int u = 0;
    while (v >= 1024 && u < 5) {
        v /= 1024;
        u++;
    }
    if (b == 0)
        snprintf(buf, 24, "0");
    else if (u == 0)
        snprintf(buf, 24, "%lluB", (unsigned long long)b);
    else
        snprintf(buf, 24, v < 10 ? "%.1f%c" : "%.0f%c", v, units[u]);
    return buf;
}

/* A process of a job whose grant is in the snapshot: the job's grant counts, not its. */
static bool draws_from_job(const struct snapshot *s, const struct snap_entry *x)
{
    if (x->role != 'p' || strcmp(x->job, "-") == 0)
        return false;
    for (int k = 0; k < s->n; k++)
        if (s->e[k].role == 'j' && s->e[k].dev == x->dev && s->e[k].uid == x->uid &&
            strcmp(s->e[k].job, x->job) == 0)
            return true;
    return false;
}

void snapshot_top(const struct snapshot *s, FILE *out, int width)
{
    char a[24], b[24], c[24], d[24], e[24];
    if (width < 80)
        width = 80;
    fprintf(out, "%-4s %-40s %6s %6s %6s %6s %6s\n", "GPU", "UUID", "total", "resvd", "grantd",
            "used", "unseen");
    for (int i = 0; i < s->ndev; i++) {
        const struct snap_device *x = &s->dev[i];
        int barw = width - 80 + 20;
        fprintf(out, "%-4d %-40.40s %6s %6s %6s %6s %6s\n", x->index, x->uuid, sz(x->total, a),
                sz(x->reserved, b), sz(x->granted, c), sz(x->used, d), sz(x->unseen, e));
        char bar[256];
        int n = barw < (int)sizeof bar - 1 ? barw : (int)sizeof bar - 1;
        for (int k = 0; k < n; k++) {
            double at = x->total ? (double)(k + 1) / n * (double)x->total : 0;
            bar[k] = at <= (double)x->used ? '#' : at <= (double)(x->granted + x->reserved) ? '=' : '.';
        }
        bar[n] = 0;
        fprintf(out, "     [%s]  # used  = granted/reserved%s\n", bar,
                x->overcommitted ? "  OVERCOMMITTED" : "");
    }
    /* Users: what each holds on each device. */
    fprintf(out, "\n%-16s %-4s %8s %8s %8s %8s\n", "USER", "GPU", "budget", "used", "peak",
            "waiting");
    for (int i = 0; i < s->n; i++) {
        const struct snap_entry *x = &s->e[i];
        bool first = true;
        for (int j = 0; j < i; j++)
            if (s->e[j].dev == x->dev && strcmp(s->e[j].user, x->user) == 0)
                first = false;
        if (!first)
            continue;
        uint64_t g = 0, u = 0, p = 0, w = 0;
        for (int j = i; j < s->n; j++)
            if (s->e[j].dev == x->dev && strcmp(s->e[j].user, x->user) == 0) {
                bool in_job = draws_from_job(s, &s->e[j]);
                if (!in_job)
                    g += s->e[j].grant;
                u += s->e[j].used, p += s->e[j].peak, w += s->e[j].want;
            }
        fprintf(out, "%-16.16s %-4d %8s %8s %8s %8s\n", x->user, x->dev, sz(g, a), sz(u, b),
                sz(p, c), sz(w, d));
    }
    fprintf(out, "\n%-7s %-9s %-12s %-10s %-3s %6s %6s %6s %6s %s\n", "PID", "USER", "COMMAND",
            "JOB", "GPU", "budget", "used", "peak", "nvml", "state");
    for (int i = 0; i < s->n; i++) {
        const struct snap_entry *x = &s->e[i];
        char pid[16];
        if (x->role == 'u') /* another user's total: in the table above */
            continue;
        if (x->role == 'j')
            snprintf(pid, sizeof pid, "job");
        else if (x->pid)
            snprintf(pid, sizeof pid, "%d", x->pid);
        else
            snprintf(pid, sizeof pid, "-");
        const char *state = x->waiting ? "wait" : x->over ? "OVER" : "ok";
        fprintf(out, "%-7s %-9.9s %-12.12s %-10.10s %-3d %6s %6s %6s %6s %s", pid, x->user,
                x->cmd, x->job, x->dev, sz(x->waiting ? x->want : x->grant, a), sz(x->used, b),
                sz(x->peak, c), sz(x->nvml, d), state);
        fprintf(out, "\n");
    }
    trend_section(s, out, width, trend_utf8());
}
