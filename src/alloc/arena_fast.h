/* arena_fast: the arena's allocation and free, as inline functions.
 *
 * arena.c exports them as arena_alloc, arena_release and friends; heap.c
 * includes this file so that its fast path compiles them in place. A call
 * per operation, and the registers it saves and restores, cost a tenth of
 * an allocation here.
 *
 * Everything in here is O(1): no loop but the index's bucket chain, whose
 * expected length stays under one because the buckets double with the live
 * blocks.
 *
 * The two-way arrow between this file and arena.c is deliberate: arena.c
 * includes this file to export the fast path out of line, and the fast
 * path calls back into arena.c for the two things that happen seldom and
 * are too large to inline (growing the index and the node pool, declared
 * below). One module, split so that heap.c can inline its hot half: no
 * file but arena.c and heap.c is to include this one.
 */
#ifndef VRAM_ARENA_FAST_H
#define VRAM_ARENA_FAST_H

#include "arena.h"

#define ARENA_HOT static inline __attribute__((always_inline))
/* A condition that depends on the sizes and addresses of the workload,
 * which no branch predictor can guess: the compiler should select, not
 * branch. */
#define arena_unpredictable(x) __builtin_expect_with_probability(!!(x), 1, 0.5)

/* Out of line, in arena.c: what happens seldom. */
void arena_index_grow(struct arena *a);
arena_block arena_node_grow(struct arena *a);

ARENA_HOT unsigned arena_msb(uint64_t x) { return 63u - (unsigned)__builtin_clzll(x); }

/* Bin holding blocks of `g` granules: sizes [2^m, 2^(m+1)) are split into
 * 32 steps; sizes below 32 granules get one bin each. Without a branch:
 * below 32 the shift is 0 and the bin is g itself. */
ARENA_HOT uint32_t arena_bin_of(uint64_t g)
{
    unsigned shift = arena_msb(g | ARENA_SL_COUNT) - ARENA_SL_SHIFT;
    return (shift << ARENA_SL_SHIFT) + (uint32_t)(g >> shift);
}

ARENA_HOT uint32_t arena_bin_of_size(uint64_t size)
{
    return arena_bin_of(size >> ARENA_GRANULE_SHIFT);
}

/* ------------------------------------------------------------ live index */

ARENA_HOT uint32_t arena_bucket_of(const struct arena_index *x, uint64_t off)
{
    return (uint32_t)(((off >> ARENA_GRANULE_SHIFT) * 0x9E3779B97F4A7C15ull) >> x->shift);
}

ARENA_HOT void arena_index_put(struct arena *a, arena_block b, uint64_t off)
{
    struct arena_index *x = &a->live;
    arena_block *head = &x->buckets[arena_bucket_of(x, off)];
    a->nodes[b].next_live = *head;
    *head = b;
    /* At most one live block per two buckets: a chain rarely has a second
     * node to load, and the loop's exit is predictable. */
    if (__builtin_expect(++x->count > x->mask / 2, 0))
        arena_index_grow(a);
}

/* The link that points at the live block at `off` (ARENA_NONE at its end
 * if there is none). */
ARENA_HOT arena_block *arena_index_link(const struct arena *a, uint64_t off)
{
    arena_block *link = &a->live.buckets[arena_bucket_of(&a->live, off)];
    while (*link != ARENA_NONE && a->nodes[*link].off != off)
        link = &a->nodes[*link].next_live;
    return link;
}

ARENA_HOT arena_block arena_index_take(struct arena *a, uint64_t off)
{
    arena_block *link = arena_index_link(a, off);
    arena_block b = *link;
    if (__builtin_expect(b != ARENA_NONE, 1)) {
        *link = a->nodes[b].next_live;
        a->live.count--;
    }
    return b;
}

/* ----------------------------------------------------------------- nodes */

ARENA_HOT arena_block arena_node_new(struct arena *a)
{
    arena_block b = a->spare;
    if (__builtin_expect(b == ARENA_NONE, 0))
        return arena_node_grow(a);
    a->spare = a->nodes[b].next_spare;
    return b;
}

/* Its free flag must already be 0. */
ARENA_HOT void arena_node_recycle(struct arena *a, arena_block b)
{
    a->nodes[b].next_spare = a->spare;
    a->spare = b;
}

