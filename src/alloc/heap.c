#include "heap.h"

#include "arena_fast.h"

#include <stdlib.h>
#include <string.h>

#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)
/* Everything but the common case lives out of line, so that the fast path
 * stays a short straight run of code. */
#define SLOW_PATH __attribute__((noinline, cold))

struct heap_region {
    uint64_t base, size;
    arena_block range; /* the arena's handle for it */
};

struct pending {
    arena_block block;
    void *event;
};

/* Blocks freed on one stream, oldest first. Events on one stream complete
 * in order, so only the oldest needs asking. */
struct heap_stream {
    void *stream;
    struct pending *items;
    uint32_t head, tail, cap;
};

#define REGION_ALIGN ((uint64_t)2 << 20)

static inline uint64_t round_up(uint64_t x, uint64_t to) { return (x + to - 1) & ~(to - 1); }

int heap_init(struct heap *h, uint64_t limit, bool growth, const struct heap_backend *backend)
{
    memset(h, 0, sizeof *h);
    if (arena_init(&h->arena) != 0)
        return HEAP_NO_HOST_MEMORY;
    heap_lock_init(&h->lock);
    h->backend = *backend;
    h->growth = growth;
    h->next_region = HEAP_INITIAL_REGION;
    h->st.bytes_limit = limit & ~(ARENA_GRANULE - 1);
    return HEAP_OK;
}

/* ------------------------------------------------------------- regions */

/* What the heap holds from the driver changes only here, under the lock;
 * a copy can be read without it (heap_reserved). */
static void set_reserved(struct heap *h, uint64_t bytes)
{
    h->st.bytes_reserved = bytes;
    if (bytes > h->st.peak_bytes_reserved)
        h->st.peak_bytes_reserved = bytes;
    atomic_store_explicit(&h->reserved, bytes, memory_order_relaxed);
    atomic_store_explicit(&h->peak_reserved, h->st.peak_bytes_reserved, memory_order_relaxed);
}

static bool add_region(struct heap *h, uint64_t base, uint64_t size)
{
    if (h->nregions == h->region_cap) {
        uint32_t cap = h->region_cap ? h->region_cap * 2 : 8;
        struct heap_region *r = realloc(h->regions, sizeof *r * cap);
        if (!r)
            return false;
        h->regions = r;
        h->region_cap = cap;
    }
    arena_block range = arena_add(&h->arena, base, size);
    if (range == ARENA_NONE)
        return false;
    h->regions[h->nregions++] = (struct heap_region){base, size, range};
    set_reserved(h, h->st.bytes_reserved + size);
    return true;
}

static uint64_t release_free_regions(struct heap *h)
{
    uint64_t released = 0;
    for (uint32_t i = 0; i < h->nregions;) {
        struct heap_region r = h->regions[i];
        if (!arena_range_is_free(&h->arena, r.range, r.size)) {
            i++;
            continue;
        }
        arena_remove_range(&h->arena, r.range);
        h->backend.release(h->backend.ctx, r.base, r.size);
        set_reserved(h, h->st.bytes_reserved - r.size);
        released += r.size;
        h->regions[i] = h->regions[--h->nregions];
    }
    return released;
}

/* Reserves a new region that can hold `need` bytes, within the limit.
 * Preallocation asks once for everything the limit allows; growth asks for
 * the next geometric step and halves a refused request down to `need`. */
