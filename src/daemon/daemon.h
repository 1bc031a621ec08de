/* daemon: what the parts of vramd share.
 *
 * vramd is one epoll loop (and a thread that reads NVML). Its parts, one
 * job each:
 *   vramd.c     options, set-up, the loop, signals, the 50 ms timer
 *   conns.c     connections: accept, read, send, drop; the only code that
 *               touches a client's socket
 *   identity.c  who a client is, from the kernel
 *   answers.c   the answer to each message, and reclaim when a client goes;
 *               callable without the loop (the daemon-level fuzzer drives it);
 *               how an answer is said (answers_send.c), the messages of a
 *               job held for its processes (answers_jobs.c) and of a
 *               container's job (answers_containers.c); answers.h: what
 *               these four share
 *   files.c     the state file (grants, for re-registration after a
 *               restart), the metrics file and the fallback file
 *   driver_limits.c  the driver's per-cgroup limits for job grants, where
 *               NVML has them (driver_limits.h); their cgroup and NVML
 *               work on a thread of its own (driver_work.c), the
 *               cgroups' files (cgroups.c)
 *   job_keep.c  a job whose holder is gone, kept while its processes live
 *   containers.c  a container as one job: held by its own cgroup, its
 *               command state handed to its processes (containers.h)
 *   reconcile.c NVML's readings, on a thread of their own
 * (NVML itself is src/cuda/nvml_query.c, which vram devices shares)
 *
 * The ledger (src/ledger) is pure bookkeeping; everything here is the I/O
 * around it.
 */
#ifndef VRAM_DAEMON_H
#define VRAM_DAEMON_H

#include "../ledger/history.h"
#include "../ledger/ledger.h"
#include "../protocol/protocol.h"
#include "driver_limits.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#define MAX_STRIKES 16 /* malformed messages before a client is dropped */
/* Entries in one page of STATUS: with the devices and END, a page of
 * messages fits in a socket's default send buffer (~200 KiB; a message
 * costs the kernel about 1 KiB). */
#define STATUS_PAGE 64
/* Messages in one page of HISTORY, END included: as STATUS's, a page fits
 * in a socket's default send buffer. */
#define HISTORY_PAGE 64

/* One client connection. Who is at the other end is what the kernel said
 * when the connection was accepted (identity.c), never read again later:
 * by then the connecting process may have exited and another taken its
 * place on the socket. */
struct conn {
    int fd;
    pid_t pid;
    uid_t uid;
    gid_t gid;
    uint64_t start; /* the connecting process's start time; 0 if it was already gone */
    uint64_t accepted_ms;
    bool spoke; /* it has sent a message (until then it may be closed as idle) */
    struct conn *silent_prev, *silent_next; /* conns.c: the silent ones, oldest first */
    int ngroups;
    gid_t *groups; /* its supplementary groups */
    struct ledger_client *client;
    int strikes;
};

struct daemon {
    struct ledger L;
    struct history history; /* the last hour of the ledger (history.h) */
    int ngpus; /* devices NVML knows: ledger slots 0..ngpus-1 */
    int log_level;
    bool state_dirty;
    char socket_path[108], policy_path[512], state_path[512], metrics_path[512];
    char fallback_path[512]; /* beside the socket (client.h: LEDGER_FALLBACK_NAME) */
    uint64_t metrics_ms;
    struct snap_node node; /* the host, and the versions NVML gave */
};
extern struct daemon D;

