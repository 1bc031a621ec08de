/* addrmap: a hash map from a device address to a 64-bit value.
 *
 * Used wherever vram must find what it knows about a pointer a caller hands
 * back (the heap's live blocks, the simulated driver's allocations). Open
 * addressing with linear probing and backward-shift deletion: no
 * tombstones, so a long-running process never degrades. Key 0 is reserved
 * (no device allocation lives at address 0). Not thread-safe.
 */
#ifndef VRAM_ADDRMAP_H
#define VRAM_ADDRMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct addrmap_slot {
    uint64_t key, value;
};

struct addrmap {
    struct addrmap_slot *slots;
    size_t cap, count; /* cap is a power of two */
    unsigned shift;
};

void addrmap_init(struct addrmap *m);
void addrmap_destroy(struct addrmap *m);
/* 0, or -1 when host memory ran out. The key must not be present. */
int addrmap_put(struct addrmap *m, uint64_t key, uint64_t value);
bool addrmap_get(const struct addrmap *m, uint64_t key, uint64_t *value);
/* Removes the key; false if it was not there. */
bool addrmap_take(struct addrmap *m, uint64_t key, uint64_t *value);
/* Calls fn for every entry until it returns false. */
void addrmap_each(const struct addrmap *m, bool (*fn)(uint64_t key, uint64_t value, void *arg),
                  void *arg);

#endif
