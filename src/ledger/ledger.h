/* ledger: who holds how much of which GPU, and whether a request fits.
 *
 * Pure bookkeeping, no I/O: the daemon (src/daemon/answers.c) feeds it what
 * the kernel and the clients say and sends what it answers. Keyed by GPU
 * UUID and by domain: a process, a job (a grant registered by root on a
 * user's behalf, which the job's processes draw from) and, through the
 * policy, a user and a group.
 *
 * A request for W bytes on device D by client C fits when
 *   - for every cap of the policy that covers C on D, what C's user (or
 *     group) holds on D plus W is within the cap;
 *   - granted(D) + W + unseen(D) + reserved-but-unused(D) <= total(D),
 *     where unseen is usage NVML shows and no grant covers (other
 *     processes, contexts), and a reservation's unused part counts against
 *     everyone but those it is for (a budget C holds already and registers,
 *     ledger_register, brings its own unseen usage into W: max(W, C's
 *     unseen) instead of W + C's unseen);
 *   - no older request waits for that memory: requests are served in the
 *     order they came, per device and per cap (a request that waits for a
 *     cap to free holds back only later requests under the same cap; one
 *     that waits for the device, every later one except what a later
 *     request takes from its own reservation).
 * A request that could never fit (more than the cap or the device less
 * others' reservations) is refused even when waiting is allowed.
 *
 * Every grant counts once: a process's grant for itself, or as part of the
 * job it draws from (decided when it is granted, and kept: a job
 * registered later does not change what an earlier grant counts for; a job
 * that ends leaves its processes' grants counting for themselves). Only a
 * job root registered matches a "for job" reservation; the job name a
 * process gives itself is a label, and so is the name of a job a user
 * registers for their own command (vram run).
 *
 * A job's members are the processes its holder reports for (vram run for
 * its command, the Slurm plugin for a step's tasks): they hold no grant and
 * no connection of their own, everything they use is inside the job's
 * grant, and NVML's figure for them is the job's. A job whose holder is
 * gone while members of it live is kept for them (ledger_keep; the daemon
 * decides when, src/daemon/job_keep.h): its grants count until it leaves.
 *
 * The sums admission needs (per device, per policy rule and device, per
 * job) are kept as grants change, so a request costs O(rules), not
 * O(clients); ledger_check recounts them from scratch, for tests.
 */
#ifndef VRAM_LEDGER_H
#define VRAM_LEDGER_H

#include "policy.h"
#include "../protocol/snapshot.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define LEDGER_MAX_DEVICES SNAP_MAX_DEVICES
#define LEDGER_MAX_MEMBERS 1024 /* processes one job may report */
/* Processes a user's jobs may report together: each is a client entry,
 * so a user with many jobs cannot fill the daemon's memory with them. */
#define LEDGER_USER_MEMBERS 4096

enum client_role { ROLE_PROCESS, ROLE_JOB, ROLE_MONITOR };

struct ledger_client;

/* A user of the node, from the first time the daemon sees one of their
 * processes until it stops: what their processes have in use on each
 * device together (each client's in-use figure, and NVML's usage of their
 * processes that hold no grant), and the most that ever was at once. */
struct ledger_user {
    uid_t uid;
    char name[64]; /* "" until known: the daemon names it (ledger_user_of) */
    uint64_t in_use[LEDGER_MAX_DEVICES];
    uint64_t peak[LEDGER_MAX_DEVICES]; /* never goes down */
    int members; /* processes in this user's jobs, all jobs together (LEDGER_USER_MEMBERS) */
};

/* A process NVML sees using a device, as the daemon read it: its uid
 * ((uid_t)-1 if /proc would not say), parent (0: not known) and name
 * (/proc/PID/comm). */
struct ledger_nvml_process {
    pid_t pid;
    uid_t uid;
    uint64_t start, used;
    pid_t ppid;
    char cmd[16];
    /* The vram run command whose state it holds open (inherited), as the
     * kernel names the file; 0 0: none. */
    uint64_t state_dev, state_ino;
};

/* What happened on a device since the daemon started. */
struct ledger_counters {
    uint64_t refused;         /* requests answered DENY, at once or after waiting */
    uint64_t reclaimed;       /* grants taken back from clients that went */
    uint64_t reclaimed_bytes; /* and their sizes */
    uint64_t waits;           /* requests that waited, once their wait ended */
    uint64_t waited_ms;       /* the time they waited, together */
};

