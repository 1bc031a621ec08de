/* driver_memory: what the driver holds for this process beyond everything
 * vram charged, charged too (the part COMMAND_DRIVER, the recording's
 * family "driver").
 *
 * A GPU's driver takes memory that no call vram governs asks for: a
 * kernel's code loaded lazily at its first launch (CUDA_MODULE_LOADING=
 * LAZY, the default), a pool's reservation beyond what was charged, what a
 * library takes through the driver without an allocation call. vram reads
 * NVML's figure for this process on the device (what nvidia-smi lists)
 * and charges the difference between it and what vram charged the process
 * there; the difference is settled, up or down, at each reading:
 *   - every DRIVER_MEMORY_PERIOD_MS on a thread of its own, from the first
 *     context this process charged on a device (so NVML is never loaded
 *     for a program that makes none);
 *   - before an allocation that brings the command within
 *     DRIVER_MEMORY_MARGIN of its budget is let go (it is refused if the
 *     driver's part leaves it no room), and before a refusal is decided
 *     where the driver's part could have shrunk.
 * Far from the budget an allocation never waits for a reading. What the
 * driver holds is charged even past the budget (it is on the device
 * already); the next allocations are refused until it is back under.
 *
 * It sits below the budget (real.h has the order): it reads NVML through
 * nvml_reader.h and charges the command's state (command.h) itself, at the
 * device's entry the budget names when it resolves the device.
 *
 * The same reading sums NVML's figures for every process of the command
 * (the slots' processes and those whose parent chain leads to vram run but
 * that escaped the interposer) as the command's NVML peak, and charges
 * what the escaped ones hold to the command: the member with the lowest
 * live slot does, so that it is charged once.
 */
#ifndef VRAM_DRIVER_MEMORY_H
#define VRAM_DRIVER_MEMORY_H

#include <stdbool.h>
#include <stdint.h>

#define DRIVER_MEMORY_PERIOD_MS 100
#define DRIVER_MEMORY_MARGIN (64ull << 20)
#define DRIVER_MEMORY_MAX_DEVICES 64

/* CUDA device `dev` is counted at `entry` of the command's state (the
 * budget resolved it): its part is charged there. */
void driver_memory_account(int dev, int entry);

/* A context was charged on CUDA device `dev`: read it from now on. */
void driver_memory_watch(int dev);

/* Reads NVML for `dev` now and settles the driver's part; `pending` is
 * what the caller has reserved and not asked the driver for yet (NVML
 * cannot show it; memory the driver already holds is not pending). 1 if
 * the part went down, 0 if not, -1 when NVML cannot say (or dev is not
 * watched or not accounted). */
int driver_memory_settle(int dev, uint64_t pending);

/* This process's driver part on `dev` now. */
uint64_t driver_memory_part(int dev);

/* Around a governed call whose driver call may take more than was charged
 * before it settles (pools, graphs, contexts, modules): while one is in
 * flight in another thread, a reading does not raise the driver's part
 * (it would count what the call is about to charge). */
void driver_memory_enter(void);
void driver_memory_leave(void);

/* In a child after fork(): no reader, nothing watched. */
void driver_memory_after_fork(void);

#endif
