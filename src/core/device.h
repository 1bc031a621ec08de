/* device: the physical devices vram sees and the logical devices it offers.
 *
 * At first use the configuration is frozen: the driver is loaded, the
 * visible physical devices are chosen and ordered, and each becomes one
 * logical device with its limit, or several if it is split into virtual
 * devices. Each logical device owns a heap whose backend is the driver,
 * called in the physical device's primary context.
 */
#ifndef VRAM_DEVICE_H
#define VRAM_DEVICE_H

#include "../alloc/heap.h"
#include "../cuda/driver.h"
#include "../../include/vram.h"
#include "options.h"

#include <stdatomic.h>
#include <stdbool.h>

struct physical_device {
    struct cuda_driver *cu;
    int ordinal; /* the driver's */
    CUdevice dev;
    CUcontext ctx; /* primary context, retained */
    char name[128];
    char uuid[48];
    uint64_t total;
    int first_logical, nlogical;
    _Atomic bool stopped; /* vramd does not take the budget back: the heaps grow no more */
};

struct logical_device {
    int index;
    struct physical_device *phys;
    int virtual_index;
    uint64_t limit;
    bool limit_configured; /* false: the device's total, nothing asked */
    /* What set the limit, for messages: VRAM_VIRTUAL_DEVICES="0:2GiB,2GiB",
     * vram_set_memory_limit(0, ...), "vramd's grant"; "" for none. */
    char limit_origin[96];
    struct heap heap;
};

struct device_table {
    bool ready;
    struct cuda_driver cu;
    struct physical_device *phys;
    int nphys;
    struct logical_device *logical;
    int nlogical;
};

/* Loads the driver and builds the table from the two layers of settings.
 * With `use_daemon` and vramd running, each physical device's limit is
 * what the daemon grants (the configured limit is what is asked for).
 * VRAM_OK, or a status with the message recorded. */
vram_status devices_open(struct device_table *t, const struct options *call,
                         const struct options *env, bool growth, bool use_daemon);
void devices_close(struct device_table *t);

/* Free and total memory of a physical device as the driver reports them. */
vram_status devices_driver_meminfo(struct device_table *t, struct physical_device *p,
                                   uint64_t *free_bytes, uint64_t *total);

#endif
