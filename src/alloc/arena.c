#include "arena_fast.h"

#include <stdlib.h>
#include <string.h>

#define INDEX_INITIAL 256 /* buckets */
#define NODES_INITIAL 256

/* Nodes on cache-line boundaries, two to a line: a node that straddled two
 * lines (malloc aligns to 16) would cost two misses where one does. */
static struct arena_node *nodes_alloc(uint32_t n)
{
    size_t bytes = sizeof(struct arena_node) * n;
    void *p = aligned_alloc(64, (bytes + 63) & ~(size_t)63);
    if (p)
        memset(p, 0, bytes);
    return p;
}

int arena_init(struct arena *a)
{
    memset(a, 0, sizeof *a); /* every bin empty: ARENA_NONE is 0 */
    a->node_cap = NODES_INITIAL;
    a->node_used = 1; /* node 0 is the nil node */
    a->nodes = nodes_alloc(NODES_INITIAL);
    a->free = calloc(NODES_INITIAL, 1);
    a->live = (struct arena_index){calloc(INDEX_INITIAL, sizeof *a->live.buckets),
                                   INDEX_INITIAL - 1, 0,
                                   64u - (unsigned)__builtin_ctz(INDEX_INITIAL)};
    if (!a->nodes || !a->free || !a->live.buckets) {
        arena_destroy(a);
        return -1;
    }
    return 0;
}

void arena_destroy(struct arena *a)
{
    free(a->nodes);
    free(a->free);
    free(a->live.buckets);
    a->nodes = NULL;
    a->free = NULL;
    a->live.buckets = NULL;
}

/* Doubles the buckets once the live blocks are more than half as many. When
 * host memory is short the chains just get longer. */
__attribute__((noinline, cold)) void arena_index_grow(struct arena *a)
{
    struct arena_index *x = &a->live;
    uint32_t cap = (x->mask + 1) * 2;
    arena_block *buckets = cap ? calloc(cap, sizeof *buckets) : NULL;
    if (!buckets)
        return;
    struct arena_index grown = {buckets, cap - 1, x->count, x->shift - 1};
    for (uint32_t i = 0; i <= x->mask; i++) {
        for (arena_block b = x->buckets[i], next; b != ARENA_NONE; b = next) {
            next = a->nodes[b].next_live;
            uint32_t k = arena_bucket_of(&grown, a->nodes[b].off);
            a->nodes[b].next_live = buckets[k];
            buckets[k] = b;
        }
    }
    free(x->buckets);
    *x = grown;
}

/* A node that was never used; the nodes (and their flags) double when they
 * run out. */
__attribute__((noinline)) arena_block arena_node_grow(struct arena *a)
{
    if (a->node_used == a->node_cap) {
        if (a->node_cap >= UINT32_MAX / 2)
            return ARENA_NONE;
        uint32_t cap = a->node_cap * 2;
        struct arena_node *n = nodes_alloc(cap);
        if (!n)
            return ARENA_NONE;
        memcpy(n, a->nodes, sizeof *n * a->node_cap);
        free(a->nodes);
        a->nodes = n;
        uint8_t *f = realloc(a->free, cap);
        if (!f)
            return ARENA_NONE; /* the nodes grew, which is harmless */
        memset(f + a->node_cap, 0, cap - a->node_cap);
        a->free = f;
        a->node_cap = cap;
    }
    return a->node_used++;
}

arena_block arena_add(struct arena *a, uint64_t off, uint64_t size)
{
    arena_block range = arena_node_new(a), b = arena_node_new(a);
    if (range == ARENA_NONE || b == ARENA_NONE) {
        if (range != ARENA_NONE)
            arena_node_recycle(a, range);
        return ARENA_NONE;
    }
    struct arena_node *r = &a->nodes[range], *n = &a->nodes[b];
    r->off = off;
    r->size = 0;
    r->prev_phys = ARENA_NONE;
    r->next_phys = b;
    n->off = off;
    n->size = size;
    n->prev_phys = range;
    n->next_phys = ARENA_NONE;
    a->free[b] = 1;
    arena_bin_push(a, b, arena_bin_of_size(size));
    a->free_bytes += size;
    return range;
}

bool arena_range_is_free(const struct arena *a, arena_block range, uint64_t size)
{
    arena_block b = a->nodes[range].next_phys;
    return a->free[b] && a->nodes[b].size == size;
}

void arena_remove_range(struct arena *a, arena_block range)
{
    arena_block b = a->nodes[range].next_phys;
    uint64_t size = a->nodes[b].size;
    a->free_bytes -= size;
    arena_bin_unlink(a, b, arena_bin_of_size(size));
    a->free[b] = 0;
    arena_node_recycle(a, b);
    arena_node_recycle(a, range);
}

arena_block arena_alloc(struct arena *a, uint64_t size) { return arena_alloc_fast(a, size); }

uint64_t arena_release(struct arena *a, uint64_t off) { return arena_release_fast(a, off); }

void arena_free(struct arena *a, arena_block b) { arena_free_fast(a, b); }

arena_block arena_find(const struct arena *a, uint64_t off) { return *arena_index_link(a, off); }

arena_block arena_take(struct arena *a, uint64_t off) { return arena_index_take(a, off); }

void arena_attach(struct arena *a, arena_block b) { arena_index_put(a, b, a->nodes[b].off); }

uint64_t arena_largest_free(const struct arena *a)
{
    if (!a->fl_map)
        return 0;
    uint32_t fl = arena_msb(a->fl_map);
    uint32_t sl = 31u - (uint32_t)__builtin_clz(a->sl_map[fl]);
    uint64_t best = 0;
    for (arena_block b = a->bins[fl * ARENA_SL_COUNT + sl]; b != ARENA_NONE; b = a->nodes[b].bin.next)
        if (a->nodes[b].size > best)
            best = a->nodes[b].size;
    return best;
}