struct ledger_use {
    uint64_t grant, used, peak, nvml;
    uint64_t want;        /* a request waiting to be admitted */
    uint64_t wait_seq;    /* its place in the queue */
    uint64_t deadline_ms; /* when it stops waiting */
    uint64_t wait_since_ms; /* the ledger's clock when it began to wait */
    bool waiting, over;
    /* The driver's own limit holds this grant (vramd's driver_limits set
     * it; the daemon's word, the ledger only shows it): a job's cgroup
     * limited to the grant on this device. */
    bool by_driver;
    /* The job this grant draws from (set when granted), or NULL: the grant
     * counts for the client itself. */
    struct ledger_client *job;
    uint64_t drawn; /* a job's: what its processes' grants take of its own */
    /* A job's: what its members report in use together, never more than
     * its grant (or the device): ledger_report bounds each report by what
     * the others leave. */
    uint64_t members_used;
    /* A job's: the most NVML saw its processes use while over its grant
     * (by more than the margin), and the most its holder was told of. */
    uint64_t over_most, over_told;
    /* The device's wait queue, oldest first. */
    struct ledger_client *client;
    struct ledger_use *qprev, *qnext;
};

struct ledger_client {
    int id; /* increasing: the ledger keeps its clients in this order */
    enum client_role role;
    pid_t pid;
    uid_t uid; /* for a job: the job's user */
    gid_t gid;
    int ngroups;
    gid_t *groups; /* supplementary, as the kernel gave them at connect */
    uint64_t start; /* the process's start time, against PID reuse */
    char user[64], cmd[64], job[64];
    struct ledger_user *who; /* its uid's */
    void *owner; /* the daemon's connection (NULL for a member); the ledger never touches it */
    /* A job root registered (the Slurm plugin's), not one a user registered
     * for a command of their own: only such a job is what "for job" is for. */
    bool by_root;
    /* A member: a process of this job, reported by the job's holder. */
    struct ledger_client *member_of;
    int nmembers; /* a job's */
    struct ledger_client **members; /* a job's, by pid: one lookup per MEMBER */
    int members_cap;
    /* A grant of the daemon before a restart, held for its owner until
     * then (ms) or until it re-registers; 0 for a connected client. */
    uint64_t held_until_ms;
    /* A job a user registered for a vram run command: the command's
     * shared state, which its processes inherit (the daemon's word, once
     * it has read it from vram run; 0 0 until then). */
    uint64_t state_dev, state_ino;
    /* A job whose holder is gone, kept for its processes (ledger_keep). */
    bool kept;
    struct ledger_use use[LEDGER_MAX_DEVICES];
};

struct ledger_device {
    char uuid[48];
    /* What NVML says of it (the daemon fills them in; "" and -1 unknown). */
    char name[64], pci_bus_id[32];
    int minor;
    uint64_t total;
    uint64_t unseen;  /* NVML usage of processes that are not clients */
    uint64_t granted; /* the grants on it, each counted once */
    uint64_t used;    /* in use: by NVML outside clients, and each process's own figure
                         or NVML's, whichever is larger */
    uint64_t excess;  /* NVML usage of clients beyond their grants */
    /* Grants and usage outside them exceed the device (NVML's last look):
     * some budget cannot be had in full. */
    bool overcommitted;
    int nwaiting;
    struct ledger_use *qhead, *qtail;
    /* From the last look at the queue: an older request waits for the
     * device's memory; for the caps (by rule index) an older request waits. */
    bool queue_blocked;
    uint64_t cap_blocked[POLICY_MAX_RULES / 64];
    /* NVML's processes using it that hold no grant (NVML's last look). */
    int nunseen;
    struct ledger_nvml_process *unseen_by;
    struct ledger_counters counters;
};

struct ledger {
    struct policy policy;
    int ndev;
    struct ledger_device dev[LEDGER_MAX_DEVICES];
    /* Per rule and device: what the clients the rule covers hold there. */
    uint64_t held[POLICY_MAX_RULES][LEDGER_MAX_DEVICES];
    int nclients, cap;
    struct ledger_client **clients; /* by id */
    int njobs;
    struct ledger_client **jobs; /* the clients of role JOB, few */
    int nheld; /* clients held for their owners after a restart */
    int nkept; /* jobs kept for their processes, their holders gone */
    int next_id;
    uint64_t next_seq;
    int nusers, users_cap;
    struct ledger_user **users; /* by uid */
    /* The latest time the daemon gave (ledger_admit_waiting,
     * ledger_expire_held): what waits are timed by. */
    uint64_t now_ms;
};

