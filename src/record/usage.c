#include "usage.h"

#include <stdlib.h>
#include <string.h>

/* Live objects: (image, family, address) -> charge, device and the
 * caller's tag. Open addressing, linear probing, backward-shift deletion. */
struct object {
    uint64_t address, bytes, tag;
    uint32_t image; /* UINT32_MAX: an empty slot */
    uint8_t family, dev;
};

struct objects {
    struct object *slots;
    size_t cap, count; /* cap: a power of two */
};

struct state {
    struct objects live;
    bool *started, *ended; /* [image]: its first event seen; it ended */
    uint64_t *image_budget; /* [image * ndevices + dev] */
    uint64_t *process_sum;  /* [dev]: the sum of live images' budgets */
    uint64_t *command;      /* [dev]: the command's budget, 0 when none */
    uint64_t *image_nvml;   /* [image * ndevices + dev]: its latest NVML reading */
};

static void set_nvml(struct usage *u, struct state *s, uint32_t image, int dev, uint64_t bytes)
{
    uint64_t *v = &s->image_nvml[(size_t)image * (size_t)u->ndevices + (size_t)dev];
    if (*v == bytes && u->nvml_seen[dev])
        return;
    u->nvml[dev] = u->nvml[dev] - *v + bytes;
    *v = bytes;
    u->nvml_seen[dev] = true;
    u->nvml_changes++;
}

static size_t slot_of(const struct objects *m, uint32_t image, uint8_t family, uint64_t address)
{
    uint64_t h = address * 0x9e3779b97f4a7c15ull ^ ((uint64_t)image << 8 | family) *
                                                        0xc2b2ae3d27d4eb4full;
    h ^= h >> 31;
    return (size_t)h & (m->cap - 1);
}

static struct object *find(struct objects *m, uint32_t image, uint8_t family, uint64_t address)
{
    for (size_t i = slot_of(m, image, family, address);; i = (i + 1) & (m->cap - 1)) {
        struct object *o = &m->slots[i];
        if (o->image == UINT32_MAX)
            return NULL;
        if (o->address == address && o->image == image && o->family == family)
            return o;
    }
}

static int grow(struct objects *m)
{
    struct objects bigger = {.cap = m->cap ? m->cap * 2 : 1024};
    bigger.slots = malloc(bigger.cap * sizeof *bigger.slots);
    if (!bigger.slots)
        return -1;
    for (size_t i = 0; i < bigger.cap; i++)
        bigger.slots[i].image = UINT32_MAX;
    for (size_t i = 0; i < m->cap; i++) {
        struct object *o = &m->slots[i];
        if (o->image == UINT32_MAX)
            continue;
        size_t j = slot_of(&bigger, o->image, o->family, o->address);
        while (bigger.slots[j].image != UINT32_MAX)
            j = (j + 1) & (bigger.cap - 1);
        bigger.slots[j] = *o;
    }
    free(m->slots);
    bigger.count = m->count;
    *m = bigger;
    return 0;
}

static struct object *insert(struct objects *m, uint32_t image, uint8_t family, uint64_t address)
{
    if ((m->count + 1) * 4 > m->cap * 3 && grow(m) != 0)
        return NULL;
    size_t i = slot_of(m, image, family, address);
    while (m->slots[i].image != UINT32_MAX)
        i = (i + 1) & (m->cap - 1);
    m->slots[i] = (struct object){.address = address, .image = image, .family = family};
    m->count++;
    return &m->slots[i];
}

static void erase(struct objects *m, struct object *o)
{
    size_t i = (size_t)(o - m->slots), mask = m->cap - 1;
    m->slots[i].image = UINT32_MAX;
    m->count--;
    /* Backward shift: move later entries of the run into the hole when
     * their home slot allows it, so lookups never stop early. */
    for (size_t j = (i + 1) & mask; m->slots[j].image != UINT32_MAX; j = (j + 1) & mask) {
        struct object *x = &m->slots[j];
        size_t home = slot_of(m, x->image, x->family, x->address);
        if (((j - home) & mask) >= ((j - i) & mask)) {
            m->slots[i] = *x;
            x->image = UINT32_MAX;
            i = j;
        }
    }
}

