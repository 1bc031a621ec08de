/* heap: the allocator of one logical device.
 *
 * A heap obtains regions of device memory through its backend (the driver,
 * or a fixed range in the replay benchmark), carves allocations out of them
 * with an arena, and keeps the statistics. It enforces the device's limit on
 * what it *reserves* from the driver, so the limit bounds what the process
 * holds, not just what the program uses.
 *
 * Growth: with growth on, regions grow geometrically (2 MiB, 4 MiB, ...) up
 * to the limit, halving a request the driver refuses down to what is
 * needed. With growth off, the first use reserves the whole limit as one
 * region.
 *
 * Streams: a block freed on stream S goes back at once for S (stream order
 * makes that safe) and for other streams once the work queued on S before
 * the free has completed, which the heap learns from an event recorded at
 * the free. A block freed with no stream is free for all at once.
 *
 * Out of memory: before reporting it the heap grows within the limit, then
 * waits for pending stream frees, then gives fully free regions back to the
 * driver and retries once (so that several small free regions can become
 * one large one).
 *
 * Thread-safe: one lock per heap (heap_lock.h: no atomic instruction while
 * one thread uses the heap alone); backend calls are made under it.
 */
#ifndef VRAM_HEAP_H
#define VRAM_HEAP_H

#include "arena.h"
#include "heap_lock.h"

#include <stdbool.h>
#include <stdint.h>

struct heap_backend {
    void *ctx;
    /* Reserves `size` bytes of device memory. 0, or a nonzero driver code. */
    int (*obtain)(void *ctx, uint64_t size, uint64_t *base);
    void (*release)(void *ctx, uint64_t base, uint64_t size);
    /* Optional: what the driver has free. When given, preallocation takes
     * no more than that (the limit is the device, not a number asked for). */
    uint64_t (*available)(void *ctx);
    /* Stream-ordered frees; NULL when the backend has no streams. */
    int (*event_record)(void *ctx, void *stream, void **event);
    bool (*event_done)(void *ctx, void *event);
    void (*event_wait)(void *ctx, void *event);
    void (*event_release)(void *ctx, void *event);
};

struct heap_stats {
    uint64_t bytes_in_use, peak_bytes_in_use;
    uint64_t bytes_reserved, peak_bytes_reserved;
    uint64_t bytes_limit;
    uint64_t bytes_pending;      /* freed on a stream, not yet free for all */
    uint64_t num_allocs;         /* allocations made since start */
    uint64_t active_allocs;      /* allocations live now */
    uint64_t largest_alloc_size; /* largest allocation made since the last peak reset */
    uint64_t largest_free_block;
    uint64_t num_regions;
    uint64_t num_ooms, num_alloc_retries;
    double fragmentation; /* 1 - largest free block / free bytes in the reserve */
};

/* What the heap knew when it refused an allocation. */
struct heap_oom {
    uint64_t requested, rounded;
    struct heap_stats stats;
    int driver_error; /* last refusal from the backend, 0 if it never said no */
    uint64_t driver_refused; /* the size it refused */
};

enum { HEAP_OK = 0, HEAP_OUT_OF_MEMORY = 1, HEAP_UNKNOWN_POINTER = 2, HEAP_NO_HOST_MEMORY = 3 };

#define HEAP_INITIAL_REGION ((uint64_t)2 << 20)

struct heap_stream;

struct heap {
    heap_lock lock;
    struct arena arena; /* also indexes the live allocations by address */
    struct heap_region *regions;
    uint32_t nregions, region_cap;
    struct heap_stream *streams;
    uint32_t nstreams;
    uint64_t npending;
    struct heap_backend backend;
    bool growth;
    uint64_t next_region;
    struct heap_stats st; /* under the lock */
    /* st's bytes_reserved and peak_bytes_reserved, for readers that must
     * not take the lock (heap_reserved) */
    _Atomic uint64_t reserved, peak_reserved;
};

int heap_init(struct heap *h, uint64_t limit, bool growth, const struct heap_backend *backend);
/* Releases every region; live allocations become invalid. */
void heap_destroy(struct heap *h);

/* Allocates `size` bytes (rounded up to 256) for use on `stream` (NULL: any
 * stream). On HEAP_OUT_OF_MEMORY, *oom (if given) says why. A size of 0 (or
 * one that cannot be rounded) is refused as out of memory: callers that
 * give size 0 a meaning handle it before. */
int heap_alloc(struct heap *h, uint64_t size, void *stream, uint64_t *addr, struct heap_oom *oom);
/* Frees an allocation of this heap, ordered after the work queued on
 * `stream` so far (NULL: free now). HEAP_UNKNOWN_POINTER if not ours. */
int heap_free(struct heap *h, uint64_t addr, void *stream);
/* The size of a live allocation, or 0 if it is not one of ours. */
uint64_t heap_size_of(struct heap *h, uint64_t addr);

void heap_stats(struct heap *h, struct heap_stats *out);
/* What the heap holds from the driver now and at its peak, without taking
 * the lock: for a thread that reports usage in the background (and so
 * neither waits for allocations nor takes the lock away from the thread
 * that allocates). */
void heap_reserved(struct heap *h, uint64_t *reserved, uint64_t *peak);
void heap_reset_peaks(struct heap *h);
/* Waits for pending frees and gives every fully free region back. Returns
 * the bytes released. */
uint64_t heap_trim(struct heap *h);

#endif