void ledger_init(struct ledger *l, const struct policy *p);
void ledger_destroy(struct ledger *l);
/* A new policy (SIGHUP); the sums follow. Waiters are not admitted here:
 * the caller runs ledger_admit_waiting. */
void ledger_set_policy(struct ledger *l, const struct policy *p);

/* The device's slot, added if new; -1 if the ledger is full. A total of 0
 * leaves a known total alone. */
int ledger_device(struct ledger *l, const char *uuid, uint64_t total);
int ledger_find_device(const struct ledger *l, const char *uuid);

struct ledger_client *ledger_join(struct ledger *l, enum client_role role, pid_t pid, uid_t uid,
                                  gid_t gid);
/* The client's supplementary groups (copied); -1 if out of memory. */
int ledger_set_groups(struct ledger *l, struct ledger_client *c, const gid_t *groups, int n);
/* Removes the client and everything it held. The caller then runs
 * ledger_admit_waiting. */
void ledger_leave(struct ledger *l, struct ledger_client *c);
struct ledger_client *ledger_find_client(const struct ledger *l, int id);

enum verdict { VERDICT_GRANT, VERDICT_WAIT, VERDICT_DENY };

/* Asks for `bytes` on device `dev` (0: the policy's default budget). On
 * GRANT the grant is recorded (and *granted says how much); on WAIT the
 * request is queued until `deadline_ms`; why says why not, in words. */
enum verdict ledger_request(struct ledger *l, struct ledger_client *c, int dev, uint64_t bytes,
                            bool may_wait, uint64_t deadline_ms, uint64_t *granted, char *why,
                            size_t whylen);
/* A budget the client holds already, registered: taken while the daemon
 * was down, or held before a restart and not held for it since (its grace
 * passed). Admitted as a new request that does not wait, but what NVML last
 * saw its process use outside any grant is part of the budget, not on top
 * of it: the process's memory is not counted twice against it. */
enum verdict ledger_register(struct ledger *l, struct ledger_client *c, int dev, uint64_t bytes,
                             uint64_t *granted, char *why, size_t whylen);
/* After a restart: a grant the daemon before this one made (its state
 * file), held for its owner, who is not connected yet. It counts like any
 * grant until the owner takes it back (ledger_adopt) or ledger_expire_held
 * ends it. `from_job` names the job a process's grant drew from, or NULL.
 * The held client, or NULL if out of memory. */
struct ledger_client *ledger_hold(struct ledger *l, enum client_role role, bool by_root,
                                  pid_t pid, uint64_t start, uid_t uid, gid_t gid,
                                  const char *job, int dev, uint64_t bytes, const char *from_job,
                                  uint64_t until_ms);
/* A client re-registering: takes `bytes` on `dev` over from the grant held
 * for the same process (role, pid, start time, uid, and for a job its
 * name), without admission, since it was counted all along. False if no
 * held grant covers it: then it is a new request. */
bool ledger_adopt(struct ledger *l, struct ledger_client *c, int dev, uint64_t bytes);
/* Ends the held grants whose time is up or whose process is gone
 * (`alive` says; NULL: time only), telling `gone` of each first, which may
 * keep a job instead (ledger_keep) and say so (true). The caller then runs
 * ledger_admit_waiting. */
typedef bool (*ledger_alive_fn)(pid_t pid, uint64_t start);
void ledger_expire_held(struct ledger *l, uint64_t now_ms, ledger_alive_fn alive,
                        bool (*gone)(struct ledger_client *c, void *arg), void *arg);
/* Job c's holder is gone (its connection closed, or its held grant is
 * not taken back) and processes of it live: the job stays, with its
 * grants and members, no longer anyone's connection (owner NULL), its
 * waits ended, until it leaves (ledger_leave). */
void ledger_keep(struct ledger *l, struct ledger_client *c);
/* A kept job held by a connection again (`owner`): a container's job, to
 * which the runtime's hook for another of its GPUs adds a grant. It is
 * kept again when that connection closes. */