/* Applies a change of one object's charge to the totals. */
static void account(struct usage *u, uint32_t image, int dev, int family, uint64_t before,
                    uint64_t after)
{
    uint64_t *cells[3] = {&u->total[dev], &u->by_family[dev * RECORD_FAMILIES + family],
                          &u->by_image[(size_t)image * (size_t)u->ndevices + (size_t)dev]};
    for (int k = 0; k < 3; k++)
        *cells[k] = *cells[k] - before + after;
}

static void budget_line(struct usage *u, struct state *s, int dev)
{
    u->command_budget[dev] = s->command[dev] != 0;
    u->budget[dev] = s->command[dev] ? s->command[dev] : s->process_sum[dev];
}

/* The process image ended (its exit record at `index`, or the first event
 * of the image that replaced it): the driver freed what it held. */
static void image_exit(struct usage *u, struct state *s, uint32_t image, size_t index,
                       usage_fn *fn, void *arg)
{
    const struct record_event *e = &u->r->events[index];
    if (s->ended[image])
        return;
    s->ended[image] = true;
    for (size_t i = 0; i < s->live.cap;) {
        struct object *o = &s->live.slots[i];
        if (o->image != image) {
            i++;
            continue;
        }
        struct object copy = *o;
        account(u, image, copy.dev, copy.family, copy.bytes, 0);
        erase(&s->live, o);
        struct usage_change c = {USAGE_FREE, e,           index,        image,    copy.dev,
                                 copy.family, copy.address, copy.bytes, 0,        true,
                                 &copy.tag};
        fn(u, &c, arg);
        /* erase() may have moved another entry into slot i: look again. */
    }
    for (int dev = 0; dev < u->ndevices; dev++) {
        uint64_t *b = &s->image_budget[(size_t)image * (size_t)u->ndevices + (size_t)dev];
        if (*b) {
            s->process_sum[dev] -= *b;
            *b = 0;
            budget_line(u, s, dev);
        }
        if (s->image_nvml[(size_t)image * (size_t)u->ndevices + (size_t)dev])
            set_nvml(u, s, image, dev, 0);
    }
}

