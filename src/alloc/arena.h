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
 * A block that is split or merged keeps the node of its free part: an
 * allocation carved from the start of a free block gets a new node, and the
 * rest stays where it was, in its bin when its size stays within the bin's
 * step. A stack-like program (a training step) then seldom touches a bin
 * list: the large free block it carves from and merges back into mostly
 * stays put. Bin lists end up in exactly the order that removing and
 * reinserting each changed block would give, so placement is that of plain
 * two-level segregated fit.
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
/* Node 0 is the nil node: a link to no block is 0, and reads and writes
 * through such a link land in the nil node (its size 0 is never free and
 * never fits), so the hot paths need no branch on whether a neighbour or a
 * bin's head exists. */
#define ARENA_NONE 0u

typedef uint32_t arena_block;

/* 32 bytes, two to a cache line: the node is what every operation touches. */
struct arena_node {
    uint64_t off, size;
    arena_block prev_phys, next_phys; /* neighbours in the same range; a
                                         block's prev_phys always exists (the
                                         range's handle comes first) */
    /* What the block is linked into depends on its state, and it is only
     * ever in one list: so the index costs the node no extra bytes. */
    union {
        struct {
            arena_block prev, next;
        } bin;                  /* free: its bin's list */
        arena_block next_live;  /* live: the next block in its index bucket */
        arena_block next_spare; /* unused node: the next unused one */
    };
};

/* The live blocks by offset, so that a caller holding only an address can
 * free it: a chained hash table whose chains run through the nodes
 * themselves. A free reads the block's node anyway, so a lookup usually
 * costs one bucket (4 bytes, at least two per live block) and nothing
 * else; there is no probing and no deletion loop. */
struct arena_index {
    arena_block *buckets;
    uint32_t mask, count;
    unsigned shift;
};

struct arena {
    struct arena_node *nodes;
    /* One byte per node, 1 when its block is free: a free learns whether
     * its neighbours merge from this small array, without touching their
     * nodes (and only loads a neighbour's node when it does merge). */
    uint8_t *free;
    uint32_t node_cap, node_used;
    arena_block spare; /* recycled nodes */
    uint64_t fl_map;
    uint32_t sl_map[ARENA_FL_COUNT];
    arena_block bins[ARENA_FL_COUNT * ARENA_SL_COUNT];
    uint64_t free_bytes;
    struct arena_index live;
};

int arena_init(struct arena *a);
void arena_destroy(struct arena *a);

/* Adds [off, off+size) as one free range. Returns the range's handle (a
 * node of size 0 before its first block, which never changes while the
 * range exists), or ARENA_NONE when host memory for the bookkeeping ran
 * out. */
arena_block arena_add(struct arena *a, uint64_t off, uint64_t size);

/* Takes a block of exactly `size` bytes (a non-zero multiple of the
 * granule). ARENA_NONE if no free block is large enough. Live blocks are
 * indexed by offset from here on, so that a caller holding only an address
 * can find them. Should host memory run out, the block may be larger than
 * asked (no node for the rest) and the index's chains grow longer: neither
 * makes an allocation fail. */
arena_block arena_alloc(struct arena *a, uint64_t size);

/* Frees the live block at `off` (arena_take + arena_free in one pass).
 * Returns its size, or 0 if no live block starts there. */
uint64_t arena_release(struct arena *a, uint64_t off);

/* The live block starting at `off`, or ARENA_NONE. */
arena_block arena_find(const struct arena *a, uint64_t off);
/* Finds the live block at `off` and removes it from the index: it stays
 * allocated but can no longer be found (a free in progress). */
arena_block arena_take(struct arena *a, uint64_t off);
/* Puts a taken block back in the index (it is being reused). */
void arena_attach(struct arena *a, arena_block b);

/* Returns a taken block, merging it with free neighbours. */
void arena_free(struct arena *a, arena_block b);

/* True when the range (a handle from arena_add) is entirely free. */
bool arena_range_is_free(const struct arena *a, arena_block range, uint64_t size);

/* Forgets a range that arena_range_is_free() says is free. */
void arena_remove_range(struct arena *a, arena_block range);

/* The largest free block, in bytes (0 if none). */
uint64_t arena_largest_free(const struct arena *a);

static inline uint64_t arena_offset(const struct arena *a, arena_block b) { return a->nodes[b].off; }
static inline uint64_t arena_size(const struct arena *a, arena_block b) { return a->nodes[b].size; }
static inline bool arena_is_free(const struct arena *a, arena_block b) { return a->free[b]; }

#endif
