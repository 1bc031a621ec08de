/* reconcile: NVML's view of the GPUs, read on a thread of its own, so that
 * a slow or stuck NVML never stops the loop (see reconcile.c). */
#ifndef VRAM_RECONCILE_H
#define VRAM_RECONCILE_H

#include "daemon.h"

/* Starts the thread for the ngpus GPUs NVML lists (nvml_query.c, open), reading
 * every period_ms (0: not until reconcile_period says). Returns a
 * descriptor the loop polls: readable when a reading waits; -1 if it
 * cannot start. */
int reconcile_start(int ngpus, uint64_t period_ms);
/* A new period (the policy's reconcile-every, on SIGHUP). */
void reconcile_period(uint64_t period_ms);
/* In the loop, when the descriptor is readable: the reading into the
 * ledger, and what it changed (over-budget processes, overcommitted GPUs,
 * waiters now admitted). */
void reconcile_take(void);
/* On the timer: says in the log when a reading has taken too long. */
void reconcile_tick(uint64_t now);

#endif
