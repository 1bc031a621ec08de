/* Chrome/Perfetto trace events from a recording (see formats.h).
 *
 * The trace-event format: one JSON object {"traceEvents": [...]}; counter
 * events ("ph":"C") draw a track per argument, instant events ("ph":"i")
 * a mark, metadata events ("ph":"M") name the processes. Times ("ts") are
 * microseconds, here from the recording's first event. Each device is a
 * process of its own in the trace (pid GPU_PID + ordinal, named "GPU N"),
 * so that its tracks sit together above the programs' own: in use by
 * family, the budget, and NVML's figure (usage.h) where it was read. */
#include "formats.h"
#include "usage.h"

#include "../util/json.h"

#include <stdlib.h>

#define GPU_PID 1000000000

struct trace {
    FILE *out;
    int device;
    uint64_t start;
    unsigned *families; /* [dev]: bit per family seen on the device */
    uint64_t *budget;   /* [dev]: the budget line last written, UINT64_MAX: none yet */
    uint64_t *nvml;     /* [dev]: NVML's line last written, UINT64_MAX: none yet */
    uint64_t nvml_changes; /* usage's count when NVML's lines were last written */
};

static void ts(struct trace *t, uint64_t time)
{
    uint64_t ns = time - t->start;
    fprintf(t->out, "\"ts\":%llu.%03llu", (unsigned long long)(ns / 1000),
            (unsigned long long)(ns % 1000));
}

static void device_counter(struct trace *t, const struct usage *u, int dev, uint64_t time)
{
    fprintf(t->out, ",\n{\"ph\":\"C\",\"name\":\"GPU %d in use\",\"pid\":%d,\"tid\":0,", dev,
            GPU_PID + dev);
    ts(t, time);
    fputs(",\"args\":{", t->out);
    const char *sep = "";
    for (int f = 1; f < RECORD_FAMILIES; f++)
        if (t->families[dev] & 1u << f) {
            fprintf(t->out, "%s\"%s\":%llu", sep, record_family_name((unsigned)f),
                    (unsigned long long)u->by_family[dev * RECORD_FAMILIES + f]);
            sep = ",";
        }
    fputs("}}", t->out);
}

static void budget_counter(struct trace *t, const struct usage *u, int dev, uint64_t time)
{
    if (t->budget[dev] == u->budget[dev])
        return;
    t->budget[dev] = u->budget[dev];
    fprintf(t->out, ",\n{\"ph\":\"C\",\"name\":\"GPU %d budget\",\"pid\":%d,\"tid\":0,", dev,
            GPU_PID + dev);
    ts(t, time);
    fprintf(t->out, ",\"args\":{\"%s\":%llu}}",
            u->command_budget[dev] ? "command budget" : "budget",
            (unsigned long long)u->budget[dev]);
}

/* NVML's lines that changed (a reading, or a process that ended). */
static void nvml_counters(struct trace *t, const struct usage *u, uint64_t time)
{
    t->nvml_changes = u->nvml_changes;
    for (int dev = 0; dev < u->ndevices; dev++) {
        if ((t->device >= 0 && dev != t->device) || !u->nvml_seen[dev] ||
            t->nvml[dev] == u->nvml[dev])
            continue;
        t->nvml[dev] = u->nvml[dev];
        fprintf(t->out, ",\n{\"ph\":\"C\",\"name\":\"GPU %d NVML\",\"pid\":%d,\"tid\":0,", dev,
                GPU_PID + dev);
        ts(t, time);
        fprintf(t->out, ",\"args\":{\"NVML\":%llu}}", (unsigned long long)u->nvml[dev]);
    }
}