/* ------------------------------------------------------------------ bins */

/* Puts a free block at the head of `bin`. */
ARENA_HOT void arena_bin_push(struct arena *a, arena_block b, uint32_t bin)
{
    struct arena_node *nodes = a->nodes;
    arena_block head = a->bins[bin];
    uint32_t fl = bin / ARENA_SL_COUNT, sl = bin % ARENA_SL_COUNT;
    a->bins[bin] = b;
    a->sl_map[fl] |= 1u << sl;
    a->fl_map |= (uint64_t)1 << fl;
    nodes[b].bin.prev = ARENA_NONE;
    nodes[b].bin.next = head;
    nodes[head].bin.prev = b; /* the nil node's, when the bin was empty */
}

/* Takes a free block out of `bin`, wherever it is in the list. */
ARENA_HOT void arena_bin_unlink(struct arena *a, arena_block b, uint32_t bin)
{
    struct arena_node *nodes = a->nodes;
    arena_block prev = nodes[b].bin.prev, next = nodes[b].bin.next;
    arena_block head = a->bins[bin];
    uint32_t fl = bin / ARENA_SL_COUNT, sl = bin % ARENA_SL_COUNT;
    /* The only block of its bin: no neighbour either side (ARENA_NONE is 0). */
    uint32_t emptied = (uint32_t)((prev | next) == ARENA_NONE);
    uint32_t sl_map = a->sl_map[fl] & ~(emptied << sl);
    a->bins[bin] = arena_unpredictable(head == b) ? next : head;
    a->sl_map[fl] = sl_map;
    a->fl_map &= ~((uint64_t)(sl_map == 0) << fl);
    nodes[prev].bin.next = next;
    nodes[next].bin.prev = prev;
}

/* A free block's size changes from `old` to `size`. It ends at the head of
 * its (maybe new) bin, as if taken out and put back, but no list is touched
 * when it already heads the right one, the common case of a large block
 * that allocations are carved from and merged back into. */
ARENA_HOT void arena_bin_resize(struct arena *a, arena_block b, uint64_t old, uint64_t size)
{
    uint32_t from = arena_bin_of_size(old), to = arena_bin_of_size(size);
    a->nodes[b].size = size;
    if (from == to && a->bins[from] == b)
        return;
    arena_bin_unlink(a, b, from);
    arena_bin_push(a, b, to);
}

/* ------------------------------------------------------ allocate, free */

/* A free block of at least g granules, and its bin: the head of the bin
 * the size itself falls in if it fits (a good fit that the rounded-up
 * search would skip, which keeps fragmentation down), else the head of the
 * first non-empty bin whose every block fits. Both are worked out and one
 * chosen without a branch: which one it is depends on the sizes. */
ARENA_HOT arena_block arena_find_free(const struct arena *a, uint64_t g, uint32_t *bin_out)
{
    unsigned shift = arena_msb(g | ARENA_SL_COUNT) - ARENA_SL_SHIFT;
    uint32_t exact = (shift << ARENA_SL_SHIFT) + (uint32_t)(g >> shift);
    /* The nil node's size, 0, never fits. */
    bool fits = (a->nodes[a->bins[exact]].size >> ARENA_GRANULE_SHIFT) >= g;

    /* Rounded up to the next step unless g is one: the next bin index is
     * the next step, also across a power of two. Below ARENA_FL_COUNT *
     * ARENA_SL_COUNT for any g < 2^56. */
    uint32_t bin = exact + (uint32_t)((g >> shift << shift) != g);
    uint32_t fl = bin / ARENA_SL_COUNT;
    uint32_t same_fl = a->sl_map[fl] & (~0u << (bin % ARENA_SL_COUNT));
    uint64_t above = a->fl_map & (~(uint64_t)1 << fl);
    uint32_t up = (uint32_t)__builtin_ctzll(above | (uint64_t)1 << 63);
    uint32_t up_bin = up * ARENA_SL_COUNT + (uint32_t)__builtin_ctz(a->sl_map[up] | 1u << 31);
    uint32_t same_bin = fl * ARENA_SL_COUNT + (uint32_t)__builtin_ctz(same_fl | 1u << 31);
    bin = arena_unpredictable(same_fl) ? same_bin : up_bin;
    bin = arena_unpredictable(fits) ? exact : bin;
    *bin_out = bin;
    /* Without any fitting bin, up_bin is a bin of the last level, which
     * holds no blocks (no size reaches it): ARENA_NONE. */
    return a->bins[bin];
}

