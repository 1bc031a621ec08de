/* The allocator's locks under contention. vram_lock takes one atomic to
 * acquire and gives the lock back with a plain store, so a waiter that went
 * to sleep must still be woken; heap_lock belongs to the first thread that
 * takes it (no atomic at all) until another thread wants it. Checked here:
 * every increment made under a lock survives (no two holders at once), the
 * first thread becomes the owner, a second thread waits for the owner to
 * leave and then both share the lock for good, and nobody sleeps forever
 * (a lost wake-up hangs the test, which ctest's timeout reports). Runs under
 * ThreadSanitizer in CI. */
#include "../src/alloc/heap_lock.h"
#include "check.h"

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#define THREADS 4
#define ROUNDS 20000

static vram_lock plain = VRAM_LOCK_INIT;
static heap_lock biased;
static uint64_t counter; /* only ever touched under the lock being tested */
static atomic_int inside;

static void nap_us(long us)
{
    struct timespec t = {0, us * 1000};
    nanosleep(&t, NULL);
}

/* The critical section: a read-modify-write that overlapping holders would
 * lose, now and then long enough (a sleep) that the others go to sleep in
 * the kernel rather than spin. */
static void critical(int round)
{
    CHECK(atomic_fetch_add(&inside, 1) == 0);
    uint64_t c = counter;
    if (round % 2000 == 0)
        nap_us(200);
    counter = c + 1;
    atomic_fetch_sub(&inside, 1);
}

static void *plain_worker(void *arg)
{
    (void)arg;
    for (int i = 0; i < ROUNDS; i++) {
        vram_lock_acquire(&plain);
        critical(i);
        vram_lock_release(&plain);
    }
    return NULL;
}

static void *biased_worker(void *arg)
{
    (void)arg;
    for (int i = 0; i < ROUNDS; i++) {
        bool owner = heap_lock_acquire(&biased);
        critical(i);
        heap_lock_release(&biased, owner);
    }
    return NULL;
}

static void run(void *(*worker)(void *))
{
    counter = 0;
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        CHECK(pthread_create(&t[i], NULL, worker, NULL) == 0);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    CHECK(counter == (uint64_t)THREADS * ROUNDS);
}

/* The owner holds the lock when a second thread asks for it: the second
 * waits until the owner leaves, and from then on the owner is one of many. */
static atomic_int owner_left, second_in;

static void *second(void *arg)
{
    (void)arg;
    bool owner = heap_lock_acquire(&biased);
    CHECK(!owner);
    CHECK(atomic_load(&owner_left)); /* not before the owner let go */
    atomic_store(&second_in, 1);
    heap_lock_release(&biased, owner);
    return NULL;
}

static void revocation(void)
{
    heap_lock_init(&biased);
    bool fence = vram_heavy_fence();
    bool owner = heap_lock_acquire(&biased);
    CHECK(owner == fence); /* biased to the first thread wherever it can be revoked */
    heap_lock_release(&biased, owner);
    CHECK(heap_lock_acquire(&biased) == fence);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, second, NULL) == 0);
    nap_us(20000);
    CHECK(!atomic_load(&second_in));
    atomic_store(&owner_left, 1);
    heap_lock_release(&biased, fence);
    pthread_join(t, NULL);
    CHECK(atomic_load(&second_in));
    owner = heap_lock_acquire(&biased);
    CHECK(!owner); /* revoked for good */
    heap_lock_release(&biased, owner);
}

int main(void)
{
    run(plain_worker);
    CHECK(atomic_load(&plain.sleepers) == 0 && atomic_load(&plain.state) == 0);
    revocation();
    run(biased_worker);
    heap_lock_init(&biased); /* a fresh lock: one thread becomes its owner, three revoke */
    run(biased_worker);
    return 0;
}
