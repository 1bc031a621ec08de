/* snapshot_json.c: the ledger as one JSON object, for `vram status --json`.
 *
 * Every section of the vram top screen, sizes in bytes:
 *   vramd      true: vramd's ledger; false: NVML's view where no vramd
 *              runs (the ledger's own figures are null there: reserved,
 *              grantable, a device's unseen, overcommitted, waiting and
 *              the counters, a user's peak, waiting_for, over_budget;
 *              granted and budget are the reader's vram run commands'
 *              budgets)
 *   host, driver_version, nvml_version, cuda_driver_version  (null: unknown)
 *   devices    index, uuid, name, pci_bus_id, total, reserved, granted,
 *              used, unseen, free (physical: total less used), grantable
 *              (what vramd would grant now to a request no reservation is
 *              for), overcommitted, waiting (requests now),
 *              and since the daemon started: refused, reclaimed,
 *              reclaimed_bytes, waits, waited_seconds
 *   users      device, uid, user, processes, budget, used, peak, unseen,
 *              waiting_for: every user's total per device (peak: the most
 *              they held at once since the daemon started)
 *   processes  device, id, pid, uid, user, role (process or job), command,
 *              job, budget, used, peak, nvml_used, waiting_for, over_budget,
 *              backend (what holds it to its budget: "driver", the driver's
 *              per-cgroup limit, or "interposer"; null without a grant)
 *   waiting    device, queue_position, id, pid, uid, user, job, command,
 *              waiting_for: the requests waiting, in each device's order
 *   unseen     device, pid, uid, user, command, used: processes NVML sees
 *              using memory no grant covers
 * Each device and process has its "history" where it was fetched too
 * (json_history: the recent ring, and the last hour for --json).
 * processes, waiting and unseen hold what the reader may see: root every
 * process, anyone else their own (others are in users only).
 */
#include "snapshot_json.h"

#include "../protocol/history_view.h"

#include <stdlib.h>
#include <string.h>

static void json_ring(FILE *out, const struct history_view *v, const struct history_ring *r,
                      const char *budget)
{
    double start = ((double)r->first_ms + (double)v->wall_offset_ms) / 1000.0;
    fprintf(out, "{\"start\":%.3f,\"step_s\":%g,\"used\":[", start, (double)r->step_ms / 1000.0);
    for (int i = 0; i < r->n; i++)
        fprintf(out, i ? ",%llu" : "%llu", (unsigned long long)r->used[i]);
    fprintf(out, "],\"%s\":[", budget);
    for (int i = 0; i < r->n; i++)
        fprintf(out, i ? ",%llu" : "%llu", (unsigned long long)r->budget[i]);
    fputs("]}", out);
}

/* ,"history":{...} (nothing when line is NULL): each ring as its start
 * (Unix seconds), step and the arrays "used" and "budget" ("granted" for a
 * device). */
static void json_history(FILE *out, const struct history_view *v, const struct history_line *line)
{
    if (!line)
        return;
    const char *budget = line->kind == 'd' ? "granted" : "budget";
    fputs(",\"history\":{\"recent\":", out);
    json_ring(out, v, &line->recent, budget);
    if (line->hour.n) {
        fputs(",\"hour\":", out);
        json_ring(out, v, &line->hour, budget);
    }
    fputs("}", out);
}

static void json_string(FILE *out, const char *s)
{
    fputc('"', out);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(out, "\\%c", *p);
        else if (*p < 32 || *p >= 127)
            fprintf(out, "\\u%04x", *p);
        else
            fputc(*p, out);
    }
    fputc('"', out);
}

static void json_text(FILE *out, const char *key, const char *value, bool last)
{
    fprintf(out, "\"%s\":", key);
    if (value[0])
        json_string(out, value);
    else
        fputs("null", out);
    fputs(last ? "" : ",", out);
}

static void uid_field(FILE *out, uint32_t uid)
{
    if (uid == UINT32_MAX)
        fprintf(out, "\"uid\":null,");
    else
        fprintf(out, "\"uid\":%u,", uid);
}

static unsigned long long u(uint64_t v) { return (unsigned long long)v; }

/* "key":N, or "key":null where the figure is the ledger's and the picture
 * is NVML's view (no vramd). */
static void ledger_u64(FILE *out, const struct snapshot *s, const char *key, uint64_t v)
{
    if (s->nvml_view)
        fprintf(out, ",\"%s\":null", key);
    else
        fprintf(out, ",\"%s\":%llu", key, (unsigned long long)v);
}

static void devices(const struct snapshot *s, FILE *out)
{
    fprintf(out, "\"devices\":[");
    for (int d = 0; d < s->ndev; d++) {
        const struct snap_device *x = &s->dev[d];
        fprintf(out, "%s{\"index\":%d,", d ? "," : "", x->index);
        json_text(out, "uuid", x->uuid, false);
        json_text(out, "name", x->name, false);
        json_text(out, "pci_bus_id", x->pci_bus_id, false);
        fprintf(out, "\"total\":%llu", u(x->total));
        ledger_u64(out, s, "reserved", x->reserved);
        fprintf(out, ",\"granted\":%llu,\"used\":%llu", u(x->granted), u(x->used));
        ledger_u64(out, s, "unseen", x->unseen);
        fprintf(out, ",\"free\":%llu", u(x->total > x->used ? x->total - x->used : 0));
        ledger_u64(out, s, "grantable", x->grantable);
        if (s->nvml_view)
            fputs(",\"overcommitted\":null,\"waiting\":null", out);
        else
            fprintf(out, ",\"overcommitted\":%s,\"waiting\":%d",
                    x->overcommitted ? "true" : "false", x->waiting);
        ledger_u64(out, s, "refused", x->refused);
        ledger_u64(out, s, "reclaimed", x->reclaimed);
        ledger_u64(out, s, "reclaimed_bytes", x->reclaimed_bytes);
        ledger_u64(out, s, "waits", x->waits);
        if (s->nvml_view)
            fputs(",\"waited_seconds\":null", out);
        else
            fprintf(out, ",\"waited_seconds\":%.3f", (double)x->waited_ms / 1000.0);
        json_history(out, s->history, history_view_device(s->history, x->index));
        fputc('}', out);
    }
    fprintf(out, "]");
}

