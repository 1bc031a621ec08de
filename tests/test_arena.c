/* The arena against a reference model: random operations over several
 * ranges, checking after each step that no two live blocks overlap, every
 * byte is either live or free, free neighbours are always merged, and every
 * live block can be found by its address. */
#include "../src/alloc/arena.h"
#include "check.h"

#define RANGES 3
#define MAX_LIVE 4096

static const uint64_t range_base[RANGES] = {1ull << 40, 1ull << 41, (1ull << 41) + (64ull << 30)};
static const uint64_t range_size[RANGES] = {1ull << 30, 256ull << 20, 3ull << 30};
static arena_block first[RANGES];

struct live {
    arena_block b;
    uint64_t off, size;
};
static struct live live[MAX_LIVE];
static int nlive;
static uint64_t rng = 88172645463325252ull;

static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* The bin of a free block of `size` bytes, as arena.h defines it: sizes
 * [2^m, 2^(m+1)) granules in 32 steps, below 32 granules one bin each. */
static uint32_t expected_bin(uint64_t size)
{
    uint64_t g = size / ARENA_GRANULE;
    if (g < ARENA_SL_COUNT)
        return (uint32_t)g;
    unsigned m = 63u - (unsigned)__builtin_clzll(g);
    return (m - ARENA_SL_SHIFT + 1) * ARENA_SL_COUNT +
           (uint32_t)((g >> (m - ARENA_SL_SHIFT)) - ARENA_SL_COUNT);
}

/* Every free block is in the list of its size's bin, the lists are
 * well linked, and the bitmaps say exactly which bins have blocks. */
static uint64_t check_bins(const struct arena *a)
{
    uint64_t listed = 0;
    for (uint32_t bin = 0; bin < ARENA_FL_COUNT * ARENA_SL_COUNT; bin++) {
        uint32_t fl = bin / ARENA_SL_COUNT, sl = bin % ARENA_SL_COUNT;
        bool marked = (a->sl_map[fl] >> sl) & 1;
        CHECK(marked == (a->bins[bin] != ARENA_NONE));
        CHECK(((a->fl_map >> fl) & 1) == (a->sl_map[fl] != 0));
        arena_block prev = ARENA_NONE;
        for (arena_block b = a->bins[bin]; b != ARENA_NONE; prev = b, b = a->nodes[b].bin.next) {
            CHECK(arena_is_free(a, b));
            CHECK(expected_bin(arena_size(a, b)) == bin);
            CHECK(a->nodes[b].bin.prev == prev);
            listed += arena_size(a, b);
        }
    }
    return listed;
}

/* Walks every range from its first block: blocks must tile it exactly. */
static void check_tiling(const struct arena *a)
{
    uint64_t free_total = 0, live_total = 0;
    for (int r = 0; r < RANGES; r++) {
        uint64_t at = range_base[r];
        int prev_free = 0;
        arena_block b = a->nodes[first[r]].next_phys, prev = first[r];
        CHECK(a->nodes[first[r]].off == at && arena_size(a, first[r]) == 0); /* the range's handle */
        for (; b != ARENA_NONE; prev = b, b = a->nodes[b].next_phys) {
            const struct arena_node *n = &a->nodes[b];
            CHECK(n->off == at);
            CHECK(n->prev_phys == prev);
            CHECK(arena_size(a, b) > 0 && arena_size(a, b) % ARENA_GRANULE == 0);
            int is_free = arena_is_free(a, b);
            CHECK(!(is_free && prev_free)); /* free neighbours are merged */
            if (is_free)
                free_total += arena_size(a, b);
            else
                live_total += arena_size(a, b);
            prev_free = is_free;
            at += arena_size(a, b);
        }
        CHECK(at == range_base[r] + range_size[r]);
    }
    uint64_t model_live = 0;
    for (int i = 0; i < nlive; i++)
        model_live += live[i].size;
    CHECK(live_total == model_live);
    CHECK(free_total == a->free_bytes);
    CHECK(check_bins(a) == free_total); /* every free block listed, once */
}

static void check_live(const struct arena *a)
{
    for (int i = 0; i < nlive; i++) {
        CHECK(arena_find(a, live[i].off) == live[i].b);
        CHECK(arena_offset(a, live[i].b) % ARENA_GRANULE == 0);
        int inside = 0;
        for (int r = 0; r < RANGES; r++)
            inside |= live[i].off >= range_base[r] &&
                      live[i].off + live[i].size <= range_base[r] + range_size[r];
        CHECK(inside);
        for (int j = i + 1; j < nlive; j++)
            CHECK(live[i].off + live[i].size <= live[j].off ||
                  live[j].off + live[j].size <= live[i].off);
    }
}