static bool grow(struct heap *h, uint64_t need, struct heap_oom *oom)
{
    uint64_t avail = h->st.bytes_limit - h->st.bytes_reserved;
    if (need > avail)
        return false;
    uint64_t want = avail;
    if (!h->growth && h->backend.available) {
        uint64_t driver_free = h->backend.available(h->backend.ctx) & ~(REGION_ALIGN - 1);
        if (driver_free < want)
            want = driver_free > need ? driver_free : need;
    }
    if (h->growth) {
        want = round_up(need > h->next_region ? need : h->next_region, REGION_ALIGN);
        if (want > avail)
            want = avail;
    }
    uint64_t base;
    for (;;) {
        int rc = h->backend.obtain(h->backend.ctx, want, &base);
        if (rc == 0)
            break;
        if (oom) {
            oom->driver_error = rc;
            oom->driver_refused = want;
        }
        if (!h->growth || want == need)
            return false;
        uint64_t half = round_up(want / 2, ARENA_GRANULE);
        want = half > need ? half : need;
    }
    if (!add_region(h, base, want)) {
        h->backend.release(h->backend.ctx, base, want);
        return false;
    }
    if (h->growth && want >= h->next_region)
        h->next_region = want * 2;
    return true;
}

/* ------------------------------------------------------- stream frees */

static struct heap_stream *stream_slot(struct heap *h, void *stream, bool create)
{
    struct heap_stream *spare = NULL;
    for (uint32_t i = 0; i < h->nstreams; i++) {
        if (h->streams[i].stream == stream)
            return &h->streams[i];
        if (!spare && h->streams[i].head == h->streams[i].tail)
            spare = &h->streams[i];
    }
    if (!create)
        return NULL;
    if (!spare) {
        struct heap_stream *s = realloc(h->streams, sizeof *s * (h->nstreams + 1));
        if (!s)
            return NULL;
        h->streams = s;
        spare = &s[h->nstreams++];
        memset(spare, 0, sizeof *spare);
    }
    spare->stream = stream;
    spare->head = spare->tail = 0;
    return spare;
}

static bool push_pending(struct heap_stream *s, arena_block b, void *event)
{
    if (s->head > 0 && s->tail == s->cap) {
        memmove(s->items, s->items + s->head, sizeof *s->items * (s->tail - s->head));
        s->tail -= s->head;
        s->head = 0;
    }
    if (s->tail == s->cap) {
        uint32_t cap = s->cap ? s->cap * 2 : 16;
        struct pending *p = realloc(s->items, sizeof *p * cap);
        if (!p)
            return false;
        s->items = p;
        s->cap = cap;
    }
    s->items[s->tail++] = (struct pending){b, event};
    return true;
}

static void finish_pending(struct heap *h, struct pending *p)
{
    h->backend.event_release(h->backend.ctx, p->event);
    uint64_t size = arena_size(&h->arena, p->block);
    h->st.bytes_pending -= size;
    h->npending--;
    arena_free(&h->arena, p->block);
}

/* Makes blocks whose frees have completed free for every stream; with
 * `wait`, waits for all of them. */
static void drain(struct heap *h, bool wait)
{
    for (uint32_t i = 0; i < h->nstreams; i++) {
        struct heap_stream *s = &h->streams[i];
        while (s->head < s->tail) {
            struct pending *p = &s->items[s->head];
            if (wait)
                h->backend.event_wait(h->backend.ctx, p->event);
            else if (!h->backend.event_done(h->backend.ctx, p->event))
                break;
            finish_pending(h, p);
            s->head++;
        }
    }
}

/* A block freed on `stream` itself that fits `size` without wasting half of
 * it: reusable at once, because the stream runs its work in order. */
static arena_block take_own_pending(struct heap *h, void *stream, uint64_t size)
{
    struct heap_stream *s = stream_slot(h, stream, false);
    if (!s)
        return ARENA_NONE;
    uint32_t best = UINT32_MAX;
    uint64_t best_size = UINT64_MAX;
    for (uint32_t i = s->head; i < s->tail; i++) {
        uint64_t bs = arena_size(&h->arena, s->items[i].block);
        if (bs >= size && bs / 2 < size && bs < best_size) {
            best = i;
            best_size = bs;
            if (bs == size)
                break;
        }
    }
    if (best == UINT32_MAX)
        return ARENA_NONE;
    struct pending p = s->items[best];
    arena_attach(&h->arena, p.block);
    memmove(&s->items[best], &s->items[best + 1], sizeof *s->items * (s->tail - best - 1));
    s->tail--;
    h->backend.event_release(h->backend.ctx, p.event);
    h->st.bytes_pending -= best_size;
    h->npending--;
    return p.block;
}

