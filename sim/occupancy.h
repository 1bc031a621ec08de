/* occupancy: how much of each simulated device every process on the machine
 * holds, so that the simulated GPU is shared the way a real one is.
 *
 * Layout of the state directory (VRAM_SIM_DIR, default /tmp/vram-sim, mode
 * 1777 like /tmp so that every user can take part and none can touch
 * another's files):
 *   devices.lock        flock()ed while a process checks and changes
 *                       occupancy; any user can lock it through a read-only
 *                       descriptor, and the kernel drops the lock when its
 *                       holder dies, so no dead process can hold it.
 *   proc-<pid>-<nonce>  one record per live process: its bytes per device.
 *                       The owner holds an fcntl() write lock on it for its
 *                       lifetime. A record whose lock is gone belongs to a
 *                       process that died, at any instruction, and is
 *                       ignored (and removed by whoever may remove it).
 *                       Records are 0644: readable by all, writable by the
 *                       owner only. The liveness locks are open-file-
 *                       description locks, so any code may open a record,
 *                       even its own process's, without disturbing them.
 */
#ifndef VRAM_SIM_OCCUPANCY_H
#define VRAM_SIM_OCCUPANCY_H

#include <stdint.h>

#define SIM_MAX_DEVICES 16

/* Opens (creating if needed) the state directory. 0, or -1 with a message
 * already printed to stderr naming the problem. */
int occ_open(void);
/* Charges `bytes` to this process on `dev` if every process together then
 * holds at most `total`. 0 on success, -1 if it does not fit, -2 on an I/O
 * failure. */
int occ_charge(int dev, uint64_t bytes, uint64_t total);
void occ_uncharge(int dev, uint64_t bytes);
/* Bytes of `dev` held by all live processes together. */
uint64_t occ_used(int dev);
/* The live processes holding memory of `dev` (pid, bytes), at most max. */
struct occ_process {
    int pid;
    uint64_t bytes;
};
int occ_processes(int dev, struct occ_process *out, int max);

/* In a child after fork(): the child is a new process with nothing charged. */
void occ_forget_after_fork(void);

#endif