static void users(const struct snapshot *s, FILE *out)
{
    fprintf(out, ",\"users\":[");
    bool first = true;
    for (int i = 0; i < s->n; i++) {
        const struct snap_entry *e = &s->e[i];
        if (e->role != 'u')
            continue;
        fprintf(out, "%s{\"device\":%d,", first ? "" : ",", e->dev);
        uid_field(out, e->uid);
        json_text(out, "user", e->user, false);
        fprintf(out, "\"processes\":%d,\"budget\":%llu,\"used\":%llu", e->procs, u(e->grant),
                u(e->used));
        ledger_u64(out, s, "peak", e->peak);
        fprintf(out, ",\"unseen\":%llu", u(e->unseen));
        ledger_u64(out, s, "waiting_for", e->want);
        fputc('}', out);
        first = false;
    }
    fprintf(out, "]");
}

static void processes(const struct snapshot *s, FILE *out)
{
    fprintf(out, ",\"processes\":[");
    bool first = true;
    for (int i = 0; i < s->n; i++) {
        const struct snap_entry *e = &s->e[i];
        if (e->role != 'p' && e->role != 'j')
            continue;
        fprintf(out, "%s{\"device\":%d,\"id\":%d,\"pid\":%d,", first ? "" : ",", e->dev, e->id,
                e->pid);
        uid_field(out, e->uid);
        json_text(out, "user", e->user, false);
        json_text(out, "role", snapshot_role_name(e->role), false);
        json_text(out, "command", e->cmd, false);
        json_text(out, "job", e->job, false);
        fprintf(out, "\"budget\":%llu,\"used\":%llu,\"peak\":%llu,\"nvml_used\":%llu",
                u(e->grant), u(e->used), u(e->peak), u(e->nvml));
        ledger_u64(out, s, "waiting_for", e->want);
        if (s->nvml_view)
            fputs(",\"over_budget\":null", out);
        else
            fprintf(out, ",\"over_budget\":%s", e->over ? "true" : "false");
        const char *backend = snapshot_backend_name(e->backend);
        if (backend)
            fprintf(out, ",\"backend\":\"%s\"", backend);
        else
            fprintf(out, ",\"backend\":null");
        json_history(out, s->history, history_view_client(s->history, e->id, e->dev));
        fputc('}', out);
        first = false;
    }
    fprintf(out, "]");
}

static int by_queue(const void *a, const void *b)
{
    const struct snap_entry *x = *(const struct snap_entry *const *)a,
                            *y = *(const struct snap_entry *const *)b;
    return x->dev != y->dev ? (x->dev > y->dev) - (x->dev < y->dev)
                            : (x->queue > y->queue) - (x->queue < y->queue);
}

static void waiting(const struct snapshot *s, FILE *out)
{
    fprintf(out, ",\"waiting\":[");
    const struct snap_entry **w = malloc((size_t)(s->n + 1) * sizeof *w);
    int n = 0;
    for (int i = 0; w && i < s->n; i++)
        if (s->e[i].waiting && s->e[i].role != 'u')
            w[n++] = &s->e[i];
    if (n > 1)
        qsort(w, (size_t)n, sizeof *w, by_queue);
    for (int k = 0; k < n; k++) {
        const struct snap_entry *e = w[k];
        fprintf(out, "%s{\"device\":%d,\"queue_position\":%d,\"id\":%d,\"pid\":%d,", k ? "," : "",
                e->dev, e->queue, e->id, e->pid);
        uid_field(out, e->uid);
        json_text(out, "user", e->user, false);
        json_text(out, "job", e->job, false);
        json_text(out, "command", e->cmd, false);
        fprintf(out, "\"waiting_for\":%llu}", u(e->want));
    }
    free(w);
    fprintf(out, "]");
}

static void unseen(const struct snapshot *s, FILE *out)
{
    fprintf(out, ",\"unseen\":[");
    bool first = true;
    for (int i = 0; i < s->n; i++) {
        const struct snap_entry *e = &s->e[i];
        if (e->role != 'n')
            continue;
        fprintf(out, "%s{\"device\":%d,\"pid\":%d,", first ? "" : ",", e->dev, e->pid);
        uid_field(out, e->uid);
        json_text(out, "user", strcmp(e->user, "-") ? e->user : "", false);
        json_text(out, "command", strcmp(e->cmd, "-") ? e->cmd : "", false);
        fprintf(out, "\"used\":%llu}", u(e->nvml));
        first = false;
    }
    fprintf(out, "]");
}

void snapshot_json(const struct snapshot *s, FILE *out)
{
    fputc('{', out);
    fprintf(out, "\"vramd\":%s,", s->nvml_view ? "false" : "true");
    json_text(out, "host", s->node.host, false);
    json_text(out, "driver_version", s->node.driver, false);
    json_text(out, "nvml_version", s->node.nvml, false);
    json_text(out, "cuda_driver_version", s->node.cuda, false);
    devices(s, out);
    users(s, out);
    processes(s, out);
    waiting(s, out);
    unseen(s, out);
    fputs("}\n", out);
}
