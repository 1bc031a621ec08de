/* metrics.c: the ledger in Prometheus's text format, for `vram status
 * --prometheus` and `vramd --metrics-file`.
 *
 * Names are vram's own and in bytes, Prometheus's base unit (DCGM
 * exporter's DCGM_FI_DEV_FB_* are in MiB and mean NVML's figures, so
 * reusing them would mix two meanings in one dashboard). Labels are DCGM
 * exporter's where the meaning is the same, so that a query can join
 * vram's series with DCGM's on them: gpu (NVML's index), UUID, pci_bus_id,
 * device (nvidiaN), modelName, Hostname, DCGM_FI_DRIVER_VERSION, and
 * hpc_job for a job (DCGM's label for a Slurm job's GPUs).
 *
 * Families (gauges unless they end in _total):
 *   the source vram_vramd_up: 1 for vramd's ledger, 0 for NVML's view where
 *             no vramd answered (vram status --prometheus without vramd),
 *             which leaves out the ledger's own families (reserved,
 *             unseen and grantable memory, overcommitted, waiting, the
 *             counters, peaks)
 *   per GPU   vram_gpu_memory_{total,reserved,granted,used,unseen,
 *             grantable}_bytes,
 *             vram_gpu_overcommitted, vram_gpu_waiting_requests,
 *             vram_refusals_total, vram_reclaims_total,
 *             vram_reclaimed_bytes_total, vram_waits_total,
 *             vram_wait_seconds_total
 *   per user  vram_user_{budget,used,peak,unseen,waiting}_bytes,
 *             vram_user_processes (labels user, uid)
 *   per process (what the reader may see; none in the metrics file)
 *             vram_process_{budget,used,peak,nvml_used,waiting}_bytes
 *             (labels pid, user, command, hpc_job, role: process, job, or
 *             unseen for a process using memory outside any grant), at most
 *             METRICS_MAX_PROCESSES of them, those using the most; how many
 *             were left out is vram_process_series_omitted
 */
#include "metrics.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define STR2(x) #x
#define STR(x) STR2(x)

/* A label's value, escaped as the text format wants (\\, \", \n). */
static void value(FILE *out, const char *v)
{
    fputc('"', out);
    for (; *v; v++) {
        if (*v == '\\' || *v == '"')
            fprintf(out, "\\%c", *v);
        else if (*v == '\n')
            fputs("\\n", out);
        else
            fputc(*v, out);
    }
    fputc('"', out);
}

static void label(FILE *out, bool first, const char *name, const char *v)
{
    fprintf(out, "%s%s=", first ? "" : ",", name);
    value(out, v);
}

/* DCGM exporter's labels of a GPU. */
static void gpu_labels(FILE *out, const struct snapshot *s, const struct snap_device *d, bool all)
{
    char gpu[16], device[24];
    snprintf(gpu, sizeof gpu, "%d", d->index);
    label(out, true, "gpu", gpu);
    label(out, false, "UUID", d->uuid);
    if (all) {
        label(out, false, "pci_bus_id", d->pci_bus_id);
        snprintf(device, sizeof device, "nvidia%d", d->minor >= 0 ? d->minor : d->index);
        label(out, false, "device", device);
        label(out, false, "modelName", d->name);
    }
    label(out, false, "Hostname", s->node.host);
    if (all)
        label(out, false, "DCGM_FI_DRIVER_VERSION", s->node.driver);
}

