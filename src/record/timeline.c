#include "timeline.h"

#include "usage.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* end - start + 1 in 128 bits: events at 0 and at 2^64 - 1 make it 2^64,
 * which wraps to 0 in 64 (a file may say anything). */
static unsigned __int128 span(const struct timeline *t)
{
    return t->end >= t->start ? (unsigned __int128)(t->end - t->start) + 1 : 1;
}

double timeline_span_ns(const struct timeline *t) { return (double)span(t); }

uint64_t timeline_column_time(const struct timeline *t, int c)
{
    return t->start + (uint64_t)(span(t) * (unsigned)c / (unsigned)t->ncols);
}

int timeline_column_of(const struct timeline *t, uint64_t time)
{
    if (time <= t->start)
        return 0;
    uint64_t c = (uint64_t)((unsigned __int128)(time - t->start) * (unsigned)t->ncols / span(t));
    return c >= (uint64_t)t->ncols ? t->ncols - 1 : (int)c;
}

/* ---------------------------------------------- first pass: the series */

struct survey {
    int nd;
    uint64_t *image_peak; /* [image * nd + dev] */
    unsigned *families;   /* [dev]: bit per family charged */
    uint64_t *events;     /* [dev] */
    bool *nvml;           /* [dev]: NVML's readings of it are recorded */
    uint64_t unmatched;
};

static void survey_change(const struct usage *u, const struct usage_change *c, void *arg)
{
    struct survey *s = arg;
    s->unmatched = u->unmatched;
    if (c->dev < 0)
        return;
    if (c->kind == USAGE_NONE) {
        if (c->e->action == RECORD_NVML)
            s->nvml[c->dev] = true;
        if (c->e->action == RECORD_REFUSE || c->e->action == RECORD_BUDGET ||
            c->e->action == RECORD_CONTEXT || c->e->action == RECORD_MAP ||
            c->e->action == RECORD_UNMAP || c->e->action == RECORD_RELEASE)
            s->events[c->dev]++;
        return;
    }
    if (!c->implied)
        s->events[c->dev]++;
    s->families[c->dev] |= 1u << c->family;
    size_t k = (size_t)c->image * (size_t)s->nd + (size_t)c->dev;
    uint64_t v = u->by_image[k];
    if (v > s->image_peak[k])
        s->image_peak[k] = v;
}

/* Families from the bottom of the stack up: what a process holds from its
 * start to its end (its contexts, its code, what the driver keeps) under
 * what comes and goes. */
static const int stack_order[RECORD_FAMILIES - 1] = {
    RECORD_CONTEXT_MEMORY, RECORD_MODULE, RECORD_DRIVER, RECORD_PLAIN, RECORD_PITCHED,
    RECORD_MANAGED,        RECORD_POOL,   RECORD_VMM,    RECORD_ARRAY, RECORD_GRAPH,
    RECORD_REPORTED,
};
_Static_assert(RECORD_FAMILIES - 1 <= TIMELINE_MAX_SERIES, "a series for every family");
_Static_assert(RECORD_FAMILIES == 12, "stack_order names every family once");

/* ------------------------------------------- second pass: the columns */

struct series_state {
    uint64_t value[TIMELINE_MAX_SERIES];
};

struct device_state {
    struct timeline_device *td;
    int *process_series; /* [image]: the series of the by-process chart */
    int family_series[RECORD_FAMILIES];
    struct series_state fam, proc;
    uint64_t total, budget;
    uint64_t nvml; /* NVML's line, once nvml_seen */
    bool nvml_seen;
    int col; /* the open column */
};

struct builder {
    struct timeline *t;
    struct device_state *ds; /* [dev]; td NULL for devices not drawn */
    int nd;
    uint64_t nvml_changes; /* usage's count when NVML's lines were last taken */
};