int usage_walk(const struct recording *r, usage_fn *fn, void *arg)
{
    int nd = r->ndevices ? r->ndevices : 1;
    struct state s = {0};
    struct usage u = {.r = r, .ndevices = nd, .priv = &s};
    u.total = calloc((size_t)nd, sizeof *u.total);
    u.by_family = calloc((size_t)nd * RECORD_FAMILIES, sizeof *u.by_family);
    u.by_image = calloc(r->nimages * (size_t)nd + 1, sizeof *u.by_image);
    u.budget = calloc((size_t)nd, sizeof *u.budget);
    u.command_budget = calloc((size_t)nd, sizeof *u.command_budget);
    u.nvml = calloc((size_t)nd, sizeof *u.nvml);
    u.nvml_seen = calloc((size_t)nd, sizeof *u.nvml_seen);
    s.image_nvml = calloc(r->nimages * (size_t)nd + 1, sizeof *s.image_nvml);
    s.image_budget = calloc(r->nimages * (size_t)nd + 1, sizeof *s.image_budget);
    s.process_sum = calloc((size_t)nd, sizeof *s.process_sum);
    s.command = calloc((size_t)nd, sizeof *s.command);
    s.started = calloc(r->nimages + 1, sizeof *s.started);
    s.ended = calloc(r->nimages + 1, sizeof *s.ended);
    int rc = -1;
    if (!u.total || !u.by_family || !u.by_image || !u.budget || !u.command_budget || !u.nvml ||
        !u.nvml_seen || !s.image_nvml || !s.image_budget || !s.process_sum || !s.command ||
        !s.started || !s.ended || grow(&s.live) != 0)
        goto out;
    for (size_t i = 0; i < r->nevents; i++) {
        const struct record_event *e = &r->events[i];
        uint32_t image = r->image_of[i];
        if (!s.started[image]) {
            s.started[image] = true;
            if (r->images[image].replaces != RECORDING_NONE)
                image_exit(&u, &s, r->images[image].replaces, i, fn, arg);
        }
        int dev = e->device == RECORD_NO_DEVICE ? -1 : e->device;
        uint8_t fam = e->family < RECORD_FAMILIES ? e->family : RECORD_NO_FAMILY;
        struct usage_change c = {USAGE_NONE, e, i, image, dev, fam, e->address, 0, 0, false, NULL};
        bool charge = e->action == RECORD_ALLOC || e->action == RECORD_FREE ||
                      e->action == RECORD_RESIZE;
        if (charge && dev >= 0) {
            struct object *o = find(&s.live, image, fam, e->address);
            if (e->action == RECORD_ALLOC && o) {
                /* Allocated again without a free between: the old one is
                 * gone (its free was lost). */
                struct object copy = *o;
                account(&u, image, copy.dev, fam, copy.bytes, 0);
                erase(&s.live, o);
                struct usage_change f = {USAGE_FREE, e,         i,    image, copy.dev, fam,
                                         copy.address, copy.bytes, 0, true,  &copy.tag};
                fn(&u, &f, arg);
                u.unmatched++;
                o = NULL;
            }
            if (e->action == RECORD_FREE && !o) {
                u.unmatched++;
            } else if (e->action == RECORD_FREE) {
                c.kind = USAGE_FREE;
                c.dev = o->dev;
                c.before = o->bytes;
                uint64_t tag = o->tag;
                account(&u, image, o->dev, fam, o->bytes, 0);
                erase(&s.live, o);
                c.tag = &tag;
                fn(&u, &c, arg);
                continue;
            } else {
                if (!o) {
                    if (!(o = insert(&s.live, image, fam, e->address)))
                        goto out;
                    o->dev = (uint8_t)dev;
                }
                c.kind = e->action == RECORD_ALLOC ? USAGE_ALLOC : USAGE_RESIZE;
                c.dev = o->dev;
                c.before = o->bytes;
                c.after = e->bytes;
                account(&u, image, o->dev, fam, o->bytes, e->bytes);
                o->bytes = e->bytes;
                uint64_t tag = o->tag;
                c.tag = &tag;
                fn(&u, &c, arg);
                /* The callback may have set the tag; the map may not have
                 * moved (nothing was inserted or erased since). */
                o->tag = tag;
                if (!o->bytes && e->action == RECORD_RESIZE)
                    erase(&s.live, o);
                continue;
            }
        } else if (e->action == RECORD_BUDGET && dev >= 0) {
            if (e->reason == RECORD_COMMAND_BUDGET) {
                s.command[dev] = e->bytes;
            } else {
                uint64_t *b = &s.image_budget[(size_t)image * (size_t)nd + (size_t)dev];
                s.process_sum[dev] = s.process_sum[dev] - *b + e->bytes;
                *b = e->bytes;
            }
            budget_line(&u, &s, dev);
        } else if (e->action == RECORD_EXIT) {
            image_exit(&u, &s, image, i, fn, arg);
        } else if (e->action == RECORD_NVML && dev >= 0 && !s.ended[image]) {
            set_nvml(&u, &s, image, dev, e->bytes);
        }
        fn(&u, &c, arg);
    }
    rc = 0;
out:
    free(u.total);
    free(u.by_family);
    free(u.by_image);
    free(u.budget);
    free(u.command_budget);
    free(u.nvml);
    free(u.nvml_seen);
    free(s.image_nvml);
    free(s.image_budget);
    free(s.process_sum);
    free(s.command);
    free(s.started);
    free(s.ended);
    free(s.live.slots);
    return rc;
}
