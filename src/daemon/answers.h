/* answers: what the files of vramd's answers share among themselves. The
 * loop's part (answers_handle, answers_gone, answers_flush_grants, ...) is
 * in daemon.h; this header is for these four files alone:
 *   answers.c        the dispatch of each message (answers_handle); HELLO,
 *                    REQUEST, REPORT, RELEASE; STATUS, HISTORY; admission
 *                    of waiters; a client's end
 *   answers_send.c   how an answer is said: at once, never blocking; a
 *                    grant once the driver's work for it is done and the
 *                    state file holds it; the driver's verdicts
 *   answers_jobs.c   a job held for its processes: JOB, MEMBER, PLACE
 *   answers_containers.c  a container's job: CONTAINER, STOPPED, STATE
 *
 * A handler (on_*) returns 0, or -1 when the connection is to be dropped;
 * so does each reply_*: -1 when the client does not take the answer.
 */
#ifndef VRAM_ANSWERS_H
#define VRAM_ANSWERS_H

#include "daemon.h"

#include <stdbool.h>
#include <stdint.h>

/* answers_send.c, for the handlers */
/* Sends what w holds. */
int reply(struct conn *c, struct proto_writer *w);
/* A message of verb v with text (and dev=, unless NULL): ERR, DENY. */
int reply_text(struct conn *c, enum proto_verb v, const char *dev, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* GRANT of bytes on dev (a UUID), the ledger's grant already: said once
 * the driver's work for it is done and the state file holds it; DENY if
 * a container's command state cannot take it (the grant undone).
 * `restored`: a grant given back after a restart. */
int reply_grant(struct conn *c, const char *dev, uint64_t bytes, bool restored);
/* A request's answer once admission has spoken (`who` asked, as the log
 * names it; v on ledger device dev): GRANT (reply_grant), WAIT with until=
 * `longest` (how long the daemon holds the request at most, so that the
 * client's own wait for an answer is bounded too), or DENY with why;
 * `no_wait` adds that the request asked to wait and the policy lets none. */
int reply_verdict(struct conn *c, const char *who, enum verdict v, int dev, uint64_t granted,
                  uint64_t longest, bool restored, bool no_wait, const char *why);
/* A new ticket for the driver's work (driver_limits.h), by which
 * answers_driver_done finds the answer that waits for it. */
uint64_t await_ticket(void);
/* c's PLACE is answered when the driver's work of `ticket` is done;
 * `placed` is what vramd's log says if the driver holds the task (its
 * first 199 characters). 0, or -1 (no room to wait: drop the client). */
int await_place(struct conn *c, uint64_t ticket, const char *placed);
/* c is gone: nothing that waits to be said to it is said. */
void reply_forget(struct conn *c);

/* answers.c, for answers_jobs.c and answers_containers.c */
/* The ledger's device a message names (dev=), added if NVML does not know
 * the node's GPUs: 0 with *dev; otherwise the message was answered (ERR or
 * DENY) and is done: 1, or -1 when the client is to be dropped. */
int message_device(struct conn *c, const struct proto_msg *m, int *dev);
/* A client leaves the ledger (a job: `why`, or NULL for its end as a
 * client's): what it held comes back. */
void end_client(struct ledger_client *lc, const char *why);

/* answers_jobs.c and answers_containers.c, for answers_handle */
int on_job(struct conn *c, const struct proto_msg *m);
int on_member(struct conn *c, const struct proto_msg *m);
int on_place(struct conn *c, const struct proto_msg *m);
int on_container(struct conn *c, const struct proto_msg *m);
int on_stopped(struct conn *c, const struct proto_msg *m);
int on_state(struct conn *c, const struct proto_msg *m);

#endif