enum { L_ERROR = 1, L_WARN = 2, L_INFO = 3, L_DEBUG = 4 };
void dlog(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A line that something outside the daemon can cause again and again: at
 * most one every 10 s per `limit`, saying how many were left out. */
struct log_limit {
    uint64_t last_ms;
    unsigned long skipped;
};
void dlog_limited(struct log_limit *limit, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
uint64_t now_ms(void);
/* Starts fn(arg) on a detached thread that takes no signal (they are the
 * loop's, through its signalfd): 0, or an errno. */
int daemon_thread(void *(*fn)(void *), void *arg);
/* For the tests of a restart: vramd stops at once (_exit, as kill -9
 * would) when it reaches the point VRAMD_TEST_EXIT names: "admitted" (the
 * ledger granted, the state file not yet written), "written" (written, the
 * GRANT not yet sent), "sent". */
void daemon_test_point(const char *point);

/* conns.c */
/* Sends one message without waiting; -1 if the client does not take it. */
int conn_send(struct conn *c, const char *buf, size_t len);
/* The same, with a descriptor passed along (SCM_RIGHTS; the caller keeps
 * its own). */
int conn_send_fd(struct conn *c, const char *buf, size_t len, int fd);
/* Drops every connection whose strikes reached MAX_STRIKES. */
void conns_drop_struck(void);

/* identity.c */
/* Fills c's identity from the kernel, in two steps so that a connection
 * refused for its uid costs little: pid, uid and gid (SO_PEERCRED); then
 * the groups (SO_PEERGROUPS) and the process's start time. 0, or -1 (the
 * connection is to be closed). */
int identity_creds(int fd, struct conn *c);
int identity_rest(int fd, struct conn *c);
uint64_t start_time(pid_t pid);
/* What the kernel says of a process, read at once from /proc/PID/stat:
 * whose it is (its effective uid), its parent, when it started, its name.
 * 0, or -1 if there is no such process. */
struct process_info {
    uid_t uid;
    pid_t ppid;
    uint64_t start;
    char state; /* R, S, D, ... Z: a zombie, whose memory is gone */
    char comm[64];
};
int process_info(pid_t pid, struct process_info *out);
bool same_process(pid_t pid, uint64_t start);
/* The vram run command whose shared state `pid` holds open (a memfd named
 * vram-command): with `own`, vram run's own (read and written); else one
 * the process inherited (command_inheritable), the innermost command's.
 * The file's device and inode, as the kernel names it; false if none.
 * Plain reads: any thread. */
bool process_command_state(pid_t pid, bool own, uint64_t *dev, uint64_t *ino);
void user_name(uid_t uid, char *out, size_t n);

/* answers.c (answers.h: its files) */
/* Answers one message; -1: drop the connection. */
int answers_handle(struct conn *c, const char *buf, size_t len);
/* Refuses a message with ERR; -1 when the client has run out of strikes. */
int answers_strike(struct conn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The connection is gone: what its client held comes back (a job's is
 * kept while processes of it live: job_keep.h). */
void answers_gone(struct conn *c);
/* A kept job's last process is gone: its grants come back. */
void answers_job_over(struct ledger_client *lc);
/* The driver's work for a message is done (driver_limits_on_done): its
 * answer is said. */
void answers_driver_done(uint64_t ticket, int job, int dev, enum driver_verdict v,
                         const char *why);
/* Admits what now fits of the wait queue. */
void answers_admit_waiting(void);
/* The grants of this turn of the loop: the state file written with them,
 * then each said to its client. The loop calls it after each turn. */
void answers_flush_grants(void);

/* files.c */
#define STATE_EVERY_MS 100
/* Writes a file whole or not at all: a reader sees the old or the new. A
 * name that exists and is not a regular file is refused (EEXIST), and
 * nothing at it is followed or written through. */
int write_atomically(const char *path, mode_t mode, void (*fill)(FILE *));
/* Appends the file at `path` to *buf (*len bytes, a last line ended with
 * a newline) if it is to be believed: a regular file of this daemon's user
 * that no one else may write. Nothing if it is missing. */
void files_read_trusted(const char *path, char **buf, size_t *len);
/* On the timer: the state file within STATE_EVERY_MS of a change (until a
 * write succeeds), the metrics file every D.metrics_ms. */
void files_tick(uint64_t now);
/* The state file now, if it changed (the daemon stops). */
void files_flush(void);
/* Before the grants of client who[i] on device dev[i] are said: each is
 * appended to the state's journal (one write), or, without one, the whole
 * state file is written (a failure said as files_tick says it, and tried
 * again on the timer). who[i] NULL is passed over. */
void files_grants_durable(struct ledger_client *const *who, const int *dev, int n);
#define STATE_LINE_MAX 300
/* The fallback file (what a process may take while the daemon is down),
 * after the policy or the devices change. */
void files_fallback(void);
void fill_state(FILE *f);
void fill_metrics(FILE *f);
/* The grants of the daemon before this one (the state file, then its
 * journal), held for their owners (the devices must be in the ledger
 * first). */
void load_state(void);
void load_state_from(FILE *f); /* what load_state reads, once the file is trusted */
#define RESTORE_GRACE_MS 10000 /* how long a held grant waits for its owner */

#endif
