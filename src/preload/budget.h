/* budget: what a process may hold on each device, and what it holds.
 *
 * Under `vram run` the budget is the whole command's: every process of the
 * command charges the same per-device budget, kept in the command's shared
 * state (command.h); with --per-process, or without vram run, each process
 * has its own. The functions here speak of devices by the program's CUDA
 * ordinal; the command's state knows them by UUID.
 *
 * Every allocation the interposer governs goes through three steps:
 * budget_reserve() charges the budget first (an atomic compare-and-swap,
 * so two threads can never together pass it), the driver is called, and
 * then budget_commit() records the pointer or budget_release() returns the
 * charge. Frees look the pointer up; one the budget does not know is the
 * driver's business alone.
 *
 * budget_view() is the one function that says what the program sees of a
 * device: total = min(budget, physical total) and
 * free = max(0, min(budget - used, physical free)), where used is all that
 * the command holds on the device (processes that died are reclaimed
 * first); used for cuMemGetInfo and NVML alike so the views always agree,
 * and budget_total() gives the same total for cuDeviceTotalMem.
 *
 * Below the budget are the command's state (command.h), what the driver
 * holds beyond the charges (driver_memory.h) and the real driver (real.h);
 * it calls nothing above it.
 */
#ifndef VRAM_BUDGET_H
#define VRAM_BUDGET_H

#include "../command/command.h"

#include <stdbool.h>
#include <stdint.h>

#define BUDGET_MAX_DEVICES 64

/* What an allocation is, for the out-of-memory report. */
enum charge_kind {
    CHARGE_MEMALLOC,
    CHARGE_PITCH,
    CHARGE_MANAGED,
    CHARGE_ASYNC,
    CHARGE_VMM,
    CHARGE_ARRAY,
    CHARGE_MIPMAP,
    CHARGE_GRAPH,
    CHARGE_KINDS
};

/* Reads VRAM_MEMORY_LIMIT / VRAM_MEMORY_FRACTION once (a fraction is of
 * the device's total as the real driver gives it). Returns 0, or -1 after
 * printing the configuration error to stderr (a bad budget is never
 * silently ignored: allocations then fail).
 *
 * When vramd runs, a device's budget is what the daemon grants when the
 * device is first touched (the local setting is what is asked for; none
 * asks for the policy's default), and usage is reported to it in the
 * background (src/client/agent.h). */
int budget_setup(void);

/* False if no budget applies to this device (pass everything through). */
bool budget_limited(int dev);
uint64_t budget_limit(int dev);

/* 0 if `bytes` fit and are now charged; -1 if the budget is exhausted.
 * Before the driver is asked for them; budget_reserve_held() for memory the
 * driver holds already (a pool that grew more than was reserved, a
 * context measured larger), which the reading of the driver's part near
 * the budget must count as charged, not as the driver's own. */
int budget_reserve(int dev, uint64_t bytes);
int budget_reserve_held(int dev, uint64_t bytes);
/* As budget_reserve, for a caller with another way to the memory if this
 * is refused (a pool's next chunk): the refusal is not counted. */
int budget_try_reserve(int dev, uint64_t bytes);
/* Records a successful allocation (key: its address or handle). */
void budget_commit(int dev, uint64_t key, uint64_t bytes, enum charge_kind kind);
/* Forgets an allocation and returns its charge; false if unknown. The
 * charge is returned to the budget only by budget_release(). */
bool budget_forget(uint64_t key, int *dev, uint64_t *bytes, enum charge_kind *kind);
/* Returns a charge: a reservation the driver refused, or memory freed. */
void budget_release(int dev, uint64_t bytes);

/* Contexts and modules (contexts.c, modules.c): charged like allocations,
 * reserve before the driver is called (`held`: after, as above), and also
 * counted as their part (COMMAND_CONTEXTS, COMMAND_MODULES) for the peak
 * line. */
int budget_reserve_part(int dev, uint64_t bytes, enum command_part part, bool held);
void budget_release_part(int dev, uint64_t bytes, enum command_part part);
/* What one context takes on the device as the command knows it (0 when
 * unknown), and a measure of it to share with the command's processes. */
uint64_t budget_context_size(int dev);
void budget_note_context_size(int dev, uint64_t bytes);
/* A context of `bytes` refused on dev by `call`. When the budget cannot hold
 * one context and 1 MiB beside it, that is said whatever VRAM_LOG says
 * (once per device): the program cannot run in that budget at all; else it
 * is an out-of-memory like any other (budget_report_oom). `name` is the
 * device's name. */
void budget_report_context(int dev, uint64_t bytes, const char *call, const char *name);

/* The program's view of a device. */
void budget_view(int dev, uint64_t phys_free, uint64_t phys_total, uint64_t *free_out,
                 uint64_t *total_out);
uint64_t budget_total(int dev, uint64_t phys_total);

/* Writes the one-line report of a refused allocation (VRAM_LOG=error and
 * above): budget, in use, requested, and this process's largest holders. */
void budget_report_oom(int dev, uint64_t requested, const char *call);

/* Why a request on `dev` is refused now (an enum record_reason of
 * src/record/recording.h), and what the device holds against its budget:
 * for the recording of the refusal. */
unsigned budget_refusal(int dev, uint64_t *in_use);

/* In a child after fork(): a new process, holding nothing (its own
 * pointers are forgotten; command.c makes it a new member of the command). */
void budget_after_fork(void);

#endif
