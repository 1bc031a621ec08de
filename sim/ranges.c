/* ranges: every address range the simulated driver handed out, kept sorted
 * by address, so that a pointer anywhere inside an allocation finds it:
 * copies check their arguments here, and pointer attributes, address
 * ranges and IPC handles are answered from here. Each family (memory.c,
 * pools.c, vmm.c, graphs.c) adds its ranges and takes them back; nothing
 * else needs to know what the families are. */
#include "sim.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct sim_range *items;
static size_t count, cap;
static uint64_t next_id;

/* The first index whose base is > p. */
static size_t upper(uint64_t p)
{
    size_t lo = 0, hi = count;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (items[mid].base <= p)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

int sim_range_add(struct sim_range *r)
{
    pthread_mutex_lock(&mu);
    if (count == cap) {
        size_t ncap = cap ? cap * 2 : 256;
        struct sim_range *n = realloc(items, ncap * sizeof *n);
        if (!n) {
            pthread_mutex_unlock(&mu);
            return -1;
        }
        items = n;
        cap = ncap;
    }
    r->id = ++next_id;
    size_t i = upper(r->base);
    memmove(&items[i + 1], &items[i], (count - i) * sizeof *items);
    items[i] = *r;
    count++;
    pthread_mutex_unlock(&mu);
    return 0;
}

bool sim_range_take(uint64_t base, unsigned kinds, struct sim_range *out)
{
    pthread_mutex_lock(&mu);
    size_t i = upper(base);
    bool found = false;
    /* Ranges at the same base (a zero-length one) sit just below. */
    while (i > 0 && items[i - 1].base == base) {
        i--;
        if (kinds & (1u << items[i].kind)) {
            if (out)
                *out = items[i];
            memmove(&items[i], &items[i + 1], (count - i - 1) * sizeof *items);
            count--;
            found = true;
            break;
        }
    }
    pthread_mutex_unlock(&mu);
    return found;
}

bool sim_range_find(uint64_t p, uint64_t n, unsigned kinds, struct sim_range *out)
{
    pthread_mutex_lock(&mu);
    size_t i = upper(p);
    bool found = false;
    /* Ranges do not overlap, except an IPC mapping of our own memory,
     * which the driver refuses: the one below p is the only candidate. */
    if (i > 0) {
        const struct sim_range *r = &items[i - 1];
        if ((kinds & (1u << r->kind)) && p - r->base <= r->size && n <= r->size - (p - r->base) &&
            (n > 0 || p < r->base + r->size)) {
            if (out)
                *out = *r;
            found = true;
        }
    }
    pthread_mutex_unlock(&mu);
    return found;
}