static void family(FILE *out, const char *name, const char *type, const char *help)
{
    fprintf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* ------------------------------------------------------------- devices */

struct device_metric {
    const char *name, *type, *help;
    double (*of)(const struct snap_device *d);
    bool ledger; /* the ledger's own figure: not in NVML's view (no vramd) */
};

#define FIELD(f) static double f##_of(const struct snap_device *d) { return (double)d->f; }
FIELD(total)
FIELD(reserved)
FIELD(granted)
FIELD(used)
FIELD(unseen)
FIELD(grantable)
FIELD(overcommitted)
FIELD(waiting)
FIELD(refused)
FIELD(reclaimed)
FIELD(reclaimed_bytes)
FIELD(waits)
#undef FIELD
static double waited_of(const struct snap_device *d) { return (double)d->waited_ms / 1000.0; }

static const struct device_metric device_metrics[] = {
    {"vram_gpu_memory_total_bytes", "gauge", "Memory of the GPU.", total_of, false},
    {"vram_gpu_memory_reserved_bytes", "gauge",
     "Memory reserved by the policy for named users or jobs and not yet held by them.",
     reserved_of, true},
    {"vram_gpu_memory_granted_bytes", "gauge",
     "Memory granted as budgets (without vramd: the budgets of the reader's vram run commands).",
     granted_of, false},
    {"vram_gpu_memory_used_bytes", "gauge",
     "Memory in use (each process's own figure or NVML's, whichever is larger, and usage "
     "outside grants).",
     used_of, false},
    {"vram_gpu_memory_unseen_bytes", "gauge",
     "Memory NVML shows in use by processes that hold no grant.", unseen_of, true},
    {"vram_gpu_memory_grantable_bytes", "gauge",
     "Memory vramd would grant now to a request no reservation is for: the GPU less its "
     "grants, reservations and usage outside grants (free memory is total less used).",
     grantable_of, true},
    {"vram_gpu_overcommitted", "gauge",
     "1 when grants and usage outside them exceed the GPU: some budget cannot be had in full.",
     overcommitted_of, true},
    {"vram_gpu_waiting_requests", "gauge", "Requests for memory waiting to be granted.",
     waiting_of, true},
    {"vram_refusals_total", "counter",
     "Requests for memory refused, at once or after waiting, since vramd started.", refused_of,
     true},
    {"vram_reclaims_total", "counter",
     "Grants taken back from processes that ended (exit, crash, kill) since vramd started.",
     reclaimed_of, true},
    {"vram_reclaimed_bytes_total", "counter",
     "Bytes of the grants taken back from processes that ended since vramd started.",
     reclaimed_bytes_of, true},
    {"vram_waits_total", "counter",
     "Requests that waited for memory, counted when their wait ended, since vramd started.",
     waits_of, true},
    {"vram_wait_seconds_total", "counter",
     "Time requests spent waiting for memory, together, since vramd started.", waited_of, true},
};

static void devices(const struct snapshot *s, FILE *out)
{
    for (size_t k = 0; k < sizeof device_metrics / sizeof *device_metrics; k++) {
        const struct device_metric *m = &device_metrics[k];
        if (m->ledger && s->nvml_view)
            continue;
        family(out, m->name, m->type, m->help);
        for (int d = 0; d < s->ndev; d++) {
            fprintf(out, "%s{", m->name);
            gpu_labels(out, s, &s->dev[d], true);
            double v = m->of(&s->dev[d]);
            fprintf(out, v == (double)(uint64_t)v ? "} %.0f\n" : "} %.3f\n", v);
        }
    }
}

/* ------------------------------------------------------ users, processes */

struct entry_metric {
    const char *name, *help;
    uint64_t (*of)(const struct snap_entry *e);
    bool ledger; /* the ledger's own figure: not in NVML's view (no vramd) */
};

static uint64_t grant_of(const struct snap_entry *e) { return e->grant; }
static uint64_t e_used_of(const struct snap_entry *e) { return e->used; }
static uint64_t peak_of(const struct snap_entry *e) { return e->peak; }
static uint64_t e_unseen_of(const struct snap_entry *e) { return e->unseen; }
static uint64_t want_of(const struct snap_entry *e) { return e->want; }
static uint64_t procs_of(const struct snap_entry *e) { return (uint64_t)e->procs; }
static uint64_t nvml_of(const struct snap_entry *e) { return e->nvml; }

static const struct entry_metric user_metrics[] = {
    {"vram_user_budget_bytes", "The user's grants on the GPU, each counted once.", grant_of},
    {"vram_user_used_bytes",
     "What the user's processes use on the GPU together, usage outside grants included.",
     e_used_of},
    {"vram_user_peak_bytes",
     "The most the user's processes used on the GPU at once since vramd started.", peak_of,
     true},
    {"vram_user_unseen_bytes", "What the user's processes without a grant use on the GPU.",
     e_unseen_of},
    {"vram_user_waiting_bytes", "Memory the user's requests wait for.", want_of, true},
    {"vram_user_processes", "The user's processes on the GPU (with a grant or not).", procs_of},
};

static const struct entry_metric process_metrics[] = {
    {"vram_process_budget_bytes", "The process's grant (for a job: the job's).", grant_of},
    {"vram_process_used_bytes",
     "Memory the process reports in use (for role unseen: NVML's figure).", e_used_of},
    {"vram_process_peak_bytes", "The most the process has had in use.", peak_of},
    {"vram_process_nvml_used_bytes", "Memory NVML shows for the process.", nvml_of},
    {"vram_process_waiting_bytes", "Memory the process waits to be granted.", want_of, true},
};

static void user_labels(FILE *out, const struct snapshot *s, const struct snap_entry *e)
{
    const struct snap_device *d = snapshot_device(s, e->dev);
    struct snap_device none = {.index = e->dev, .minor = -1};
    gpu_labels(out, s, d ? d : &none, false);
    char uid[16] = "";
    if (e->uid != UINT32_MAX)
        snprintf(uid, sizeof uid, "%u", e->uid);
    label(out, false, "user", e->user);
    label(out, false, "uid", uid);
}

static void process_labels(FILE *out, const struct snapshot *s, const struct snap_entry *e)
{
    user_labels(out, s, e);
    char pid[16];
    snprintf(pid, sizeof pid, "%d", e->pid);
    label(out, false, "pid", pid);
    label(out, false, "command", strcmp(e->cmd, "-") ? e->cmd : "");
    label(out, false, "hpc_job", strcmp(e->job, "-") ? e->job : "");
    label(out, false, "role", snapshot_role_name(e->role));
}

static uint64_t weight(const struct snap_entry *e)
{
    uint64_t w = e->used > e->nvml ? e->used : e->nvml;
    return w > e->grant ? w : e->grant;
}

static int heaviest_first(const void *a, const void *b)
{
    const struct snap_entry *x = *(const struct snap_entry *const *)a,
                            *y = *(const struct snap_entry *const *)b;
    uint64_t wx = weight(x), wy = weight(y);
    if (wx != wy)
        return wx > wy ? -1 : 1;
    if (x->dev != y->dev)
        return x->dev < y->dev ? -1 : 1;
    return x->pid != y->pid ? (x->pid < y->pid ? -1 : 1) : (x->id > y->id) - (x->id < y->id);
}

void snapshot_prometheus(const struct snapshot *s, FILE *out)
{
    family(out, "vram_vramd_up", "gauge",
           "1: these figures are vramd's ledger; 0: no vramd answered, and they are NVML's and "
           "the reader's vram run commands' (the ledger's own families are left out).");
    fprintf(out, "vram_vramd_up{");
    label(out, true, "Hostname", s->node.host);
    fprintf(out, "} %d\n", s->nvml_view ? 0 : 1);
    devices(s, out);
    for (size_t k = 0; k < sizeof user_metrics / sizeof *user_metrics; k++) {
        if (user_metrics[k].ledger && s->nvml_view)
            continue;
        family(out, user_metrics[k].name, "gauge", user_metrics[k].help);
        for (int i = 0; i < s->n; i++)
            if (s->e[i].role == 'u') {
                fprintf(out, "%s{", user_metrics[k].name);
                user_labels(out, s, &s->e[i]);
                fprintf(out, "} %llu\n", (unsigned long long)user_metrics[k].of(&s->e[i]));
            }
    }
    /* Per-process series, bounded: a node with thousands of processes must
     * not make thousands of series a scrape. */
    const struct snap_entry **p = malloc((size_t)(s->n + 1) * sizeof *p);
    int n = 0, total = 0;
    for (int i = 0; i < s->n; i++)
        if (s->e[i].role != 'u') {
            total++;
            if (p)
                p[n++] = &s->e[i];
        }
    if (n > 1)
        qsort(p, (size_t)n, sizeof *p, heaviest_first);
    if (n > METRICS_MAX_PROCESSES)
        n = METRICS_MAX_PROCESSES;
    for (size_t k = 0; k < sizeof process_metrics / sizeof *process_metrics; k++) {
        if (process_metrics[k].ledger && s->nvml_view)
            continue;
        family(out, process_metrics[k].name, "gauge", process_metrics[k].help);
        for (int i = 0; i < n; i++) {
            fprintf(out, "%s{", process_metrics[k].name);
            process_labels(out, s, p[i]);
            fprintf(out, "} %llu\n", (unsigned long long)process_metrics[k].of(p[i]));
        }
    }
    free(p);
    family(out, "vram_process_series_omitted", "gauge",
           "Processes left out of the vram_process_* series (at most " STR(
               METRICS_MAX_PROCESSES) " are kept: those using the most); the users' series "
           "count them.");
    fprintf(out, "vram_process_series_omitted{");
    label(out, true, "Hostname", s->node.host);
    fprintf(out, "} %d\n", total - n);
}
