/* RMM's allocation log from a recording (see formats.h). */
#include "formats.h"
#include "usage.h"

#include "../util/addrmap.h"

#include <time.h>

struct csv {
    FILE *out;
    int device;
    int64_t offset; /* monotonic -> wall clock; 0: times from the start */
    uint64_t start;
    struct addrmap live; /* pointers written and not yet freed */
    uint64_t next_made_up;
    int rc;
};

/* Pointers are below 2^63: RMM's reader parses them as signed. */
#define MADE_UP_BASE 0x6000000000000000ull
#define POINTER_LIMIT 0x8000000000000000ull

static uint64_t pointer_for(struct csv *c, uint64_t address)
{
    uint64_t p = address;
    if (!p || p >= POINTER_LIMIT || addrmap_get(&c->live, p, NULL)) {
        do
            p = MADE_UP_BASE + (c->next_made_up++ << 8);
        while (addrmap_get(&c->live, p, NULL));
    }
    if (addrmap_put(&c->live, p, 1) != 0)
        c->rc = -1;
    return p;
}

/* RMM's time of day, HH:MM:SS.microseconds, in local time as its logger
 * writes it. */
static void line(struct csv *c, const struct record_event *e, const char *action, uint64_t ptr,
                 uint64_t size)
{
    uint64_t t = c->offset ? e->time + (uint64_t)c->offset : e->time - c->start;
    time_t secs = (time_t)(t / 1000000000ull);
    int h = (int)(secs / 3600), m = (int)(secs / 60 % 60), s = (int)(secs % 60);
    struct tm tm;
    if (c->offset && localtime_r(&secs, &tm)) {
        h = tm.tm_hour;
        m = tm.tm_min;
        s = tm.tm_sec;
    }
    if (fprintf(c->out, "%u,%02d:%02d:%02d.%06llu,%s,0x%llx,%llu,0x%llx\n", e->thread, h, m, s,
                (unsigned long long)(t % 1000000000ull / 1000), action, (unsigned long long)ptr,
                (unsigned long long)size, (unsigned long long)e->stream) < 0)
        c->rc = -1;
}

static void on_change(const struct usage *u, const struct usage_change *ch, void *arg)
{
    (void)u;
    struct csv *c = arg;
    if (c->device >= 0 && ch->dev != c->device)
        return;
    switch (ch->kind) {
    case USAGE_ALLOC:
        *ch->tag = pointer_for(c, ch->address);
        line(c, ch->e, "allocate", *ch->tag, ch->after);
        break;
    case USAGE_FREE:
        if (!*ch->tag)
            break;
        line(c, ch->e, "free", *ch->tag, ch->before);
        addrmap_take(&c->live, *ch->tag, NULL);
        break;
    case USAGE_RESIZE:
        if (*ch->tag) {
            line(c, ch->e, "free", *ch->tag, ch->before);
            addrmap_take(&c->live, *ch->tag, NULL);
        }
        *ch->tag = 0;
        if (ch->after) {
            *ch->tag = pointer_for(c, ch->address);
            line(c, ch->e, "allocate", *ch->tag, ch->after);
        }
        break;
    case USAGE_NONE:
        /* RMM's log has lines for allocations only: NVML's readings,
         * budgets, contexts and exits have none (a replay would take them
         * for allocations). */
        if (ch->e->action == RECORD_REFUSE && ch->dev >= 0)
            line(c, ch->e, "allocate failure", 0, ch->e->bytes);
        break;
    }
}

int write_rmm_csv(const struct recording *r, int device, FILE *out)
{
    struct csv c = {.out = out, .device = device, .offset = r->realtime_offset, .start = r->start};
    addrmap_init(&c.live);
    if (fputs("Thread,Time,Action,Pointer,Size,Stream\n", out) < 0)
        c.rc = -1;
    if (usage_walk(r, on_change, &c) != 0)
        c.rc = -1;
    addrmap_destroy(&c.live);
    return c.rc;
}