/* ----------------------------------------------------------- allocation */

static void fill_stats(struct heap *h, struct heap_stats *out)
{
    *out = h->st;
    out->active_allocs = h->arena.live.count;
    out->largest_free_block = arena_largest_free(&h->arena);
    out->num_regions = h->nregions;
    uint64_t free_bytes = h->arena.free_bytes;
    out->fragmentation =
        free_bytes ? 1.0 - (double)out->largest_free_block / (double)free_bytes : 0.0;
}

/* Everything an allocation may need beyond a free block at hand: blocks
 * freed on streams first (one freed on this very stream is reusable at
 * once; others once their frees completed), then growing, then waiting
 * for pending frees, then giving free regions back and growing once more.
 * Growing comes before waiting: a pending free may wait on work that needs
 * this very allocation to make progress. */
SLOW_PATH static arena_block alloc_slow(struct heap *h, uint64_t rounded, void *stream,
                                        struct heap_oom *oom)
{
    arena_block b;
    if (h->npending) {
        if (stream && (b = take_own_pending(h, stream, rounded)) != ARENA_NONE)
            return b;
        drain(h, false);
        if ((b = arena_alloc(&h->arena, rounded)) != ARENA_NONE)
            return b;
    }
    if (oom) /* grow() records the driver's refusals here */
        oom->driver_error = 0, oom->driver_refused = 0;
    if (grow(h, rounded, oom) && (b = arena_alloc(&h->arena, rounded)) != ARENA_NONE)
        return b;
    if (h->npending) {
        drain(h, true);
        if ((b = arena_alloc(&h->arena, rounded)) != ARENA_NONE)
            return b;
    }
    /* Free regions may be what stands between the limit and one region
     * large enough: give them back and try once more. */
    if (release_free_regions(h) > 0) {
        h->st.num_alloc_retries++;
        if (grow(h, rounded, oom) && (b = arena_alloc(&h->arena, rounded)) != ARENA_NONE)
            return b;
    }
    return ARENA_NONE;
}

/* Counts and reports a refusal (under the lock). The report is written
 * only here: a successful allocation never touches it. */
SLOW_PATH static int refuse(struct heap *h, uint64_t size, bool valid, struct heap_oom *oom)
{
    h->st.num_ooms++;
    if (oom) {
        if (!valid)
            oom->driver_error = 0, oom->driver_refused = 0;
        uint64_t rounded = size > UINT64_MAX - ARENA_GRANULE ? 0 : round_up(size, ARENA_GRANULE);
        oom->requested = size;
        oom->rounded = rounded ? rounded : size;
        fill_stats(h, &oom->stats);
    }
    return HEAP_OUT_OF_MEMORY;
}

int heap_alloc(struct heap *h, uint64_t size, void *stream, uint64_t *addr, struct heap_oom *oom)
{
    /* Sizes from 1 to the limit (a multiple of the granule, and constant
     * after heap_init) round up within it; 0 wraps around. */
    bool valid = size - 1 < h->st.bytes_limit;
    uint64_t rounded = round_up(size, ARENA_GRANULE);
    bool owner = heap_lock_acquire(&h->lock);
    arena_block b = ARENA_NONE;
    if (likely(valid && !h->npending))
        b = arena_alloc_fast(&h->arena, rounded);
    if (unlikely(b == ARENA_NONE) &&
        (!valid || (b = alloc_slow(h, rounded, stream, oom)) == ARENA_NONE)) {
        int rc = refuse(h, size, valid, oom);
        heap_lock_release(&h->lock, owner);
        return rc;
    }
    uint64_t got = arena_size(&h->arena, b);
    *addr = arena_offset(&h->arena, b);
    /* Under the lock already, so the statistics are plain additions. */
    uint64_t in_use = h->st.bytes_in_use += got;
    if (in_use > h->st.peak_bytes_in_use)
        h->st.peak_bytes_in_use = in_use;
    if (got > h->st.largest_alloc_size)
        h->st.largest_alloc_size = got;
    h->st.num_allocs++;
    heap_lock_release(&h->lock, owner);
    return HEAP_OK;
}

