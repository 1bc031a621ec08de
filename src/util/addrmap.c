#include "addrmap.h"

#include <stdlib.h>

/* Device addresses are at least 256-byte aligned: drop the zero bits, then
 * a Fibonacci multiply spreads the rest into the top bits we index with. */
static inline size_t home(const struct addrmap *m, uint64_t key)
{
    return (size_t)(((key >> 8) * 0x9E3779B97F4A7C15ull) >> m->shift);
}

void addrmap_init(struct addrmap *m)
{
    m->slots = NULL;
    m->cap = m->count = 0;
    m->shift = 64;
}

void addrmap_destroy(struct addrmap *m)
{
    free(m->slots);
    addrmap_init(m);
}

static int grow(struct addrmap *m)
{
    size_t cap = m->cap ? m->cap * 2 : 64;
    struct addrmap_slot *s = calloc(cap, sizeof *s);
    if (!s)
        return -1;
    struct addrmap old = *m;
    m->slots = s;
    m->cap = cap;
    m->count = 0;
    m->shift = 64 - (unsigned)__builtin_ctzll(cap);
    for (size_t i = 0; i < old.cap; i++)
        if (old.slots[i].key)
            addrmap_put(m, old.slots[i].key, old.slots[i].value);
    free(old.slots);
    return 0;
}

int addrmap_put(struct addrmap *m, uint64_t key, uint64_t value)
{
    if ((m->count + 1) * 2 > m->cap && grow(m) != 0)
        return -1;
    size_t mask = m->cap - 1;
    size_t i = home(m, key);
    while (m->slots[i].key)
        i = (i + 1) & mask;
    m->slots[i].key = key;
    m->slots[i].value = value;
    m->count++;
    return 0;
}

static inline size_t find(const struct addrmap *m, uint64_t key)
{
    if (!m->cap)
        return SIZE_MAX;
    size_t mask = m->cap - 1;
    for (size_t i = home(m, key);; i = (i + 1) & mask) {
        if (m->slots[i].key == key)
            return i;
        if (!m->slots[i].key)
            return SIZE_MAX;
    }
}

bool addrmap_get(const struct addrmap *m, uint64_t key, uint64_t *value)
{
    size_t i = find(m, key);
    if (i == SIZE_MAX)
        return false;
    if (value)
        *value = m->slots[i].value;
    return true;
}

bool addrmap_take(struct addrmap *m, uint64_t key, uint64_t *value)
{
    size_t hole = find(m, key);
    if (hole == SIZE_MAX)
        return false;
    if (value)
        *value = m->slots[hole].value;
    size_t mask = m->cap - 1;
    for (size_t i = (hole + 1) & mask; m->slots[i].key; i = (i + 1) & mask) {
        size_t h = home(m, m->slots[i].key);
        /* Move the entry back into the hole unless its home lies in (hole, i]. */
        if (((i - h) & mask) >= ((i - hole) & mask)) {
            m->slots[hole] = m->slots[i];
            hole = i;
        }
    }
    m->slots[hole].key = 0;
    m->count--;
    return true;
}

void addrmap_each(const struct addrmap *m, bool (*fn)(uint64_t key, uint64_t value, void *arg),
                  void *arg)
{
    for (size_t i = 0; i < m->cap; i++)
        if (m->slots[i].key && !fn(m->slots[i].key, m->slots[i].value, arg))
            return;
}