static void on_change(const struct usage *u, const struct usage_change *c, void *arg)
{
    struct trace *t = arg;
    const struct record_event *e = c->e;
    uint32_t pid = u->r->images[c->image].info.pid;
    if (u->nvml_changes != t->nvml_changes)
        nvml_counters(t, u, e->time);
    if (t->device >= 0 && c->dev >= 0 && c->dev != t->device)
        return;
    if (c->kind != USAGE_NONE) {
        device_counter(t, u, c->dev, e->time);
        fprintf(t->out, ",\n{\"ph\":\"C\",\"name\":\"GPU %d\",\"pid\":%u,\"tid\":0,", c->dev,
                pid);
        ts(t, e->time);
        fprintf(t->out, ",\"args\":{\"in use\":%llu}}",
                (unsigned long long)u->by_image[(size_t)c->image * (size_t)u->ndevices +
                                                (size_t)c->dev]);
        return;
    }
    switch (e->action) {
    case RECORD_REFUSE:
        if (c->dev < 0)
            break;
        fprintf(t->out, ",\n{\"ph\":\"i\",\"s\":\"p\",\"name\":\"refused: %s\",\"pid\":%d,"
                        "\"tid\":0,",
                record_reason_name(e->reason), GPU_PID + c->dev);
        ts(t, e->time);
        fprintf(t->out, ",\"args\":{\"process\":%u,\"thread\":%u,\"family\":\"%s\","
                        "\"requested\":%llu,\"in use\":%llu,\"budget\":%llu}}",
                pid, e->thread, record_family_name(e->family), (unsigned long long)e->bytes,
                (unsigned long long)e->aux, (unsigned long long)u->budget[c->dev]);
        break;
    case RECORD_BUDGET:
        if (c->dev >= 0)
            budget_counter(t, u, c->dev, e->time);
        break;
    case RECORD_CONTEXT:
        fprintf(t->out, ",\n{\"ph\":\"i\",\"s\":\"t\",\"name\":\"context created on GPU %d\","
                        "\"pid\":%u,\"tid\":%u,",
                c->dev, pid, e->thread);
        ts(t, e->time);
        fputs("}", t->out);
        break;
    case RECORD_EXIT:
        fprintf(t->out, ",\n{\"ph\":\"i\",\"s\":\"p\",\"name\":\"exit\",\"pid\":%u,\"tid\":%u,",
                pid, e->thread);
        ts(t, e->time);
        fputs("}", t->out);
        for (int d = 0; d < u->ndevices; d++)
            if (t->device < 0 || d == t->device)
                budget_counter(t, u, d, e->time);
        break;
    default:
        break;
    }
}

int write_trace_json(const struct recording *r, int device, FILE *out)
{
    int nd = r->ndevices ? r->ndevices : 1;
    struct trace t = {.out = out, .device = device, .start = r->start};
    t.families = calloc((size_t)nd, sizeof *t.families);
    t.budget = malloc((size_t)nd * sizeof *t.budget);
    t.nvml = malloc((size_t)nd * sizeof *t.nvml);
    if (!t.families || !t.budget || !t.nvml) {
        free(t.families);
        free(t.budget);
        free(t.nvml);
        return -1;
    }
    for (int d = 0; d < nd; d++)
        t.budget[d] = t.nvml[d] = UINT64_MAX;
    for (size_t i = 0; i < r->nevents; i++) {
        const struct record_event *e = &r->events[i];
        if (e->device < nd && e->family < RECORD_FAMILIES &&
            (e->action == RECORD_ALLOC || e->action == RECORD_RESIZE))
            t.families[e->device] |= 1u << e->family;
    }
    fputs("{\"displayTimeUnit\":\"ms\",\"otherData\":{\"generator\":\"vram\"},\n"
          "\"traceEvents\":[\n",
          out);
    const char *sep = "";
    for (int d = 0; d < r->ndevices; d++) {
        if (device >= 0 && d != device)
            continue;
        fprintf(out, "%s{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%d,\"tid\":0,"
                     "\"args\":{\"name\":\"GPU %d\"}},\n"
                     "{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":%d,\"tid\":0,"
                     "\"args\":{\"sort_index\":%d}}",
                sep, GPU_PID + d, d, GPU_PID + d, -100 + d);
        sep = ",\n";
    }
    for (size_t i = 0; i < r->nimages; i++) {
        char name[300];
        recording_image_name(&r->images[i], name, sizeof name);
        fprintf(out, "%s{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%u,\"tid\":0,"
                     "\"args\":{\"name\":",
                sep, r->images[i].info.pid);
        json_string(out, name);
        fputs("}}", out);
        sep = ",\n";
    }
    if (!*sep) /* no metadata: the events' leading commas need something before them */
        fputs("{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":0,\"tid\":0,"
              "\"args\":{\"name\":\"(empty recording)\"}}",
              out);
    int rc = usage_walk(r, on_change, &t);
    fputs("\n]}\n", out);
    free(t.families);
    free(t.budget);
    free(t.nvml);
    return rc;
}
