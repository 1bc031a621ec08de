/* recording: the form in which vram keeps a program's GPU memory events.
 *
 * One event is what one governed call did to one device: an allocation of
 * a family appeared or went away, a pool's reservation changed, a budget
 * was set, a request was refused. The recorder (recorder.h) writes events
 * as they happen; the reader (reader.h) loads them for conversion and
 * plotting. This header is what both agree on: the event, and the file.
 *
 * A file (".vrec", vram's own form) is a header followed by blocks. A
 * block carries one process image's information (its pid, command, clocks)
 * or a run of its events, and a checksum, so that a reader can tell a
 * whole block from one a killed process or a full disk cut short. Several
 * process images may share a file (a merged recording); a block names the
 * image it belongs to. Integers are little-endian, as the machines that
 * write them (x86-64, aarch64); a reader on another order refuses the
 * file by its header.
 */
#ifndef VRAM_RECORDING_H
#define VRAM_RECORDING_H

#include <stddef.h>
#include <stdint.h>

/* What kind of memory an event is about: the families the interposer
 * governs. */
enum record_family {
    RECORD_NO_FAMILY = 0,  /* budgets, refusals without a family, context markers, exit */
    RECORD_PLAIN,          /* cuMemAlloc (and the legacy 32-bit one) */
    RECORD_PITCHED,        /* cuMemAllocPitch */
    RECORD_MANAGED,        /* cuMemAllocManaged */
    RECORD_POOL,           /* stream-ordered pools: what a pool reserves */
    RECORD_VMM,            /* cuMemCreate handles, their maps and unmaps */
    RECORD_ARRAY,          /* arrays, 3D and mipmapped arrays */
    RECORD_GRAPH,          /* graph memory: a device's graph reservation */
    RECORD_CONTEXT_MEMORY, /* what a CUDA context takes of the device; address: the context */
    RECORD_MODULE,         /* a loaded module or library; address: its handle */
    RECORD_DRIVER,         /* what the driver holds beyond every charge (NVML's
                              figure less vram's): a reservation resized at
                              each reading; address 0 */
    RECORD_REPORTED,       /* vramd's history: what a client reported in use (a
                              reservation resized at every step); never in a file */
    RECORD_FAMILIES
};

/* What happened. Only ALLOC, FREE and RESIZE change what is in use. */
enum record_action {
    RECORD_ALLOC = 1, /* address: the allocation (or handle); bytes: its charge */
    RECORD_FREE,      /* the charge of `address` came back; bytes: that charge */
    RECORD_RESIZE,    /* a reservation (pool, graph) is now `bytes`; aux: before */
    RECORD_MAP,       /* VMM: address: the range mapped; bytes; aux: the handle */
    RECORD_UNMAP,     /* VMM: address: the range unmapped; bytes */
    RECORD_RELEASE,   /* VMM: handle released while mapped: its charge stays
                         until the last unmap (then a FREE) */
    RECORD_REFUSE,    /* a request refused: bytes asked; aux: in use then;
                         reason: why */
    RECORD_BUDGET,    /* the budget of the device is now `bytes`; reason: scope */
    RECORD_CONTEXT,   /* a context was created; address: the context (what it
                         takes is the RECORD_CONTEXT_MEMORY allocation that
                         follows, where a budget charges it) */
    RECORD_EXIT,      /* the process image ended (exit); the driver frees what
                         it still held */
    RECORD_NVML,      /* what NVML said at a reading of the interposer's
                         (driver_memory.h): bytes: its figure for this process
                         on the device, with what processes of the command
                         that escaped the interposer hold where this one
                         charges it; aux: its figure for the whole command.
                         Changes nothing in use: NVML's line beside vram's.
                         From version 2 */
    RECORD_ACTIONS
};

/* Why a request was refused. */
enum record_reason {
    RECORD_OVER_BUDGET = 1, /* the budget has no room for it */
    RECORD_NOT_GRANTED,     /* vramd granted nothing on this device */
    RECORD_BAD_SETTINGS,    /* the budget could not be read: all refused */
    RECORD_TOO_MANY_POOLS,  /* the interposer's table of pools is full */
    RECORD_TOO_MANY_HANDLES, /* ... of VMM handles is full */
    RECORD_NO_ACCOUNTING,   /* the command's budget could not be reached
                               (joining it, claiming a slot): all refused */
    RECORD_REASONS
};

