#include "summary.h"

#include "formats.h"
#include "usage.h"

#include "../util/addrmap.h"
#include "../util/json.h"
#include "../util/parse.h"

#include <stdlib.h>
#include <string.h>

struct walk {
    struct summary *s;
    uint64_t all; /* in use on all devices together */
};

static void on_change(const struct usage *u, const struct usage_change *c, void *arg)
{
    struct walk *w = arg;
    struct summary *s = w->s;
    if (c->dev < 0) {
        for (int d = 0; d < u->ndevices && d < s->ndevices; d++)
            if (u->budget[d] > s->devices[d].budget_peak)
                s->devices[d].budget_peak = u->budget[d];
        return;
    }
    struct summary_device *d = &s->devices[c->dev];
    if (u->budget[c->dev] > d->budget_peak)
        d->budget_peak = u->budget[c->dev];
    if (c->kind == USAGE_NONE) {
        if (c->e->action == RECORD_REFUSE)
            d->refusals++;
        if (c->e->action == RECORD_NVML) {
            d->nvml = true;
            if (u->nvml[c->dev] > d->nvml_peak)
                d->nvml_peak = u->nvml[c->dev];
        }
        d->events++;
        return;
    }
    if (!c->implied)
        d->events++;
    if (c->kind == USAGE_ALLOC)
        d->allocations++;
    uint64_t total = u->total[c->dev];
    if (total > d->peak) {
        d->peak = total;
        d->peak_time = c->e->time;
    }
    uint64_t fam = u->by_family[c->dev * RECORD_FAMILIES + c->family];
    if (fam > d->family_peak[c->family])
        d->family_peak[c->family] = fam;
    w->all = w->all - c->before + c->after;
    if (w->all > s->peak_all) {
        s->peak_all = w->all;
        s->peak_all_time = c->e->time;
    }
    s->unmatched = u->unmatched;
}

int summary_build(const struct recording *r, struct summary *s)
{
    memset(s, 0, sizeof *s);
    s->events = r->nevents;
    s->duration = r->end - r->start;
    s->ndevices = r->ndevices;
    s->devices = calloc((size_t)(r->ndevices ? r->ndevices : 1), sizeof *s->devices);
    if (!s->devices)
        return -1;
    for (size_t i = 0; i < r->nimages; i++) {
        s->processes++;
        s->exited += r->images[i].exited;
    }
    struct addrmap threads;
    addrmap_init(&threads);
    for (size_t i = 0; i < r->nevents; i++) {
        uint64_t key = (uint64_t)r->events[i].thread + 1;
        if (!addrmap_get(&threads, key, NULL) && addrmap_put(&threads, key, 1) == 0)
            s->threads++;
    }
    addrmap_destroy(&threads);
    struct walk w = {.s = s};
    if (usage_walk(r, on_change, &w) != 0) {
        summary_free(s);
        return -1;
    }
    return 0;
}

void summary_free(struct summary *s)
{
    free(s->devices);
    memset(s, 0, sizeof *s);
}

static double seconds(uint64_t ns) { return (double)ns / 1e9; }

