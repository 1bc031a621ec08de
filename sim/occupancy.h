/* occupancy: how much of each simulated device every process on the machine
 * holds, so that the simulated GPU is shared the way a real one is.
 *
 * Layout of the state directory (VRAM_SIM_DIR, default /tmp/vram-sim, mode
 * 1777 like /tmp so that every user can take part and none can touch
 * another's files; it must belong to root or to the user, since the owner
 * of a sticky directory may delete anything in it):
 *   proc-<pid>-<nonce>  one record per live process: its bytes per device.
 *                       It appears whole (written and locked before it is
 *                       linked into the directory), and its owner holds an
 *                       open-file-description lock (F_OFD_SETLK) on it for
 *                       its lifetime. A record whose lock is gone belongs to
 *                       a process that died, at any instruction, and is
 *                       ignored (and removed by whoever may remove it).
 *                       Records are 0644: readable by all, writable by the
 *                       owner only; a record counts only if it is a regular
 *                       file whose owner is the user running the process it
 *                       names.
 *                       The owner also holds a classic (POSIX) lock on one
 *                       byte past the record, OCC_PID_BYTE: the kernel tells
 *                       whoever asks (F_GETLK) which process holds it, by
 *                       its pid in the asker's own pid namespace, or 0 where
 *                       the asker cannot see it. That is the pid the record
 *                       names, to every reader, as a real driver's (R535
 *                       and later) kernel module names each of its clients
 *                       by the reader's view of its pid (pid_vnr): a
 *                       process in a container is listed on the host by its
 *                       host pid, inside its container by its container
 *                       pid, and not at all in another container (it still
 *                       holds memory of the device, which every reader
 *                       counts). The record's own pid field, the holder's
 *                       getpid(), stands in only where the lock cannot say
 *                       (the holder itself asking: a lock never conflicts
 *                       with its owner), for a reader in the holder's pid
 *                       namespace. A classic lock goes when its process
 *                       closes any descriptor of the file, so a process
 *                       never closes one of its own records it opened to
 *                       read (the simulated NVML in the process of the
 *                       simulated CUDA that made the record): records are
 *                       named proc-<pid>-<pid namespace>-<nonce>, and a
 *                       reader keeps its own process's open.
 *   limits, limits.lock  per-cgroup memory limits (R615), root's (limits.h).
 *
 * There is no lock shared between processes. A charge is first announced in
 * the process's own record with a ticket (a time), then decided against
 * what everyone holds plus the charges announced before it; a charge with
 * earlier announcements still undecided waits for them (a bakery, as in
 * Lamport's algorithm), at most a fraction of a second, after which it
 * counts them as taken. Two processes racing for the last bytes never both
 * pass (each announces before it reads), and the first to ask is served
 * first. Nothing another user does can make a process wait longer than that
 * bound.
 */
#ifndef VRAM_SIM_OCCUPANCY_H
#define VRAM_SIM_OCCUPANCY_H

#include <stdbool.h>
#include <stdint.h>

#define SIM_MAX_DEVICES 16

/* A record's contents. */
#define OCC_RECORD_MAGIC "VRAMSIM2"
#define OCC_PID_BYTE (1 << 20) /* the classic lock's byte; the OFD lock's are below */
struct occ_record {
    char magic[8];
    int64_t pid;    /* the holder's getpid() */
    uint64_t pidns; /* the inode of its pid namespace (0: unknown) */
    uint64_t used[SIM_MAX_DEVICES];
    /* A charge being decided: its device, size and ticket (when it was
     * asked for, on CLOCK_MONOTONIC, which all processes share). */
    int64_t pending_dev;
    uint64_t pending_bytes, ticket;
};

/* Opens (creating if needed) the state directory. 0, or -1 with a message
 * already printed to stderr naming the problem. */
int occ_open(void);
/* A bound beside the device's: the live processes member() accepts (this
 * one among them) hold at most `limit` of the device together. It is
 * decided in the same way as the device's own, with the same tickets, so
 * two members racing for the group's last bytes never both pass either. */
#define OCC_MAX_GROUPS 8 /* a charge's groups (more are not counted) */
struct occ_group {
    uint64_t limit;
    bool (*member)(int64_t pid, const void *arg);
    const void *arg;
};
/* Charges `bytes` to this process on physical device `dev` if every
 * process together then holds at most `total`, and each of the n groups
 * at most its limit. 0 on success, -1 if it does not fit, -2 on an I/O
 * failure. */
int occ_charge(int dev, uint64_t bytes, uint64_t total, const struct occ_group *groups, int n);
void occ_uncharge(int dev, uint64_t bytes);
/* Bytes of `dev` held by all live processes together, those this process
 * cannot see included. */
uint64_t occ_used(int dev);
/* ... by the live processes member() accepts. */
uint64_t occ_used_by(int dev, bool (*member)(int64_t pid, const void *arg), const void *arg);
/* The state directory, open (for other state of the simulated machine
 * kept beside the records), or -1 with a message printed. */
int occ_dir(void);
/* The live processes holding memory of `dev` (pid, bytes), at most max:
 * those this process can see, by their pid in its pid namespace. */
struct occ_process {
    int pid;
    uint64_t bytes;
};
int occ_processes(int dev, struct occ_process *out, int max);

/* In a child after fork(): the child is a new process with nothing charged. */
void occ_forget_after_fork(void);

#endif
