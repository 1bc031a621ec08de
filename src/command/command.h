/* command: the GPU budget that every process of one `vram run` shares.
 *
 * `vram run` (the supervisor) creates the command's shared state in a memfd
 * (anonymous memory: no file in /tmp or /dev/shm, gone when the last
 * process that maps it ends) and names it in VRAM_COMMAND. Every process of
 * the command that loads the interposer opens it when it starts and, at its
 * first allocation, claims a slot: per device, one counter that only this
 * process writes. The budget holds for the sum of all slots. A slot's
 * liveness is an open-file-description lock the kernel drops when the
 * process dies, so a dead process's share is reclaimed whole by whoever
 * next needs it; nothing waits on a lock a dead process could hold.
 *
 * Without VRAM_COMMAND (the interposer preloaded by hand, or by the Slurm
 * plugin) the same code runs on private memory: one process, its own budget.
 *
 * The rules that make it exact are in command.c, above command_reserve().
 */
#ifndef VRAM_COMMAND_H
#define VRAM_COMMAND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define COMMAND_ENV "VRAM_COMMAND"
#define COMMAND_MAX_DEVICES 64
#define COMMAND_MAX_SLOTS 256   /* processes of one command holding memory at once */
#define COMMAND_MAX_RECORDS 256 /* ended processes listed in the summary */
#define COMMAND_UUID_SIZE 48

enum command_mode {
    COMMAND_SHARED = 1,      /* one budget for all the command's processes */
    COMMAND_PER_PROCESS = 2, /* each process its own budget (--per-process, vramd) */
};

/* What the device gives a process beyond its allocations, charged like
 * them and also counted apart, for the peak line's "(context ...)". */
enum command_part {
    COMMAND_CONTEXTS, /* CUDA contexts */
    COMMAND_MODULES,  /* loaded modules and libraries */
    COMMAND_DRIVER,   /* what the driver holds beyond every charge: NVML's
                         figure for the process less what vram charged it
                         (driver_memory.c) */
    COMMAND_PARTS
};

/* ------------------------------------------------ vram run (the supervisor) */

struct command_owner {
    int fd;                        /* the memfd; close-on-exec */
    struct command_shared *shared; /* mapped */
    char env[128];                 /* the value of VRAM_COMMAND for the child */
};

/* A context's cost on a GPU, measured by vram run before the command. */
struct command_context_size {
    char uuid[COMMAND_UUID_SIZE];
    uint64_t bytes;
};

/* Creates the state. `limit_var`/`limit_value` is the budget as the options
 * give it ("VRAM_MEMORY_LIMIT", "0=4GiB,1=2GiB"; or NULL: vramd's policy),
 * which every process of the command then reads from the state rather than
 * from its own environment; `sizes` (n of them) what a context takes on
 * each GPU, so that every process can reserve its first context before it
 * creates it. 0, or -1 with the reason in why. */
int command_create(struct command_owner *o, enum command_mode mode, const char *limit_var,
                   const char *limit_value, const struct command_context_size *sizes, int n,
                   char *why, size_t whylen);
/* In vram run's child, before it execs the command: a descriptor of the
 * state that the command's processes inherit (read-only, a description
 * of its own that no lock is ever taken through, numbered out of the way
 * of the low numbers programs pick). What a process of the command keeps
 * when it clears VRAM_COMMAND and leaves the process tree (setsid, a
 * double fork): vramd finds the command's processes by it. Only calls
 * that are safe after fork(); -1 if it could not be made. */
int command_inheritable(const struct command_owner *o);

/* With vramd, before the command starts: the command's budgets are the
 * grants vramd made for the whole command, and its processes never ask
 * vramd themselves (command_granted). command_grant registers the grant on
 * the GPU `uuid`, numbered `ordinal` as the command numbers it (0 bytes: vramd
 * refused it, and the command was started anyway); a GPU with no entry has
 * no grant either. 0, or -1 if the command has COMMAND_MAX_DEVICES. */
void command_set_granted(struct command_owner *o);
int command_grant(struct command_owner *o, const char *uuid, int ordinal, uint64_t bytes);

/* True if VRAM_COMMAND names a command that is still alive (for refusing
 * to nest one `vram run` in another). */
bool command_inside_live(void);

/* What the command used, read after it ended (dead processes are reclaimed
 * first; processes still running are listed as running). */
struct command_summary {
    enum command_mode mode;
    int ndevices;
    struct command_summary_device {
        int ordinal; /* as the process that first used it numbered it */
        char uuid[COMMAND_UUID_SIZE];
        uint64_t budget, peak, refused;
        uint64_t part[COMMAND_PARTS]; /* the most contexts, modules, driver held at once */
        uint64_t nvml_peak;           /* the most NVML showed the command holding */
        bool ungoverned;              /* no process of the command used vram there: the
                                         peak is NVML's (vram run's own reading) */
        bool driver_unseen;           /* NVML could not name a process of the command
                                         there: its driver's own part was not charged */
    } device[COMMAND_MAX_DEVICES];
    int nprocesses, processes_not_listed;
    struct command_summary_process {
        int pid;
        bool running;
        uint64_t peak[COMMAND_MAX_DEVICES]; /* by the index in device[] */
    } process[COMMAND_MAX_RECORDS + COMMAND_MAX_SLOTS];
};
void command_summarize(struct command_owner *o, struct command_summary *out);
/* "GPU 0 (GPU-5a1d...): peak 3.21 GiB of 4.00 GiB budget; 2 allocations
 * refused": device i of a summary, as vram run and the Slurm plugin say it
 * at the end; the index is the program's, the UUID what vram top and
 * nvidia-smi show beside theirs. */