void summary_print(const struct recording *r, const struct summary *s, const char *name,
                   FILE *out)
{
    fprintf(out, "%s: %zu event%s of %zu process%s (%zu thread%s) over %.3f s\n", name, s->events,
            s->events == 1 ? "" : "s", s->processes, s->processes == 1 ? "" : "es", s->threads, s->threads == 1 ? "" : "s",
            seconds(s->duration));
    for (size_t i = 0; i < r->nimages; i++) {
        char who[300];
        recording_image_name(&r->images[i], who, sizeof who);
        fprintf(out, "  process %s: %llu event%s%s\n", who,
                (unsigned long long)r->images[i].events, r->images[i].events == 1 ? "" : "s",
                r->images[i].exited ? "" : ", no exit record");
    }
    for (int d = 0; d < s->ndevices; d++) {
        const struct summary_device *sd = &s->devices[d];
        if (!sd->events)
            continue;
        fprintf(out, "GPU %d: peak %s (%llu bytes) at %.6f s", d, format_size(sd->peak).text,
                (unsigned long long)sd->peak, seconds(sd->peak_time - r->start));
        if (sd->budget_peak)
            fprintf(out, "; budget %s", format_size(sd->budget_peak).text);
        if (sd->nvml)
            fprintf(out, "; NVML's peak %s", format_size(sd->nvml_peak).text);
        fprintf(out, "; %llu allocation%s, %llu refused\n", (unsigned long long)sd->allocations,
                sd->allocations == 1 ? "" : "s", (unsigned long long)sd->refusals);
        fprintf(out, "  peak by family:");
        for (int f = 1; f < RECORD_FAMILIES; f++)
            if (sd->family_peak[f])
                fprintf(out, " %s %s", record_family_name((unsigned)f),
                        format_size(sd->family_peak[f]).text);
        fputc('\n', out);
    }
    if (s->ndevices > 1)
        fprintf(out, "all GPUs together: peak %s (%llu bytes) at %.6f s\n",
                format_size(s->peak_all).text, (unsigned long long)s->peak_all,
                seconds(s->peak_all_time - r->start));
    if (s->unmatched)
        fprintf(out, "%llu free%s of allocations the recording does not hold %s ignored\n",
                (unsigned long long)s->unmatched, s->unmatched == 1 ? "" : "s",
                s->unmatched == 1 ? "was" : "were");
    if (r->notes[0])
        fprintf(out, "note: %s\n", r->notes);
}

void summary_print_json(const struct recording *r, const struct summary *s, FILE *out)
{
    fprintf(out, "{\"events\":%zu,\"duration_s\":%.9f,\"threads\":%zu,\"processes\":[", s->events,
            seconds(s->duration), s->threads);
    for (size_t i = 0; i < r->nimages; i++) {
        fprintf(out, "%s{\"pid\":%u,\"command\":", i ? "," : "", r->images[i].info.pid);
        json_string(out, r->images[i].info.command);
        fprintf(out, ",\"events\":%llu,\"exited\":%s}", (unsigned long long)r->images[i].events,
                r->images[i].exited ? "true" : "false");
    }
    fputs("],\"devices\":[", out);
    const char *sep = "";
    for (int d = 0; d < s->ndevices; d++) {
        const struct summary_device *sd = &s->devices[d];
        if (!sd->events)
            continue;
        fprintf(out, "%s{\"device\":%d,\"peak\":%llu,\"peak_time_s\":%.9f,\"budget\":%llu,"
                     "\"allocations\":%llu,\"refusals\":%llu,",
                sep, d, (unsigned long long)sd->peak, seconds(sd->peak_time - r->start),
                (unsigned long long)sd->budget_peak, (unsigned long long)sd->allocations,
                (unsigned long long)sd->refusals);
        /* Absent rather than 0 where no reading is recorded: 0 would say
         * NVML saw the program hold nothing. */
        if (sd->nvml)
            fprintf(out, "\"nvml_peak\":%llu,", (unsigned long long)sd->nvml_peak);
        fputs("\"family_peaks\":{", out);
        const char *fsep = "";
        for (int f = 1; f < RECORD_FAMILIES; f++)
            if (sd->family_peak[f]) {
                fprintf(out, "%s\"%s\":%llu", fsep, record_family_name((unsigned)f),
                        (unsigned long long)sd->family_peak[f]);
                fsep = ",";
            }
        fputs("}}", out);
        sep = ",";
    }
    fprintf(out, "],\"peak_all\":%llu,\"unmatched_frees\":%llu,\"notes\":",
            (unsigned long long)s->peak_all, (unsigned long long)s->unmatched);
    json_string(out, r->notes);
    fputs("}\n", out);
}
