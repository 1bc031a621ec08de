/* grants: vram run's command as one job of vramd's ledger.
 *
 * With vramd and one budget for the whole command, vram run asks vramd for
 * the command's budget on each GPU the program will see before it starts
 * anything: the budget given (at most the GPU's size: vram run refuses
 * more before it gets here), or none, for the policy's default. With
 * --wait it waits in vramd's queue and says so on stderr (for how much, on
 * which GPU, behind whom), and how long it waited when
 * it gets the memory or gives up. A program vramd refuses is not started,
 * unless --start-anyway: then it has no memory on the GPUs refused.
 *
 * The grants then become the command's budgets in its shared state
 * (command_grant), so that its processes never ask vramd themselves, and
 * vram run's connection holds them for the command's life, reporting what
 * the command and each of its processes hold (src/client/job.h). When vram
 * run ends, however it ends, vramd takes them back.
 */
#ifndef VRAM_GRANTS_H
#define VRAM_GRANTS_H

#include "../src/core/options.h"
#include "../src/client/job.h"
#include "visible.h"

#include <stdbool.h>

/* vram run's exit status when vramd refused the program, which was not
 * started (sysexits' EX_TEMPFAIL: the same command may run later). */
#define RUN_REFUSED 75

struct grants_request {
    const char *socket;     /* vramd's */
    const struct visible *gpus;
    const struct options *budget; /* the command's budget, as vram run checked it */
    const char *given;      /* "--limit 100GiB", for messages; NULL from the environment */
    uint64_t wait_ms;       /* --wait: 0 not at all */
    const char *job;        /* --job NAME, or NULL */
    const char *program;    /* the command's first word */
    bool start_anyway;
    bool report;            /* messages on stderr (not with --log off) */
    bool verbose;           /* and what the holder does meanwhile (--log info) */
};

/* Asks vramd for the command's grants (`r` must last as long as `j`: the
 * holder's thread speaks through it). 0: they are in `j` (every GPU
 * granted, or held to vramd's fallback while it is down, or refused and
 * --start-anyway); RUN_REFUSED after saying why on stderr: the program must
 * not start; 2 after a message: vramd could not be asked. */
int grants_ask(struct job *j, const struct grants_request *r);

/* The grants into the command's state, before the command starts; then
 * job_start(j) reports what it holds. */
void grants_apply(struct job *j, struct command_owner *owner);

#endif
