#include "arena.h"

#include <stdlib.h>
#include <string.h>

#define FREE_BIT ((uint64_t)1)
#define SLOT_EMPTY UINT64_MAX

static inline unsigned msb64(uint64_t x) { return 63u - (unsigned)__builtin_clzll(x); }

/* Bin holding blocks of `g` granules: sizes [2^m, 2^(m+1)) are split into
 * 32 steps; sizes below 32 granules get one bin each. */
static inline uint32_t bin_of(uint64_t g)
{
    if (g < ARENA_SL_COUNT)
        return (uint32_t)g;
    unsigned m = msb64(g);
    uint32_t fl = m - (ARENA_SL_SHIFT - 1);
    uint32_t sl = (uint32_t)(g >> (m - ARENA_SL_SHIFT)) - ARENA_SL_COUNT;
    return fl * ARENA_SL_COUNT + sl;
}

/* First bin whose every block holds at least `g` granules. */
static inline uint32_t bin_fitting(uint64_t g)
{
    if (g >= ARENA_SL_COUNT)
        g += ((uint64_t)1 << (msb64(g) - ARENA_SL_SHIFT)) - 1;
    return bin_of(g);
}

static inline uint64_t node_size(const struct arena_node *n) { return n->size_free & ~FREE_BIT; }
static inline bool node_free(const struct arena_node *n) { return n->size_free & FREE_BIT; }

/* ------------------------------------------------------------ live index */

static inline uint32_t hash_of(uint64_t off)
{
    return (uint32_t)(((off >> ARENA_GRANULE_SHIFT) * 0x9E3779B97F4A7C15ull) >> 32);
}

static int index_grow(struct arena_index *x)
{
    uint32_t cap = x->cap ? x->cap * 2 : 1024;
    uint64_t *slots = malloc(sizeof *slots * cap);
    if (!slots)
        return -1;
    memset(slots, 0xff, sizeof *slots * cap);
    unsigned shift = 32u - (unsigned)__builtin_ctz(cap);
    for (uint32_t i = 0; i < x->cap; i++) {
        uint64_t s = x->slots[i];
        if (s == SLOT_EMPTY)
            continue;
        uint32_t j = (uint32_t)(s >> 32) >> shift;
        while (slots[j] != SLOT_EMPTY)
            j = (j + 1) & (cap - 1);
        slots[j] = s;
    }
    free(x->slots);
    x->slots = slots;
    x->cap = cap;
    x->shift = shift;
    return 0;
}

static inline void index_put(struct arena_index *x, uint64_t off, arena_block b)
{
    uint32_t h = hash_of(off), mask = x->cap - 1;
    uint32_t i = h >> x->shift;
    while (x->slots[i] != SLOT_EMPTY)
        i = (i + 1) & mask;
    x->slots[i] = (uint64_t)h << 32 | b;
    x->count++;
}

static inline uint32_t index_find(const struct arena *a, uint64_t off)
{
    const struct arena_index *x = &a->live;
    if (!x->cap)
        return UINT32_MAX;
    uint32_t h = hash_of(off), mask = x->cap - 1;
    for (uint32_t i = h >> x->shift;; i = (i + 1) & mask) {
        uint64_t s = x->slots[i];
        if (s == SLOT_EMPTY)
            return UINT32_MAX;
        if ((uint32_t)(s >> 32) == h && a->nodes[(uint32_t)s].off == off)
            return i;
    }
}

/* Backward-shift deletion: no tombstones, so probes stay short forever. */
static inline void index_remove_at(struct arena_index *x, uint32_t hole)
{
    uint32_t mask = x->cap - 1;
    for (uint32_t i = (hole + 1) & mask; x->slots[i] != SLOT_EMPTY; i = (i + 1) & mask) {
        uint32_t home = (uint32_t)(x->slots[i] >> 32) >> x->shift;
        if (((i - home) & mask) >= ((i - hole) & mask)) {
            x->slots[hole] = x->slots[i];
            hole = i;
        }
    }
    x->slots[hole] = SLOT_EMPTY;
    x->count--;
}

/* ------------------------------------------------------------------ bins */

