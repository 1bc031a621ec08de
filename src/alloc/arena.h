/* arena: offset bookkeeping for device memory, kept entirely in host memory.
 *
 * An arena hands out [offset, offset+size) ranges from the address ranges it
 * was given (the regions a heap obtained from the driver). It never touches
 * the memory it manages: device memory cannot be dereferenced from the host,
 * and keeping headers out of the managed range is also what makes it fast
 * (no page walks over a huge mapping; see offset-baseline.md).
 *
 * Algorithm: two-level segregated fit. Free blocks sit in 64 x 32 bins
 * (first level: power of two; second level: 32 linear steps within it), and
 * two bitmaps find a non-empty bin whose every block fits in O(1). Blocks
 * know their physical neighbours, so a free merges with free neighbours in
 * O(1). Ranges added separately are never merged with each other: each
 * region stays returnable to the driver on its own.
 *
 * Sizes and offsets are multiples of ARENA_GRANULE. Not thread-safe: the
 * heap above it holds the lock.
 */
#ifndef VRAM_ARENA_H
#define VRAM_ARENA_H

#include <stdbool.h>
#include <stdint.h>

#define ARENA_GRANULE_SHIFT 8
#define ARENA_GRANULE ((uint64_t)1 << ARENA_GRANULE_SHIFT) /* 256 B, CUDA's alignment */
#define ARENA_SL_SHIFT 5
#define ARENA_SL_COUNT (1u << ARENA_SL_SHIFT)
#define ARENA_FL_COUNT 64
#define ARENA_NONE UINT32_MAX

typedef uint32_t arena_block;

/* 32 bytes, two to a cache line: the node is what every operation touches. */
struct arena_node {
    uint64_t off;
    uint64_t size_free;               /* size | 1 when free (sizes are multiples of 256) */
    arena_block prev_phys, next_phys; /* neighbours in the same range */
    arena_block prev_free, next_free; /* bin list; next_free also chains unused nodes */
};

/* The live blocks by offset, so that a caller holding only an address can
 * free it. Each slot is (hash << 32 | block): probing and deletion compare
 * and move slots without touching nodes, and 8-byte slots keep the table of
 * a few thousand live blocks inside the L1 cache. */
struct arena_index {
    uint64_t *slots;
    uint32_t cap, count;
    unsigned shift;
};

struct arena {
    struct arena_node *nodes;
    uint32_t node_cap, node_used;
    arena_block unused; /* recycled nodes */
    uint64_t fl_map;
    uint32_t sl_map[ARENA_FL_COUNT];
    arena_block bins[ARENA_FL_COUNT * ARENA_SL_COUNT];
    uint64_t free_bytes;
    struct arena_index live;
};

int arena_init(struct arena *a);
void arena_destroy(struct arena *a);

/* Adds [off, off+size) as one free range. Returns its block, or ARENA_NONE
 * when host memory for the bookkeeping ran out. */
arena_block arena_add(struct arena *a, uint64_t off, uint64_t size);

/* Takes a block of exactly `size` bytes (a non-zero multiple of the
 * granule). ARENA_NONE if no free block is large enough (or no host memory
 * is left for the bookkeeping). */
arena_block arena_alloc(struct arena *a, uint64_t size);

/* Live blocks are indexed by offset from arena_alloc on, so that a caller
 * holding only an address can find them. */

/* The live block starting at `off`, or ARENA_NONE. */
arena_block arena_find(const struct arena *a, uint64_t off);
/* Finds the live block at `off` and removes it from the index: it stays
 * allocated but can no longer be found (a free in progress). */
arena_block arena_take(struct arena *a, uint64_t off);
/* Puts a taken block back in the index (it is being reused). 0, or -1 when
 * host memory ran out. */
int arena_attach(struct arena *a, arena_block b);

/* Returns a taken block, merging it with free neighbours. */
void arena_free(struct arena *a, arena_block b);

/* True when the range whose first block is `first` is entirely free. */
bool arena_range_is_free(const struct arena *a, arena_block first, uint64_t size);

/* Forgets a range that arena_range_is_free() says is free. */
void arena_remove_range(struct arena *a, arena_block first);

/* The largest free block, in bytes (0 if none). */
uint64_t arena_largest_free(const struct arena *a);

static inline uint64_t arena_offset(const struct arena *a, arena_block b) { return a->nodes[b].off; }
static inline uint64_t arena_size(const struct arena *a, arena_block b)
{
    return a->nodes[b].size_free & ~(uint64_t)1;
}

#endif