static void chart_store(const struct timeline_chart *ch, const struct series_state *v, int col,
                        bool open)
{
    uint64_t sum = 0;
    for (int s = 0; s < ch->nseries; s++) {
        size_t k = (size_t)col * (size_t)ch->nseries + (size_t)s;
        sum += v->value[s];
        if (open || sum > ch->level_max[k])
            ch->level_max[k] = sum;
        if (open || v->value[s] > ch->series_max[k])
            ch->series_max[k] = v->value[s];
        ch->series_last[k] = v->value[s];
    }
}

/* Records the device's present state into column `col`: as its first
 * state (open) or one more within it. */
static void column_store(struct device_state *d, int col, bool open)
{
    struct timeline_device *td = d->td;
    chart_store(&td->by_family, &d->fam, col, open);
    chart_store(&td->by_process, &d->proc, col, open);
    if (open || d->total < td->total_min[col])
        td->total_min[col] = d->total;
    if (open || d->total > td->total_max[col])
        td->total_max[col] = d->total;
    td->total_last[col] = d->total;
    if (open || d->budget > td->budget[col])
        td->budget[col] = d->budget;
    if (td->nvml_max && d->nvml_seen) {
        if (open || td->nvml_max[col] == TIMELINE_NO_NVML || d->nvml > td->nvml_max[col])
            td->nvml_max[col] = d->nvml;
        td->nvml_last[col] = d->nvml;
    } else if (td->nvml_max && open) {
        td->nvml_max[col] = td->nvml_last[col] = TIMELINE_NO_NVML;
    }
}

/* Moves the device to the column of `time`: the columns passed keep the
 * state as it was (nothing happened in them). */
static void advance(struct device_state *d, int col)
{
    while (d->col < col)
        column_store(d, ++d->col, true);
}

/* NVML's lines changed (a reading, or an image that ended): each device
 * drawn takes its new value in the column of `col`. */
static void take_nvml(struct builder *b, const struct usage *u, int col)
{
    b->nvml_changes = u->nvml_changes;
    for (int dev = 0; dev < b->nd; dev++) {
        struct device_state *d = &b->ds[dev];
        if (!d->td || !d->td->nvml_max || !u->nvml_seen[dev] ||
            (d->nvml_seen && d->nvml == u->nvml[dev]))
            continue;
        advance(d, col);
        d->nvml = u->nvml[dev];
        d->nvml_seen = true;
        if (d->nvml > d->td->nvml_peak)
            d->td->nvml_peak = d->nvml;
        column_store(d, col, false);
    }
}

static void build_change(const struct usage *u, const struct usage_change *c, void *arg)
{
    struct builder *b = arg;
    int col = timeline_column_of(b->t, c->e->time);
    if (u->nvml_changes != b->nvml_changes)
        take_nvml(b, u, col);
    if (c->kind == USAGE_NONE && (c->e->action == RECORD_EXIT || c->e->action == RECORD_BUDGET)) {
        for (int dev = 0; dev < b->nd; dev++) {
            struct device_state *d = &b->ds[dev];
            if (!d->td || (c->dev >= 0 && dev != c->dev) || d->budget == u->budget[dev])
                continue;
            advance(d, col);
            d->budget = u->budget[dev];
            d->td->command_budget = u->command_budget[dev];
            if (d->budget > d->td->budget_peak)
                d->td->budget_peak = d->budget;
            column_store(d, col, false);
        }
        return;
    }
    if (c->dev < 0 || c->dev >= b->nd || !b->ds[c->dev].td)
        return;
    struct device_state *d = &b->ds[c->dev];
    struct timeline_device *td = d->td;
    advance(d, col);
    if (c->kind == USAGE_NONE) {
        if (c->e->action != RECORD_REFUSE)
            return;
        td->refusals[col]++;
        if (td->nlisted < TIMELINE_LISTED_REFUSALS)
            td->listed[td->nlisted++] = (struct timeline_refusal){
                c->e->time, c->e->bytes, c->e->aux, d->budget,
                u->r->images[c->image].info.pid, c->e->family, c->e->reason};
        td->refusal_count++;
        return;
    }
    d->fam.value[d->family_series[c->family]] = u->by_family[c->dev * RECORD_FAMILIES + c->family];
    d->proc.value[d->process_series[c->image]] += c->after - c->before;
    d->total = u->total[c->dev];
    if (d->total > td->peak) {
        td->peak = d->total;
        td->peak_time = c->e->time;
    }
    column_store(d, col, false);
}

