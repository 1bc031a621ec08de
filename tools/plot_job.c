/* vram plot --job: vramd's history of a job (history_view.h) as a
 * recording, so that the same timeline and pages draw it as they draw a
 * recording (plot.c): one process image per client of the job, whose
 * usage on each GPU is one reservation of the family "reported" resized
 * at each step where it changed, and whose grants are budget events; a
 * client that left exits when it left. */
#include "plot.h"

#include "../src/protocol/history_view.h"

#include <stdio.h>
#include <string.h>

#define NS 1000000ull /* a ms in ns */

/* A line's samples in time order: the hour ring up to where the recent
 * ring begins, then the recent ring. */
struct cursor {
    const struct history_line *l;
    int i; /* hour samples first, then recent ones */
};

static bool next_sample(struct cursor *c, uint64_t *time_ms, uint64_t *used, uint64_t *budget)
{
    const struct history_ring *h = &c->l->hour, *r = &c->l->recent;
    if (c->i < h->n) {
        uint64_t t = h->first_ms + (uint64_t)c->i * h->step_ms;
        /* Only for the time before the recent ring (and after the client
         * began: a step may begin before it did). */
        uint64_t from = t < c->l->begin_ms ? c->l->begin_ms : t;
        if (!r->n || from < r->first_ms) {
            *time_ms = t, *used = h->used[c->i], *budget = h->budget[c->i];
            c->i++;
            return true;
        }
        c->i = h->n; /* the recent ring covers the rest, in finer steps */
    }
    int k = c->i - h->n;
    if (k >= r->n)
        return false;
    *time_ms = r->first_ms + (uint64_t)k * r->step_ms;
    *used = r->used[k], *budget = r->budget[k];
    c->i++;
    return true;
}

/* A process whose job holds a grant on the device draws from it: the job's
 * grant is the budget line, not also the process's. */
static bool draws_from_job(const struct history_view *v, const struct history_line *l)
{
    if (l->kind != 'p')
        return false;
    for (int i = 0; i < v->n; i++)
        if (v->line[i].kind == 'j' && v->line[i].dev == l->dev && v->line[i].uid == l->uid &&
            strcmp(v->line[i].job, l->job) == 0)
            return true;
    return false;
}

/* A job whose processes have series of their own on the device (vram
 * run's command, a Slurm step: the holder reports them one by one): what
 * the job reports is their sum, drawn by them; the job draws its grant. */
static bool has_processes(const struct history_view *v, const struct history_line *j)
{
    if (j->kind != 'j')
        return false;
    for (int i = 0; i < v->n; i++)
        if (draws_from_job(v, &v->line[i]) && v->line[i].dev == j->dev &&
            v->line[i].uid == j->uid && strcmp(v->line[i].job, j->job) == 0)
            return true;
    return false;
}

static int add_line(struct recording *r, uint32_t image, const struct history_view *v,
                    const struct history_line *l)
{
    struct cursor c = {l, 0};
    uint64_t t, used, budget, was_used = 0, was_budget = 0, at = 0;
    bool own_budget = !draws_from_job(v, l), own_usage = !has_processes(v, l), first = true;
    struct record_event e = {.device = (uint8_t)l->dev, .family = RECORD_REPORTED,
                             .address = (uint64_t)l->dev + 1};
    while (next_sample(&c, &t, &used, &budget)) {
        /* A step may begin before the client did. */
        at = t < l->begin_ms ? l->begin_ms : t;
        if (own_budget && (first || budget != was_budget)) {
            e.time = at * NS, e.action = RECORD_BUDGET, e.bytes = budget;
            e.reason = RECORD_PROCESS_BUDGET, e.family = RECORD_NO_FAMILY;
            if (recording_build_event(r, image, &e) != 0)
                return -1;
            was_budget = budget;
        }
        if (own_usage && (first || used != was_used)) {
            e.time = at * NS, e.action = RECORD_RESIZE, e.bytes = used, e.aux = was_used;
            e.reason = 0, e.family = RECORD_REPORTED;
            if (recording_build_event(r, image, &e) != 0)
                return -1;
            was_used = used;
        }
        first = false;
    }
    /* What it held lasts until it left, or until now. */
    uint64_t until = l->end_ms ? l->end_ms : v->now_ms;
    if (own_usage && !first && until > at) {
        e.time = until * NS, e.action = RECORD_RESIZE, e.bytes = was_used, e.aux = was_used;
        e.reason = 0, e.family = RECORD_REPORTED;
        if (recording_build_event(r, image, &e) != 0)
            return -1;
    }
    return 0;
}

int plot_job_recording(const struct history_view *v, const char *job, struct recording *r)
{
    recording_build_begin(r);
    long image = -1;
    int clients = 0, running = 0;
    uint64_t recent_ms = 0, hour_ms = 0;
    for (int i = 0; i < v->n; i++) {
        const struct history_line *l = &v->line[i];
        if (l->kind == 'd')
            continue;
        if (!i || v->line[i - 1].kind == 'd' || v->line[i - 1].id != l->id) {
            /* A client: one process image, whatever its GPUs. */
            struct record_process info = {.pid = (uint32_t)l->pid, .uid = l->uid};
            info.start_monotonic = l->begin_ms * NS;
            info.start_realtime = (uint64_t)((int64_t)l->begin_ms + v->wall_offset_ms) * NS;
            if (l->kind == 'j')
                snprintf(info.command, sizeof info.command, "job %s", l->job);
            else
                snprintf(info.command, sizeof info.command, "%s", l->cmd);
            if ((image = recording_build_image(r, &info)) < 0)
                goto oom;
            clients++;
            running += !l->end_ms;
        }
        if (l->recent.step_ms)
            recent_ms = l->recent.step_ms;
        if (l->hour.step_ms)
            hour_ms = l->hour.step_ms;
        if (add_line(r, (uint32_t)image, v, l) != 0)
            goto oom;
        bool last_of_client = i + 1 == v->n || v->line[i + 1].id != l->id;
        if (last_of_client && l->end_ms) {
            struct record_event e = {.time = l->end_ms * NS, .device = RECORD_NO_DEVICE,
                                     .action = RECORD_EXIT};
            if (recording_build_event(r, (uint32_t)image, &e) != 0)
                goto oom;
        }
    }
    char notes[640];
    snprintf(notes, sizeof notes,
             "From vramd's history of job %s: %d client%s (%d still connected). Each step is "
             "the highest each one reported in use within it or held into it: steps of %.3g s "
             "for the last 2 minutes, %.3g s before; the daemon keeps an hour. Stacked, these "
             "highest add up even where they came at different moments of one step.",
             job, clients, clients == 1 ? "" : "s", running, (double)recent_ms / 1000.0,
             (double)(hour_ms ? hour_ms : recent_ms) / 1000.0);
    if (recording_build_end(r, notes) != 0)
        goto oom;
    return 0;
oom:
    recording_free(r);
    return -1;
}
