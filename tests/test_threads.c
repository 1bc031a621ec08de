/* Many threads allocating and freeing at once: the heap's accounting stays
 * exact (everything returns to zero), no two live blocks overlap, and the
 * same holds through libvram on the simulated driver. Runs under
 * ThreadSanitizer in CI. */
#include "../src/alloc/heap.h"
#include "check.h"

#include <pthread.h>
#include <stdatomic.h>

#define THREADS 4
#define OPS 20000
#define LIVE 64

struct fake {
    atomic_uint_fast64_t used, next;
};

static int fake_obtain(void *ctx, uint64_t size, uint64_t *base)
{
    struct fake *f = ctx;
    *base = atomic_fetch_add(&f->next, size + (2 << 20));
    atomic_fetch_add(&f->used, size);
    return 0;
}

static void fake_release(void *ctx, uint64_t base, uint64_t size)
{
    (void)base;
    atomic_fetch_sub(&((struct fake *)ctx)->used, size);
}

static struct heap heap;
static atomic_int overlaps;

/* Each thread stamps its live blocks into a shared ownership table keyed by
 * granule index: two owners of one granule would mean overlap. */
#define SPAN (64ull << 20)
static _Atomic int owner[(1u << 20)];

static void stamp(uint64_t addr, uint64_t size, int from, int to)
{
    uint64_t g = (addr - (1ull << 40)) / ARENA_GRANULE;
    for (uint64_t i = g; i < g + size / ARENA_GRANULE && i < (1u << 20); i += 16) {
        int expect = from;
        if (!atomic_compare_exchange_strong(&owner[i], &expect, to))
            atomic_fetch_add(&overlaps, 1);
    }
}

static uint64_t seed_next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static void *heap_worker(void *arg)
{
    int id = (int)(intptr_t)arg + 1;
    uint64_t seed = 0x9E3779B97F4A7C15ull * (uint64_t)id, addr[LIVE], size[LIVE];
    int n = 0;
    for (int op = 0; op < OPS; op++) {
        if (n < LIVE && (n == 0 || seed_next(&seed) % 2)) {
            uint64_t s = (seed_next(&seed) % 64 + 1) * 4096;
            if (heap_alloc(&heap, s, NULL, &addr[n], NULL) == HEAP_OK) {
                size[n] = s;
                stamp(addr[n], s, 0, id);
                n++;
            }
        } else {
            int i = (int)(seed_next(&seed) % (uint64_t)n);
            stamp(addr[i], size[i], id, 0);
            CHECK(heap_free(&heap, addr[i], NULL) == HEAP_OK);
            addr[i] = addr[--n];
            size[i] = size[n];
        }
    }
    while (n--) {
        stamp(addr[n], size[n], id, 0);
        CHECK(heap_free(&heap, addr[n], NULL) == HEAP_OK);
    }
    return NULL;
}

static void heap_stress(void)
{
    static struct fake f;
    atomic_init(&f.next, 1ull << 40);
    struct heap_backend be = {.ctx = &f, .obtain = fake_obtain, .release = fake_release};
    /* One region of the whole span so that the stamp table covers it. */
    CHECK(heap_init(&heap, SPAN, false, &be) == HEAP_OK);
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, heap_worker, (void *)(intptr_t)i);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    CHECK(atomic_load(&overlaps) == 0);
    struct heap_stats s;
    heap_stats(&heap, &s);
    CHECK(s.bytes_in_use == 0);
    CHECK(s.active_allocs == 0);
    CHECK(s.num_allocs > 0);
    CHECK(s.largest_free_block == s.bytes_reserved); /* all merged back into one */
    CHECK(heap_trim(&heap) == SPAN);
    heap_stats(&heap, &s);
    CHECK(s.bytes_reserved == 0 && atomic_load(&f.used) == 0);
    heap_destroy(&heap);
}

static void *vram_worker(void *arg)
{
    uint64_t seed = 12345 + (uint64_t)(intptr_t)arg;
    void *p[16];
    int n = 0;
    for (int op = 0; op < 3000; op++) {
        if (n < 16 && (n == 0 || seed_next(&seed) % 2)) {
            size_t s = (size_t)(seed_next(&seed) % (4 * MiB)) + 1;
            CHECK_OK(vram_malloc(0, s, NULL, &p[n]));
            n++;
        } else {
            int i = (int)(seed_next(&seed) % (uint64_t)n);
            CHECK_OK(vram_free(p[i], NULL));
            p[i] = p[--n];
        }
    }
    while (n--)
        CHECK_OK(vram_free(p[n], NULL));
    return NULL;
}

static void vram_stress(void)
{
    private_gpu("4GiB");
    CHECK_OK(vram_set_allow_growth(1));
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, vram_worker, (void *)(intptr_t)i);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    vram_stats s;
    CHECK_OK(vram_get_stats(0, &s));
    CHECK(s.bytes_in_use == 0 && s.active_allocs == 0 && s.num_allocs > 0);
    uint64_t released;
    CHECK_OK(vram_trim(-1, &released));
    CHECK_OK(vram_get_stats(0, &s));
    CHECK(s.bytes_reserved == 0);
    CHECK(s.device_free == s.device_total); /* the simulated GPU got everything back */
    vram_shutdown();
}

int main(void)
{
    heap_stress();
    vram_stress();
    return 0;
}