/* A free ordered after the work queued on `stream` so far: the block waits
 * in the stream's queue behind an event (under the lock). */
SLOW_PATH static int free_on_stream(struct heap *h, uint64_t addr, void *stream)
{
    arena_block b = arena_take(&h->arena, addr);
    if (b == ARENA_NONE)
        return HEAP_UNKNOWN_POINTER;
    uint64_t size = arena_size(&h->arena, b);
    h->st.bytes_in_use -= size;
    void *event;
    if (h->backend.event_record(h->backend.ctx, stream, &event) == 0) {
        struct heap_stream *s = stream_slot(h, stream, true);
        if (s && push_pending(s, b, event)) {
            h->st.bytes_pending += size;
            h->npending++;
            return HEAP_OK;
        }
        /* No host memory to remember the free: wait for it instead. */
        h->backend.event_wait(h->backend.ctx, event);
        h->backend.event_release(h->backend.ctx, event);
    }
    arena_free(&h->arena, b);
    return HEAP_OK;
}

int heap_free(struct heap *h, uint64_t addr, void *stream)
{
    bool owner = heap_lock_acquire(&h->lock);
    int rc;
    if (unlikely(stream != NULL) && h->backend.event_record) {
        rc = free_on_stream(h, addr, stream);
    } else {
        uint64_t size = arena_release_fast(&h->arena, addr);
        h->st.bytes_in_use -= size; /* 0 when the address is not ours */
        rc = size ? HEAP_OK : HEAP_UNKNOWN_POINTER;
    }
    heap_lock_release(&h->lock, owner);
    return rc;
}

uint64_t heap_size_of(struct heap *h, uint64_t addr)
{
    uint64_t size = 0;
    bool owner = heap_lock_acquire(&h->lock);
    arena_block b = arena_find(&h->arena, addr);
    if (b != ARENA_NONE)
        size = arena_size(&h->arena, b);
    heap_lock_release(&h->lock, owner);
    return size;
}

void heap_stats(struct heap *h, struct heap_stats *out)
{
    bool owner = heap_lock_acquire(&h->lock);
    fill_stats(h, out);
    heap_lock_release(&h->lock, owner);
}

void heap_reserved(struct heap *h, uint64_t *reserved, uint64_t *peak)
{
    *reserved = atomic_load_explicit(&h->reserved, memory_order_relaxed);
    *peak = atomic_load_explicit(&h->peak_reserved, memory_order_relaxed);
}

void heap_reset_peaks(struct heap *h)
{
    bool owner = heap_lock_acquire(&h->lock);
    h->st.peak_bytes_in_use = h->st.bytes_in_use;
    h->st.peak_bytes_reserved = 0;
    set_reserved(h, h->st.bytes_reserved);
    h->st.largest_alloc_size = 0;
    heap_lock_release(&h->lock, owner);
}

uint64_t heap_trim(struct heap *h)
{
    bool owner = heap_lock_acquire(&h->lock);
    if (h->npending)
        drain(h, true);
    uint64_t released = release_free_regions(h);
    heap_lock_release(&h->lock, owner);
    return released;
}

void heap_destroy(struct heap *h)
{
    bool owner = heap_lock_acquire(&h->lock);
    if (h->npending)
        drain(h, true);
    for (uint32_t i = 0; i < h->nregions; i++)
        h->backend.release(h->backend.ctx, h->regions[i].base, h->regions[i].size);
    for (uint32_t i = 0; i < h->nstreams; i++)
        free(h->streams[i].items);
    free(h->streams);
    free(h->regions);
    arena_destroy(&h->arena);
    heap_lock_release(&h->lock, owner);
}
