/* recorder: a process's GPU memory events, kept at little cost to the
 * calls that make them.
 *
 * The interposer's hooks call one record_* function per event (below);
 * each is one relaxed load and a branch when nothing is recorded. When
 * recording, the event goes into the calling thread's own buffer (no lock,
 * no system call but the vDSO clock); a full buffer is handed to a writer
 * thread, which appends it to this process's file as one block, and every
 * 100 ms also writes what the threads have buffered so far. So memory is
 * bounded (one buffer per recording thread, at most RECORDER_QUEUE full ones
 * waiting; a thread that fills one more waits for the writer), and a
 * process killed at any instruction loses only what the writer had not
 * yet written (its last 100 ms of events, more only while a slow disk
 * keeps full buffers waiting), never what is already in the file: blocks
 * are only ever appended, each with its checksum.
 *
 * Each process image writes a file of its own, DIR/PID-IMAGE.vrec, created
 * on its first event (a process that never touches a GPU leaves none), so
 * the processes of one command never write the same file: a kill, a full
 * disk or a network file system cannot tear one process's events into
 * another's. The reader merges them (reader.h). A forked child starts a
 * file of its own; the parent's buffered events stay the parent's. Fork
 * safe by construction: a child forked from a recording process starts
 * no thread and takes no lock that a thread of the parent may have held
 * (the recorder's memory comes from mmap, its locks are held across the
 * fork); its recording threads write its file themselves, a full buffer
 * at once and what they buffered once a flush period has passed, so that
 * such a child killed while idle loses its last flush period's events.
 *
 * Links libc and pthreads only: it lives in the interposer.
 */
#ifndef VRAM_RECORDER_H
#define VRAM_RECORDER_H

#include "recording.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Events per thread buffer (48 KiB), and full buffers that may wait for
 * the writer before a recording thread waits too. */
#define RECORDER_BUFFER_EVENTS 1024
#define RECORDER_QUEUE 16
/* How often the writer writes what threads have buffered, in ms. */
#define RECORDER_FLUSH_MS 100

/* Starts recording this process's events into the directory `dir` (which
 * must exist and be writable). 0, or -1 with a message in err. */
int recorder_start(const char *dir, char *err, size_t n);
/* recorder_start(VRAM_RECORD) if that variable is set; 0 when it is not.
 * -1 with a message naming the variable and its value. */
int recorder_start_from_environment(char *err, size_t n);
/* Writes what every thread has recorded so far (e.g. before exec). */
void recorder_flush(void);
/* Writes everything and the exit record, and stops. Runs by itself at
 * exit; later events are not recorded. */
void recorder_stop(void);

/* The file this process writes, once it has one; NULL before. */
const char *recorder_path(void);

struct recorder_stats {
    uint64_t written;      /* events in the file */
    uint64_t dropped;      /* events that could not be recorded */
    uint64_t blocks;       /* blocks written */
    uint64_t buffers;      /* buffers allocated now */
    uint64_t buffers_peak; /* ... at most */
    uint64_t waits;        /* times a thread waited for the writer */
};
void recorder_get_stats(struct recorder_stats *s);

/* Records one event; the record_* functions below say what for. */
void recorder_event(enum record_action action, enum record_family family, int dev,
                    uint64_t address, uint64_t bytes, uint64_t aux, uint64_t stream,
                    unsigned reason);

extern atomic_bool recorder_on;

#define RECORDER_ON() atomic_load_explicit(&recorder_on, memory_order_relaxed)

/* What the interposer's hooks call, one line each. `dev` is the device's
 * ordinal as the program sees it; `bytes` what the budget charged. */

/* An allocation of `family` at `address` (pointer or handle) was charged. */
static inline void record_alloc(enum record_family family, int dev, uint64_t address,
                                uint64_t bytes, uint64_t stream)
{
    if (RECORDER_ON())
        recorder_event(RECORD_ALLOC, family, dev, address, bytes, 0, stream, 0);
}

/* Its charge came back (for VMM: released and no longer mapped). */
static inline void record_free(enum record_family family, int dev, uint64_t address,
                               uint64_t bytes, uint64_t stream)
{
    if (RECORDER_ON())
        recorder_event(RECORD_FREE, family, dev, address, bytes, 0, stream, 0);
}

/* A reservation (a pool: key = the pool; graph memory: key = the device
 * + 1) went from `before` to `after` bytes. */
static inline void record_resize(enum record_family family, int dev, uint64_t key,
                                 uint64_t before, uint64_t after, uint64_t stream)
{
    if (RECORDER_ON() && before != after)
        recorder_event(RECORD_RESIZE, family, dev, key, after, before, stream, 0);
}

/* VMM: `bytes` of `handle` mapped at `va`; unmapped; released while still
 * mapped (its charge stays until the last unmap, then record_free). */
static inline void record_map(int dev, uint64_t va, uint64_t bytes, uint64_t handle)
{
    if (RECORDER_ON())
        recorder_event(RECORD_MAP, RECORD_VMM, dev, va, bytes, handle, 0, 0);
}
static inline void record_unmap(int dev, uint64_t va, uint64_t bytes)
{
    if (RECORDER_ON())
        recorder_event(RECORD_UNMAP, RECORD_VMM, dev, va, bytes, 0, 0, 0);
}
static inline void record_release(int dev, uint64_t handle, uint64_t bytes)
{
    if (RECORDER_ON())
        recorder_event(RECORD_RELEASE, RECORD_VMM, dev, handle, bytes, 0, 0, 0);
}

/* A request for `bytes` was refused with `in_use` charged on the device. */
static inline void record_refusal(enum record_family family, int dev, uint64_t bytes,
                                  uint64_t in_use, enum record_reason why, uint64_t stream)
{
    if (RECORDER_ON())
        recorder_event(RECORD_REFUSE, family, dev, 0, bytes, in_use, stream, why);
}

/* The device's budget is now `bytes` (this process's, or the command's). */
static inline void record_budget(int dev, uint64_t bytes, enum record_scope scope)
{
    if (RECORDER_ON())
        recorder_event(RECORD_BUDGET, RECORD_NO_FAMILY, dev, 0, bytes, 0, 0, scope);
}

/* NVML said `process` bytes for this process on the device (with what
 * escaped processes it charges hold) and `command` for the command's. */
static inline void record_nvml(int dev, uint64_t process, uint64_t command)
{
    if (RECORDER_ON())
        recorder_event(RECORD_NVML, RECORD_NO_FAMILY, dev, 0, process, command, 0, 0);
}

/* A context was created on the device. */
static inline void record_context(int dev, uint64_t context)
{
    if (RECORDER_ON())
        recorder_event(RECORD_CONTEXT, RECORD_NO_FAMILY, dev, context, 0, 0, 0, 0);
}

#endif