int arena_init(struct arena *a)
{
    memset(a, 0, sizeof *a);
    for (size_t i = 0; i < sizeof a->bins / sizeof *a->bins; i++)
        a->bins[i] = ARENA_NONE;
    a->unused = ARENA_NONE;
    a->node_cap = 256;
    a->nodes = malloc(sizeof *a->nodes * a->node_cap);
    if (!a->nodes || index_grow(&a->live) != 0) {
        free(a->nodes);
        return -1;
    }
    return 0;
}

void arena_destroy(struct arena *a)
{
    free(a->nodes);
    free(a->live.slots);
    a->nodes = NULL;
    a->live.slots = NULL;
}

static arena_block node_new(struct arena *a)
{
    if (a->unused != ARENA_NONE) {
        arena_block b = a->unused;
        a->unused = a->nodes[b].next_free;
        return b;
    }
    if (a->node_used == a->node_cap) {
        if (a->node_cap >= ARENA_NONE / 2)
            return ARENA_NONE;
        struct arena_node *n = realloc(a->nodes, sizeof *n * a->node_cap * 2);
        if (!n)
            return ARENA_NONE;
        a->nodes = n;
        a->node_cap *= 2;
    }
    return a->node_used++;
}

static inline void node_recycle(struct arena *a, arena_block b)
{
    a->nodes[b].next_free = a->unused;
    a->unused = b;
}

static inline void bin_insert(struct arena *a, arena_block b, uint64_t size)
{
    struct arena_node *n = &a->nodes[b];
    uint32_t bin = bin_of(size >> ARENA_GRANULE_SHIFT);
    arena_block head = a->bins[bin];
    n->size_free = size | FREE_BIT;
    n->prev_free = ARENA_NONE;
    n->next_free = head;
    if (head != ARENA_NONE)
        a->nodes[head].prev_free = b;
    a->bins[bin] = b;
    a->fl_map |= (uint64_t)1 << (bin / ARENA_SL_COUNT);
    a->sl_map[bin / ARENA_SL_COUNT] |= 1u << (bin % ARENA_SL_COUNT);
    a->free_bytes += size;
}

static inline void bin_remove(struct arena *a, arena_block b)
{
    struct arena_node *n = &a->nodes[b];
    uint64_t size = node_size(n);
    if (n->prev_free != ARENA_NONE) {
        a->nodes[n->prev_free].next_free = n->next_free;
    } else {
        uint32_t bin = bin_of(size >> ARENA_GRANULE_SHIFT);
        a->bins[bin] = n->next_free;
        if (n->next_free == ARENA_NONE) {
            uint32_t fl = bin / ARENA_SL_COUNT;
            a->sl_map[fl] &= ~(1u << (bin % ARENA_SL_COUNT));
            if (!a->sl_map[fl])
                a->fl_map &= ~((uint64_t)1 << fl);
        }
    }
    if (n->next_free != ARENA_NONE)
        a->nodes[n->next_free].prev_free = n->prev_free;
    n->size_free = size;
    a->free_bytes -= size;
}

arena_block arena_add(struct arena *a, uint64_t off, uint64_t size)
{
    arena_block b = node_new(a);
    if (b == ARENA_NONE)
        return ARENA_NONE;
    struct arena_node *n = &a->nodes[b];
    n->off = off;
    n->prev_phys = n->next_phys = ARENA_NONE;
    bin_insert(a, b, size);
    return b;
}

/* A free block of at least g granules: first a look at the head of the bin
 * the size itself falls in (a good fit that the rounded-up search would
 * skip, which keeps fragmentation down), then the first non-empty bin
 * whose every block fits. */
static inline arena_block find_free(const struct arena *a, uint64_t g)
{
    uint32_t exact = bin_of(g);
    arena_block b = a->bins[exact];
    if (b != ARENA_NONE && (a->nodes[b].size_free >> ARENA_GRANULE_SHIFT) >= g)
        return b;
    uint32_t bin = bin_fitting(g);
    uint32_t fl = bin / ARENA_SL_COUNT;
    if (fl >= ARENA_FL_COUNT)
        return ARENA_NONE;
    uint32_t sl_map = a->sl_map[fl] & (~0u << (bin % ARENA_SL_COUNT));
    if (!sl_map) {
        uint64_t fl_map = fl + 1 < ARENA_FL_COUNT ? a->fl_map & (~(uint64_t)0 << (fl + 1)) : 0;
        if (!fl_map)
            return ARENA_NONE;
        fl = (uint32_t)__builtin_ctzll(fl_map);
        sl_map = a->sl_map[fl];
    }
    return a->bins[fl * ARENA_SL_COUNT + (uint32_t)__builtin_ctz(sl_map)];
}