static void randomized(void)
{
    struct arena a;
    CHECK(arena_init(&a) == 0);
    for (int r = 0; r < RANGES; r++)
        CHECK((first[r] = arena_add(&a, range_base[r], range_size[r])) != ARENA_NONE);
    for (int step = 0; step < 40000; step++) {
        int alloc = nlive == 0 || (nlive < MAX_LIVE && next() % 100 < 55);
        if (alloc) {
            /* log-uniform from 256 B to 512 MiB */
            uint64_t size = ARENA_GRANULE << (next() % 22);
            size += (next() % (size / ARENA_GRANULE)) * ARENA_GRANULE;
            arena_block b = arena_alloc(&a, size);
            if (b == ARENA_NONE) {
                CHECK(arena_largest_free(&a) < size); /* refused only if nothing fits */
                continue;
            }
            CHECK(arena_size(&a, b) == size);
            live[nlive++] = (struct live){b, arena_offset(&a, b), size};
        } else {
            int i = (int)(next() % (uint64_t)nlive);
            arena_block b = arena_take(&a, live[i].off);
            CHECK(b == live[i].b);
            CHECK(arena_find(&a, live[i].off) == ARENA_NONE);
            arena_free(&a, b);
            live[i] = live[--nlive];
        }
        if (step % 97 == 0) {
            check_tiling(&a);
            check_live(&a);
        }
    }
    while (nlive) {
        arena_block b = arena_take(&a, live[nlive - 1].off);
        arena_free(&a, b);
        nlive--;
    }
    check_tiling(&a);
    for (int r = 0; r < RANGES; r++)
        CHECK(arena_range_is_free(&a, first[r], range_size[r]));
    arena_destroy(&a);
}

static void edges(void)
{
    struct arena a;
    CHECK(arena_init(&a) == 0);
    uint64_t base = 1ull << 40, size = 16 * MiB;
    arena_block r = arena_add(&a, base, size);
    /* The whole range in one block, then nothing is left. */
    arena_block all = arena_alloc(&a, size);
    CHECK(all != ARENA_NONE && arena_offset(&a, all) == base);
    CHECK(arena_alloc(&a, ARENA_GRANULE) == ARENA_NONE);
    arena_free(&a, arena_take(&a, base));
    CHECK(arena_range_is_free(&a, r, size));
    /* Too large never fits. */
    CHECK(arena_alloc(&a, size + ARENA_GRANULE) == ARENA_NONE);
    /* Three neighbours freed middle-first, then last, then first merge back. */
    arena_block x = arena_alloc(&a, MiB), y = arena_alloc(&a, MiB), z = arena_alloc(&a, MiB);
    CHECK(arena_offset(&a, y) == arena_offset(&a, x) + MiB);
    CHECK(arena_offset(&a, z) == arena_offset(&a, y) + MiB);
    arena_free(&a, arena_take(&a, arena_offset(&a, y)));
    CHECK(arena_largest_free(&a) == size - 3 * MiB);
    arena_free(&a, arena_take(&a, arena_offset(&a, z)));
    CHECK(arena_largest_free(&a) == size - MiB); /* y + z + tail merged; only x is live */
    arena_free(&a, arena_take(&a, base));
    CHECK(arena_range_is_free(&a, r, size));
    /* The smallest block, and a free block exactly the size asked. */
    arena_block s = arena_alloc(&a, ARENA_GRANULE);
    CHECK(arena_size(&a, s) == ARENA_GRANULE);
    arena_block t = arena_alloc(&a, size - ARENA_GRANULE);
    CHECK(t != ARENA_NONE && a.free_bytes == 0);
    arena_free(&a, arena_take(&a, arena_offset(&a, s)));
    CHECK(arena_alloc(&a, ARENA_GRANULE) == s);
    CHECK(arena_take(&a, base + 1) == ARENA_NONE); /* not a block start */
    /* A range can be removed once free, and then nothing is left. */
    arena_free(&a, arena_take(&a, base));
    arena_free(&a, arena_take(&a, base + ARENA_GRANULE));
    CHECK(arena_range_is_free(&a, r, size));
    arena_remove_range(&a, r);
    CHECK(a.free_bytes == 0 && arena_alloc(&a, ARENA_GRANULE) == ARENA_NONE);
    arena_destroy(&a);
}

int main(void)
{
    edges();
    randomized();
    return 0;
}