/* Whose budget a BUDGET event sets. */
enum record_scope {
    RECORD_PROCESS_BUDGET = 0, /* this process's, on this device */
    RECORD_COMMAND_BUDGET = 1, /* all processes of the command together */
};

#define RECORD_NO_DEVICE 0xff

/* One event: 48 bytes, as it is in memory and in the file. */
struct record_event {
    uint64_t time;    /* CLOCK_MONOTONIC, ns: one clock for all processes */
    uint64_t address; /* pointer, handle, pool: what the event is about */
    uint64_t bytes;   /* see enum record_action */
    uint64_t aux;     /* see enum record_action */
    uint64_t stream;  /* the stream of a stream-ordered call, else 0 */
    uint32_t thread;  /* kernel thread id (gettid) */
    uint8_t device;   /* CUDA ordinal as the program sees it, or RECORD_NO_DEVICE */
    uint8_t family;   /* enum record_family */
    uint8_t action;   /* enum record_action */
    uint8_t reason;   /* REFUSE: enum record_reason; BUDGET: enum record_scope */
};

/* Who wrote the events: one process image (a process between two execs). */
struct record_process {
    uint32_t pid, ppid;
    uint64_t start_monotonic; /* CLOCK_MONOTONIC, ns, read together with */
    uint64_t start_realtime;  /* CLOCK_REALTIME, ns: to show wall-clock times */
    uint32_t uid;
    uint32_t reserved;
    char command[224]; /* its command line, arguments separated by spaces */
};

#define RECORD_FILE_MAGIC "VRAMREC\n"
/* Version 2 added RECORD_NVML; a reader reads every version from
 * RECORD_VERSION_OLDEST, and an older vram refuses a newer file by its
 * version rather than misreading its events. */
#define RECORD_VERSION 2
#define RECORD_VERSION_OLDEST 1

struct record_file_header {
    char magic[8];       /* RECORD_FILE_MAGIC */
    uint32_t version;    /* RECORD_VERSION */
    uint32_t event_size; /* sizeof(struct record_event) */
    uint32_t byte_order; /* 0x01020304 as written */
    uint32_t reserved[3];
};

#define RECORD_BLOCK_MAGIC 0x4b4c4256u /* "VBLK" */
enum record_block_kind { RECORD_BLOCK_PROCESS = 1, RECORD_BLOCK_EVENTS = 2 };

struct record_block_header {
    uint32_t magic; /* RECORD_BLOCK_MAGIC */
    uint16_t kind;  /* enum record_block_kind */
    uint16_t reserved;
    uint32_t pid;
    uint32_t length;   /* bytes of payload after this header */
    uint64_t image;    /* the process image's id: random, never 0 */
    uint64_t checksum; /* record_checksum() of the payload */
};

/* Blocks are at most this long: what a reader trusts a length to be. */
#define RECORD_MAX_BLOCK (16u << 20)

_Static_assert(sizeof(struct record_event) == 48, "an event is 48 bytes in every file");
_Static_assert(sizeof(struct record_process) == 256, "process information is 256 bytes");
_Static_assert(sizeof(struct record_file_header) == 32, "the file header is 32 bytes");
_Static_assert(sizeof(struct record_block_header) == 32, "a block header is 32 bytes");

/* Names, as files, pages and messages show them ("plain", "allocate",
 * "over budget"); "?" for a value out of range. */
const char *record_family_name(unsigned family);
const char *record_action_name(unsigned action);
const char *record_reason_name(unsigned reason);

/* A 64-bit checksum of a block's payload: catches a block cut short or
 * overwritten, not an adversary. */
uint64_t record_checksum(const void *data, size_t len);

/* Writes the file header. 0, or -1 with errno. */
int record_write_file_header(int fd);
/* Writes one block, header and payload in one write(2) where it can, so a
 * killed writer leaves at most this block cut short. 0, or -1 with errno. */
int record_write_block(int fd, enum record_block_kind kind, uint32_t pid, uint64_t image,
                       const void *payload, uint32_t length);

#endif