/* Takes a block of exactly `size` bytes; see arena_alloc. */
ARENA_HOT arena_block arena_alloc_fast(struct arena *a, uint64_t size)
{
    uint32_t bin;
    arena_block f = arena_find_free(a, size >> ARENA_GRANULE_SHIFT, &bin), b;
    if (__builtin_expect(f == ARENA_NONE, 0))
        return ARENA_NONE;
    struct arena_node *nodes = a->nodes;
    uint64_t have = nodes[f].size;
    a->free_bytes -= size;
    if (arena_unpredictable(have == size) ||
        __builtin_expect((b = arena_node_new(a)) == ARENA_NONE, 0)) {
        /* The whole block, or (without a node for the rest) more than asked:
         * wasteful but correct. */
        a->free_bytes -= have - size;
        arena_bin_unlink(a, f, bin);
        a->free[f] = 0;
        arena_index_put(a, f, a->nodes[f].off);
        return f;
    }
    /* The allocation is carved from the start of f in a new node; f keeps
     * the rest. */
    nodes = a->nodes; /* arena_node_new may have moved them */
    struct arena_node *fn = &nodes[f], *n = &nodes[b];
    uint64_t off = fn->off, rest = have - size;
    arena_block before = fn->prev_phys;
    n->off = off; /* field by field: a whole-struct store clears the union with rep stos */
    n->size = size;
    n->prev_phys = before;
    n->next_phys = f;
    nodes[before].next_phys = b;
    fn->prev_phys = b;
    fn->off = off + size;
    fn->size = rest;
    uint32_t to = arena_bin_of_size(rest);
    if (to != bin) { /* else f stays at the head of its bin */
        arena_bin_unlink(a, f, bin);
        arena_bin_push(a, f, to);
    }
    arena_index_put(a, b, off);
    return b;
}

/* Returns a taken block, merging it with free neighbours; see arena_free.
 * Merging keeps the node of a free neighbour: a block freed next to the
 * large free block it was carved from goes back into it without that block
 * leaving its bin. Which neighbours are free comes from the free flags, so
 * a neighbour's node is loaded only when it merges. */
ARENA_HOT void arena_free_fast(struct arena *a, arena_block b)
{
    struct arena_node *nodes = a->nodes, *n = &nodes[b];
    uint8_t *is_free = a->free;
    uint64_t size = n->size;
    arena_block prev = n->prev_phys, next = n->next_phys;
    a->free_bytes += size;
    if (is_free[next]) {
        struct arena_node *nn = &nodes[next];
        uint64_t next_size = nn->size;
        if (is_free[prev]) { /* prev takes b and next */
            struct arena_node *pn = &nodes[prev];
            arena_block after = nn->next_phys;
            arena_bin_unlink(a, next, arena_bin_of_size(next_size));
            is_free[next] = 0;
            pn->next_phys = after;
            nodes[after].prev_phys = prev;
            arena_bin_resize(a, prev, pn->size, pn->size + size + next_size);
            arena_node_recycle(a, next);
        } else { /* next takes b */
            nn->off = n->off;
            nn->prev_phys = prev;
            nodes[prev].next_phys = next;
            arena_bin_resize(a, next, next_size, next_size + size);
        }
        arena_node_recycle(a, b);
    } else if (is_free[prev]) { /* prev takes b */
        struct arena_node *pn = &nodes[prev];
        pn->next_phys = next;
        nodes[next].prev_phys = prev;
        arena_bin_resize(a, prev, pn->size, pn->size + size);
        arena_node_recycle(a, b);
    } else {
        is_free[b] = 1;
        arena_bin_push(a, b, arena_bin_of_size(size));
    }
}

/* Frees the live block at `off`; see arena_release. */
ARENA_HOT uint64_t arena_release_fast(struct arena *a, uint64_t off)
{
    arena_block b = arena_index_take(a, off);
    if (__builtin_expect(b == ARENA_NONE, 0))
        return 0;
    uint64_t size = a->nodes[b].size;
    arena_free_fast(a, b);
    return size;
}

#endif