/* ---------------------------------------------------------- the build */

static int chart_alloc(struct timeline_chart *ch, int ncols)
{
    size_t n = (size_t)ncols * (size_t)(ch->nseries ? ch->nseries : 1);
    ch->level_max = calloc(n, sizeof *ch->level_max);
    ch->series_max = calloc(n, sizeof *ch->series_max);
    ch->series_last = calloc(n, sizeof *ch->series_last);
    return ch->level_max && ch->series_max && ch->series_last ? 0 : -1;
}

/* A series' peak: the highest of its columns' highest values. */
static void series_peaks(struct timeline_chart *ch, int ncols)
{
    for (int s = 0; s < ch->nseries; s++) {
        ch->series_peak[s] = 0;
        for (int c = 0; c < ncols; c++) {
            uint64_t v = ch->series_max[(size_t)c * (size_t)ch->nseries + (size_t)s];
            if (v > ch->series_peak[s])
                ch->series_peak[s] = v;
        }
    }
}

struct ranked {
    uint64_t peak;
    uint32_t image;
};

static int by_peak(const void *a, const void *b)
{
    const struct ranked *x = a, *y = b;
    if (x->peak != y->peak)
        return x->peak < y->peak ? 1 : -1;
    return (x->image > y->image) - (x->image < y->image);
}

/* The device's by-process series: the images with the highest peaks,
 * the rest as "other". */
static int choose_processes(const struct recording *r, const struct survey *s, int dev,
                            struct timeline_chart *ch, int *process_series)
{
    struct ranked *rk = malloc((r->nimages + 1) * sizeof *rk);
    if (!rk)
        return -1;
    size_t n = 0;
    for (size_t i = 0; i < r->nimages; i++) {
        uint64_t p = s->image_peak[i * (size_t)s->nd + (size_t)dev];
        if (p)
            rk[n++] = (struct ranked){p, (uint32_t)i};
    }
    qsort(rk, n, sizeof *rk, by_peak);
    size_t named = n <= TIMELINE_MAX_SERIES ? n : TIMELINE_MAX_SERIES - 1;
    int other = (int)named;
    for (size_t i = 0; i < r->nimages; i++)
        process_series[i] = other;
    for (size_t k = 0; k < named; k++) {
        const struct recording_image *im = &r->images[rk[k].image];
        process_series[rk[k].image] = (int)k;
        recording_image_name(im, ch->names[k], sizeof ch->names[k]);
        ch->family[k] = -1;
        ch->pid[k] = im->info.pid;
        ch->series_peak[k] = rk[k].peak;
    }
    ch->nseries = (int)named;
    if (n > named || n == 0) {
        snprintf(ch->names[named], sizeof ch->names[named], n ? "other (%zu process%s)" : "none",
                 n - named, n - named == 1 ? "" : "es");
        ch->family[named] = -1;
        ch->pid[named] = 0;
        ch->nseries++;
    }
    free(rk);
    return 0;
}

