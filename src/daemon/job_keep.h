/* job_keep: a job whose holder is gone, kept while a process of it lives.
 *
 * A job's grant is held by a process for the job (its holder: vram run for
 * its command, slurmstepd for a step), on a connection that ends with it.
 * But the job's processes may outlive the holder: a background worker,
 * `nohup ... &`, a launcher that returns early, a process of a command
 * whose vram run was killed. They keep the command's state, and with it
 * its budget, and go on charging it; a grant that ended with the holder
 * would be handed to someone else while they do. So a job is not over
 * when its holder's connection closes (or, after a restart, when its held
 * grant is not taken back): it is kept (ledger_keep), its grants counted,
 * its cgroup and the driver's limits on it in place, for as long as any
 * process of it other than the holder lives, and then it ends as a job
 * ends.
 *
 * A job's processes, as vramd knows them without trusting anyone's word:
 *   - its members: the processes its holder named (MEMBER), vram run at
 *     its end every process of its command still running, whether or not
 *     it holds memory yet (src/client/job.h);
 *   - the children of each, found as they appear (/proc/PID/task/TID/
 *     children), which become members in turn; at the keeping, the
 *     holder's own children too, but for a clone of the holder that shares
 *     its memory, which is the holder itself (LeakSanitizer's tracer, which
 *     an ASan-built vram run starts at its exit);
 *   - every process in the cgroup vramd made for the job
 *     (driver_limits_cgroup), or in a container's own cgroup
 *     (containers_cgroup): what a job's process starts stays in it.
 * A zombie is gone: its memory went with it. Whatever joins is the job's
 * as a member is (shown with the job, its NVML usage the job's); whatever
 * is gone leaves. The kept jobs are looked at every KEEP_CHECK_MS, on the
 * loop's timer, only while there is one: an idle vramd does nothing here.
 *
 * Not tied to vram run: any job whose processes are known this way can be
 * held so. A container's job (containers.h) is registered by an OCI hook
 * that exits at once: its holder is gone from the start, and its processes
 * are the container's cgroup (the runtime's, never moved): the job is kept
 * for them from the hook's end on, and ends when the cgroup's processes are
 * all gone (at once: an inotify watch on its cgroup.events, besides this
 * look), or at poststop.
 */
#ifndef VRAM_JOB_KEEP_H
#define VRAM_JOB_KEEP_H

#include "../ledger/ledger.h"

#include <stdbool.h>
#include <stdint.h>

#define KEEP_CHECK_MS 500

/* Looks at job c's processes now: members gone leave, new ones join (see
 * above). Whether any process of it other than its holder lives: then the
 * caller keeps the job (ledger_keep) rather than end it. */
bool job_keep_lives(struct ledger *l, struct ledger_client *c);
/* On the timer, while jobs are kept (l->nkept): every KEEP_CHECK_MS, each
 * kept job is looked at, and one with no process left is handed to `over`,
 * which ends it (it leaves the ledger). */
void job_keep_tick(struct ledger *l, uint64_t now, void (*over)(struct ledger_client *c));

#endif
