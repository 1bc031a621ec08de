/* command_state: the layout of a command's shared state and the rules
 * both sides follow: vram run, which creates it and reads it at the end,
 * and the processes of the command (command.c). Internal to vram.
 *
 * One memfd, sealed against shrinking and growing (so no process can make
 * another's mapping fault), mode 0600, owned by the user who ran vram run.
 * Every field a process writes after creation is an atomic that only one
 * writer changes at a time:
 *   used[d][i], peak[d][i]  slot i's process (its threads: atomic adds), or
 *   part[p][d][i]           whoever holds slot i's lock after it died;
 *   pid[i]                  the same;
 *   device[], devices       whoever holds the registry lock;
 *   device[d].peak/refused, anyone, by compare-and-swap / add (statistics);
 *   .part_peak, .context_size, .nvml_peak
 *   record[], records       whoever reclaims a dead slot (statistics).
 *
 * Locks are open-file-description locks (F_OFD_SETLK) on single bytes of
 * the memfd, never on its contents: byte i (< COMMAND_MAX_SLOTS) is slot
 * i's liveness, byte COMMAND_MAX_SLOTS the registry's. The kernel drops an
 * OFD lock when the last reference to its open file description goes. A
 * member holds its slot's lock through a description that nothing but a
 * one-page mapping refers to: no descriptor a program could close (daemons
 * close every descriptor), and MADV_DONTFORK so that no child inherits it.
 * The lock therefore lasts exactly as long as the process's address space:
 * it goes at exit, at a crash, at SIGKILL and at exec, and at no other time.
 */
#ifndef VRAM_COMMAND_STATE_H
#define VRAM_COMMAND_STATE_H

#include "command.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define COMMAND_MAGIC "VRAMCMD"
#define COMMAND_VERSION 3
#define COMMAND_REGISTRY_BYTE COMMAND_MAX_SLOTS
/* The device entries are vramd's grants for the whole command, registered
 * by its holder (vram run, the Slurm plugin) before it started. */
#define COMMAND_GRANTED 1u
/* A device entry's flags: a process of the command could not be named in
 * NVML's list there (src/cuda/nvml_pid.h), so its driver's own part was
 * not charged. */
#define COMMAND_DEVICE_DRIVER_UNSEEN 1u

struct command_device_entry {
    char uuid[COMMAND_UUID_SIZE];
    int32_t ordinal;
    _Atomic uint32_t flags; /* COMMAND_DEVICE_*, set by any process (or) */
    uint64_t budget;
    _Atomic uint64_t peak;    /* see command_reserve() */
    _Atomic uint64_t refused; /* reservations refused */
    /* The most the command's contexts, and its modules, held at once. */
    _Atomic uint64_t part_peak[COMMAND_PARTS];
    /* What one context takes on the device, as measured (vram run's probe,
     * or the command's first process to create one); 0 while unknown. */
    _Atomic uint64_t context_size;
    /* The most NVML showed the command's processes holding at once. */
    _Atomic uint64_t nvml_peak;
};

/* What vram run measured before the command started: a context's cost on
 * each GPU the command can see, by UUID. Written before the command starts,
 * read-only after. */
struct command_probe {
    char uuid[COMMAND_UUID_SIZE];
    uint64_t context_size;
};

struct command_record {
    _Atomic int32_t pid; /* stored last: 0 while the record is being written */
    uint32_t reserved_;
    uint64_t peak[COMMAND_MAX_DEVICES];
};

struct command_shared {
    char magic[8];
    uint32_t version, mode;
    uint64_t size;
    unsigned char id[16];
    int32_t supervisor;
    uint32_t flags; /* COMMAND_GRANTED; set before the command starts */
    char limit_var[32], limit_value[224];
    _Atomic uint32_t devices; /* device[0, devices) are registered */
    _Atomic uint32_t slots;   /* slots [0, slots) were claimed at some time */
    _Atomic uint32_t records; /* record[] entries taken */
    _Atomic uint32_t records_lost;
    uint32_t probes, reserved2_;
    struct command_probe probe[COMMAND_MAX_DEVICES];
    struct command_device_entry device[COMMAND_MAX_DEVICES];
    _Alignas(64) _Atomic int32_t pid[COMMAND_MAX_SLOTS]; /* 0 free; <0 being reclaimed */
    _Alignas(64) _Atomic uint64_t used[COMMAND_MAX_DEVICES][COMMAND_MAX_SLOTS];
    _Alignas(64) _Atomic uint64_t peak[COMMAND_MAX_DEVICES][COMMAND_MAX_SLOTS];
    /* The parts of used[][] that are contexts and modules (never on the
     * allocation path: only where contexts and modules come and go). */
    _Alignas(64) _Atomic uint64_t part[COMMAND_PARTS][COMMAND_MAX_DEVICES][COMMAND_MAX_SLOTS];
    struct command_record record[COMMAND_MAX_RECORDS];
};

/* An OFD lock on one byte of the state; `wait` blocks (EINTR retried). */
int command_lock_byte(int fd, int byte, short type, bool wait);

/* The command's id as text (32 hex digits) and back. */
void command_id_text(const unsigned char id[16], char out[33]);
int command_id_parse(const char *s, unsigned char id[16]);

/* Opens /proc/PID/FD and checks it is the state of the command `id`: a
 * sealed memfd of this user with the right header. The descriptor (a new
 * open file description), or -1 with the reason in why. */
int command_state_open(int pid, int fd, const unsigned char id[16], char *why, size_t n);

/* Whether slot i's process is alive (its lock is held: by it, or by whoever
 * is claiming or reclaiming the slot right now), tested through `fd`
 * without taking the lock: a reader's view never changes the state. True
 * where it cannot tell. */
bool command_slot_alive(int fd, int i);
/* Nothing charged on any device in slot i. */
bool command_slot_clean(struct command_shared *s, int i);
/* Clears dead slot i (its lock held by the caller), recording what its
 * process used for the summary. */
void command_reclaim(struct command_shared *s, int i);
/* Reclaims every dead slot but `own`, testing liveness through `fd`;
 * returns how many. Callers in one process must be serialised: OFD locks
 * do not exclude their own description. */
int command_sweep(struct command_shared *s, int fd, int own);

#endif