void command_peak_line(const struct command_summary *s, int i, char *out, size_t n);

/* ----------------------------------------------- a process of the command */

/* VRAM_COMMAND=vramd (the CDI spec of vram cdi generate sets it in a
 * container): the command's state is vramd's, for the container's job. */
#define COMMAND_FROM_DAEMON "vramd"
/* vramd's answer for such a state, asked by the caller before it opens the
 * command (the interposer: agent_container_state), so that nothing here
 * calls back up: r 0 with a descriptor in fd; 1 when there is none (then
 * the process works as without vram run, its budget its own); -1 with why
 * when it must not run unbudgeted. */
struct command_from_daemon {
    int r, fd;
    char why[256];
};
/* Whether VRAM_COMMAND says to ask vramd for the state. */
bool command_asks_daemon(void);

/* Called once when the interposer loads: opens the state VRAM_COMMAND names
 * (while the processes it names are alive), or for VRAM_COMMAND=vramd the
 * one in `given` (NULL: none), and names this process in it for its own
 * children, so that they can find the state even after vram run has gone.
 * Does no more; nothing is printed here. Also sets up what a forked child
 * needs: it is a new member with nothing charged, and claims its own slot
 * at its first allocation. */
void command_open_from_environment(const struct command_from_daemon *given);

/* Maps the state (or private memory when there is no VRAM_COMMAND).
 * 0, or -1 with a one-line reason in why: this process belongs to a
 * command whose budget it cannot join, and must not allocate. */
int command_join(char *why, size_t whylen);
enum command_mode command_mode(void);
/* The command's budgets are vramd's grants (command_set_granted). */
bool command_granted(void);
/* The budget as vram run gave it ("VRAM_MEMORY_LIMIT", "4GiB"); false when
 * not under vram run or when it gave none. */
bool command_budget_setting(char *var, size_t varlen, char *value, size_t valuelen);

/* The command's entry for a device, by UUID. If no process registered it
 * and `register_budget` is set, registers it with `budget`. Returns its
 * index (and the command's budget for it in *budget), -1 if the device has
 * no budget, -2 with the reason in why if the state cannot be used. */
int command_device(const char *uuid, int ordinal, bool register_budget, uint64_t budget,
                   uint64_t *budget_out, char *why, size_t whylen);

/* Reserve-before-allocate on device index d against `limit`: 0 if `bytes`
 * are charged, 1 if they are and the sum came within the margin of the
 * limit (command_set_margin: the caller then reads what the driver holds
 * before it lets the allocation go), -1 if they do not fit (dead
 * processes' shares are reclaimed before that answer; the refusal is
 * counted for the summary). No system call unless the answer would be -1. */
int command_reserve(int d, uint64_t limit, uint64_t bytes);
/* The same, when the caller has another way to the memory if this one is
 * refused (a pool's chunk, where the allocation alone may fit): a refusal
 * is not counted. */
int command_try_reserve(int d, uint64_t limit, uint64_t bytes);
/* How near the limit a reservation answers 1 (0: never). Set once, early. */
void command_set_margin(uint64_t bytes);
/* After a reservation answered 1 and the driver's part was settled: if
 * the command now holds more than `limit` on d, the reservation of `bytes`
 * is taken back and counted as refused (-1); else 0. */
int command_recheck(int d, uint64_t limit, uint64_t bytes);
/* Charges `bytes` to this process on d whatever the limit (memory the
 * driver already holds), raising the peaks. */
void command_force(int d, uint64_t bytes);
/* The most NVML showed the command holding on d, raised to `bytes`. */
void command_note_nvml(int d, uint64_t bytes);
/* NVML could not name this process on d (src/cuda/nvml_pid.h): the
 * driver's own part of it is not charged, as the end-of-run line says. */
void command_note_driver_unseen(int d);
/* vram run's pid (the command's processes descend from it), or 0. */
int command_supervisor(void);
/* `pid`'s parent (from /proc), or 0; `pid` is `ancestor` or descends from it. */
int command_parent_of(int pid);
bool command_descends(int pid, int ancestor);
/* The pid of the lowest slot in use, or 0. */
int command_first_member(void);
void command_release(int d, uint64_t bytes);
/* Counts `bytes` of what this process holds on d as a part (after their
 * reservation; `add` false: before their release), raising the part's
 * peak. Not on the allocation path: a sum over the slots. */
void command_part(int d, enum command_part part, uint64_t bytes, bool add);
uint64_t command_own_part(int d, enum command_part part);

/* What one context takes on d as this command knows it (vram run's
 * measure, or the largest a process noted), 0 when unknown. */
uint64_t command_context_size(int d);
void command_note_context_size(int d, uint64_t bytes);

/* What the command holds on d (after reclaiming the dead), and what this
 * process holds and held at most. */
uint64_t command_used(int d);
uint64_t command_own_used(int d);
uint64_t command_own_peak(int d);
int command_processes(int d); /* live processes holding memory on d */
/* Whether process `pid` shares this process's budget: a member of the
 * command (this process only, with a budget of its own). */
bool command_member(int pid);
/* Why this process could not take a slot in the command, or NULL. */
const char *command_claim_error(void);

#endif