int timeline_build(const struct recording *r, int ncols, int only_device, struct timeline *t)
{
    memset(t, 0, sizeof *t);
    t->ncols = ncols;
    t->start = r->start;
    t->end = r->end;
    t->realtime_offset = r->realtime_offset;
    t->nevents = r->nevents;
    t->nimages = r->nimages;
    int nd = r->ndevices;
    struct survey s = {.nd = nd ? nd : 1};
    s.image_peak = calloc(r->nimages * (size_t)s.nd + 1, sizeof *s.image_peak);
    s.families = calloc((size_t)s.nd, sizeof *s.families);
    s.events = calloc((size_t)s.nd, sizeof *s.events);
    s.nvml = calloc((size_t)s.nd, sizeof *s.nvml);
    struct builder b = {.t = t, .nd = nd};
    b.ds = calloc((size_t)s.nd, sizeof *b.ds);
    t->devices = calloc((size_t)s.nd, sizeof *t->devices);
    int rc = -1;
    if (!s.image_peak || !s.families || !s.events || !s.nvml || !b.ds || !t->devices ||
        usage_walk(r, survey_change, &s) != 0)
        goto out;
    for (int dev = 0; dev < nd; dev++) {
        if (!s.events[dev] || (only_device >= 0 && dev != only_device))
            continue;
        struct timeline_device *td = &t->devices[t->ndevices++];
        struct device_state *d = &b.ds[dev];
        d->td = td;
        td->dev = dev;
        td->events = s.events[dev];
        struct timeline_chart *ch = &td->by_family;
        for (int k = 0; k < RECORD_FAMILIES - 1; k++) {
            int f = stack_order[k];
            d->family_series[f] = ch->nseries;
            if (!(s.families[dev] & 1u << f))
                continue;
            snprintf(ch->names[ch->nseries], sizeof ch->names[0], "%s",
                     record_family_name((unsigned)f));
            ch->family[ch->nseries++] = f;
        }
        if (!ch->nseries) { /* refusals or budgets only */
            snprintf(ch->names[0], sizeof ch->names[0], "none");
            ch->family[0] = 0;
            ch->nseries = 1;
        }
        d->process_series = malloc((r->nimages + 1) * sizeof *d->process_series);
        td->total_min = calloc((size_t)ncols, sizeof *td->total_min);
        td->total_max = calloc((size_t)ncols, sizeof *td->total_max);
        td->total_last = calloc((size_t)ncols, sizeof *td->total_last);
        td->budget = calloc((size_t)ncols, sizeof *td->budget);
        td->refusals = calloc((size_t)ncols, sizeof *td->refusals);
        td->listed = calloc(TIMELINE_LISTED_REFUSALS, sizeof *td->listed);
        if (s.nvml[dev]) {
            td->nvml_max = calloc((size_t)ncols, sizeof *td->nvml_max);
            td->nvml_last = calloc((size_t)ncols, sizeof *td->nvml_last);
        }
        if (!d->process_series || !td->total_min || !td->total_max || !td->total_last ||
            !td->budget || !td->refusals || !td->listed ||
            (s.nvml[dev] && (!td->nvml_max || !td->nvml_last)) ||
            choose_processes(r, &s, dev, &td->by_process, d->process_series) != 0 ||
            chart_alloc(&td->by_family, ncols) != 0 || chart_alloc(&td->by_process, ncols) != 0)
            goto out;
        column_store(d, 0, true);
    }
    t->unmatched = s.unmatched;
    if (usage_walk(r, build_change, &b) != 0)
        goto out;
    for (int dev = 0; dev < nd; dev++)
        if (b.ds[dev].td)
            advance(&b.ds[dev], ncols - 1);
    for (int i = 0; i < t->ndevices; i++) {
        struct timeline_chart *charts[2] = {&t->devices[i].by_family, &t->devices[i].by_process};
        for (int k = 0; k < 2; k++)
            series_peaks(charts[k], ncols);
    }
    rc = 0;
out:
    for (int dev = 0; dev < nd; dev++)
        free(b.ds[dev].process_series);
    free(b.ds);
    free(s.image_peak);
    free(s.families);
    free(s.events);
    free(s.nvml);
    if (rc != 0)
        timeline_free(t);
    return rc;
}

static void chart_free(struct timeline_chart *ch)
{
    free(ch->level_max);
    free(ch->series_max);
    free(ch->series_last);
}

void timeline_free(struct timeline *t)
{
    for (int i = 0; i < t->ndevices; i++) {
        struct timeline_device *td = &t->devices[i];
        chart_free(&td->by_family);
        chart_free(&td->by_process);
        free(td->total_min);
        free(td->total_max);
        free(td->total_last);
        free(td->budget);
        free(td->refusals);
        free(td->listed);
        free(td->nvml_max);
        free(td->nvml_last);
    }
    free(t->devices);
    memset(t, 0, sizeof *t);
}