void ledger_unkeep(struct ledger *l, struct ledger_client *c, void *owner);
void ledger_release(struct ledger *l, struct ledger_client *c, int dev);
/* What the policy guarantees the client on a device: the largest
 * reservation that covers it there, at most its grant; 0 if none does. */
uint64_t ledger_guarantee(const struct ledger *l, const struct ledger_client *c, int dev);
/* Usage of a client, or of a member, on a device. A client's figures are
 * bounded by its grant, a member's by what its job's grant (and the
 * device) leaves beside the other members': a client, or a job's
 * processes together, never show more than was granted, whatever they
 * say (what NVML sees beyond is counted apart, as excess). */
void ledger_report(struct ledger *l, struct ledger_client *c, int dev, uint64_t used,
                   uint64_t peak);

/* The member of `job` that is the process pid (with its start time), added
 * if new; NULL if out of memory, or the job has LEDGER_MAX_MEMBERS already,
 * or its user LEDGER_USER_MEMBERS in all their jobs. A member leaves with
 * ledger_leave, and with its job. O(log members) to find one. */
struct ledger_client *ledger_member(struct ledger *l, struct ledger_client *job, pid_t pid,
                                    uint64_t start);
/* The member of `job` that is pid, or NULL. */
struct ledger_client *ledger_find_member(const struct ledger *l, const struct ledger_client *job,
                                         pid_t pid);

/* Admits what now fits of the queues, oldest first, and ends the waits that
 * passed their deadline; `answer` is told of each (granted, or timed out
 * with a reason). */
typedef void (*ledger_answer_fn)(struct ledger_client *c, int dev, bool granted, uint64_t bytes,
                                 const char *why, void *arg);
void ledger_admit_waiting(struct ledger *l, uint64_t now_ms, ledger_answer_fn answer, void *arg);

/* The job a process of role PROCESS would draw from now (a job root
 * registered for the process's user and job name, holding a grant on
 * `dev`), or NULL. */
struct ledger_client *ledger_job_of(const struct ledger *l, const struct ledger_client *c,
                                    int dev);

/* Takes in NVML's view of one device: the processes using it, each with
 * its start time (0 if it could not be read), uid, parent, name and
 * usage. A client's real usage is matched by pid and start time; a process
 * not matched whose parent is a job's member or holder is the job's (a
 * process its holder has not reported yet), and so is one of the job's
 * user that holds the job's command state open (state_dev, state_ino: a
 * process of a vram run command that cleared its environment and left the
 * process tree, re-parented to init); the rest is unseen usage, kept
 * by process (unseen_by) and counted for its user.
 * Returns the clients that have just gone over budget by more than the
 * policy's margin, in *over (up to max). */
int ledger_reconcile(struct ledger *l, int dev, const struct ledger_nvml_process *procs, int n,
                     struct ledger_client **over, int max);

/* The record of a user (added if new; NULL if out of memory), for the
 * daemon to name. */
struct ledger_user *ledger_user_of(struct ledger *l, uid_t uid);

/* What a reader with `viewer_uid` may see: every user's total per device
 * (role 'u': no pid, command, job or client id), and the clients and the
 * processes outside grants (role 'n') the reader may see: root every one,
 * others their own. LEDGER_VIEW_ANYONE sees totals only (what a file
 * anyone can read may say). */
#define LEDGER_VIEW_ANYONE ((uid_t)-1)
void ledger_snapshot(const struct ledger *l, uid_t viewer_uid, struct snapshot *s);
/* The same in pages: the devices, and at most `max` entries after the
 * cursor `after` (0: from the start). *next is the cursor to ask for the
 * following page, 0 when this one is the last. Entries come in a fixed
 * order (the clients the viewer sees by id, the processes outside grants by
 * pid, then the users' totals by uid), so paging through a ledger that
 * changes meanwhile never gives an entry twice. */
void ledger_snapshot_page(const struct ledger *l, uid_t viewer_uid, uint64_t after, int max,
                          struct snapshot *s, uint64_t *next);

/* Recounts every kept sum and the queues from scratch: 0 if they agree,
 * -1 with what differs (tests and the fuzzer). */
int ledger_check(const struct ledger *l, char *err, size_t errlen);

#endif