arena_block arena_alloc(struct arena *a, uint64_t size)
{
    if ((a->live.count + 1) * 2 > a->live.cap && index_grow(&a->live) != 0)
        return ARENA_NONE;
    arena_block b = find_free(a, size >> ARENA_GRANULE_SHIFT);
    if (b == ARENA_NONE)
        return ARENA_NONE;
    bin_remove(a, b);
    uint64_t have = node_size(&a->nodes[b]);
    if (have > size) {
        /* The block keeps its start (so a range's first block never changes)
         * and the tail goes back as a free block. Without a node for the
         * tail, the whole block is handed out: wasteful but correct. */
        arena_block t = node_new(a);
        if (t != ARENA_NONE) {
            struct arena_node *n = &a->nodes[b]; /* node_new may have moved nodes */
            struct arena_node *tn = &a->nodes[t];
            tn->off = n->off + size;
            tn->prev_phys = b;
            tn->next_phys = n->next_phys;
            if (n->next_phys != ARENA_NONE)
                a->nodes[n->next_phys].prev_phys = t;
            n->next_phys = t;
            n->size_free = size;
            bin_insert(a, t, have - size);
        }
    }
    index_put(&a->live, a->nodes[b].off, b);
    return b;
}

arena_block arena_find(const struct arena *a, uint64_t off)
{
    uint32_t i = index_find(a, off);
    return i == UINT32_MAX ? ARENA_NONE : (arena_block)a->live.slots[i];
}

arena_block arena_take(struct arena *a, uint64_t off)
{
    uint32_t i = index_find(a, off);
    if (i == UINT32_MAX)
        return ARENA_NONE;
    arena_block b = (arena_block)a->live.slots[i];
    index_remove_at(&a->live, i);
    return b;
}

int arena_attach(struct arena *a, arena_block b)
{
    if ((a->live.count + 1) * 2 > a->live.cap && index_grow(&a->live) != 0)
        return -1;
    index_put(&a->live, a->nodes[b].off, b);
    return 0;
}

void arena_free(struct arena *a, arena_block b)
{
    struct arena_node *n = &a->nodes[b];
    uint64_t size = node_size(n);
    arena_block next = n->next_phys;
    if (next != ARENA_NONE && node_free(&a->nodes[next])) {
        struct arena_node *nn = &a->nodes[next];
        bin_remove(a, next);
        size += node_size(nn);
        n->next_phys = nn->next_phys;
        if (nn->next_phys != ARENA_NONE)
            a->nodes[nn->next_phys].prev_phys = b;
        node_recycle(a, next);
    }
    arena_block prev = n->prev_phys;
    if (prev != ARENA_NONE && node_free(&a->nodes[prev])) {
        struct arena_node *pn = &a->nodes[prev];
        bin_remove(a, prev);
        size += node_size(pn);
        pn->next_phys = n->next_phys;
        if (n->next_phys != ARENA_NONE)
            a->nodes[n->next_phys].prev_phys = prev;
        node_recycle(a, b);
        b = prev;
    }
    bin_insert(a, b, size);
}

bool arena_range_is_free(const struct arena *a, arena_block first, uint64_t size)
{
    const struct arena_node *n = &a->nodes[first];
    return node_free(n) && node_size(n) == size;
}

void arena_remove_range(struct arena *a, arena_block first)
{
    bin_remove(a, first);
    node_recycle(a, first);
}

uint64_t arena_largest_free(const struct arena *a)
{
    if (!a->fl_map)
        return 0;
    uint32_t fl = msb64(a->fl_map);
    uint32_t sl = 31u - (uint32_t)__builtin_clz(a->sl_map[fl]);
    uint64_t best = 0;
    for (arena_block b = a->bins[fl * ARENA_SL_COUNT + sl]; b != ARENA_NONE; b = a->nodes[b].next_free)
        if (node_size(&a->nodes[b]) > best)
            best = node_size(&a->nodes[b]);
    return best;
}
