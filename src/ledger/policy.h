/* policy: what the administrator allows, read from a file the
 * administrator owns (default /etc/vram/policy.conf).
 *
 * One directive per line; '#' starts a comment. Amounts are sizes (4GiB)
 * or shares of a device's total (25%, 0.25). DEVICE is a GPU's index or a
 * prefix of its UUID; without "on DEVICE" a rule applies to each device.
 *
 *   default-budget AMOUNT             a process that asks for no budget gets this
 *   cap user|group NAME AMOUNT [on DEVICE]
 *                                     the most one user (all their processes
 *                                     together) or one group may hold on a device
 *   reserve AMOUNT for user|group NAME [on DEVICE]
 *   reserve AMOUNT for job NAME [of user|group OWNER] [on DEVICE]
 *                                     memory no one else may take; a job NAME
 *                                     may end in '*' to match a prefix. A job
 *                                     without "of" is one root registers (a
 *                                     Slurm step); with it, any job or process
 *                                     of that name of the owner's (vram run
 *                                     --job, VRAM_JOB), and no one else's
 *   when-full wait DURATION | fail    a request that does not fit waits (at most
 *                                     DURATION) or fails at once
 *   over-margin SIZE                  report a process whose real usage (NVML)
 *                                     exceeds its budget by more than this
 *   reconcile-every DURATION          how often usage is read from NVML (0: never)
 *   connections-per-user N            the most connections one user (not root) may
 *                                     have open to the daemon (default 4096)
 *   first-message-within DURATION     a connection that says nothing for this long
 *                                     is closed (default 10s)
 *   driver-jobs-per-user N            where the driver holds job grants (per-cgroup
 *                                     limits), the most jobs of one user's own
 *                                     (not root's) it holds at once, each in a
 *                                     cgroup of its own; more are refused (default 32)
 *
 * policy_parse() checks the text alone (what the fuzzer drives);
 * policy_load() reads the file and also resolves user and group names, so
 * a typo in a name is an error, not a rule that never applies.
 */
#ifndef VRAM_POLICY_H
#define VRAM_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#define POLICY_MAX_RULES 256

/* A size, or a share of the device's total. */
struct amount {
    bool is_share;
    uint64_t bytes;
    double share;
};
uint64_t amount_of(const struct amount *a, uint64_t device_total);

enum rule_kind { RULE_CAP, RULE_RESERVE };
enum rule_who { WHO_USER, WHO_GROUP, WHO_JOB };

/* Whose the jobs of a "for job NAME of user|group OWNER" reservation are. */
struct rule_owner {
    bool given;     /* "of" was said */
    enum rule_who who; /* WHO_USER or WHO_GROUP */
    char name[64];
    uint32_t id;    /* the uid or gid, once resolved */
    bool numeric;   /* the name is the id */
};

struct policy_rule {
    enum rule_kind kind;
    enum rule_who who;
    char name[64];
    uint32_t id; /* the uid or gid, once resolved */
    bool numeric; /* the name is the id */
    struct rule_owner owner; /* a job reservation's */
    struct amount amount;
    char device[48]; /* "" for every device */
    int line;
};

struct policy {
    char file[256]; /* where it was read from, for messages */
    int ndirectives;
    /* The lines of the settings (0: not in the file). */
    int default_line, wait_line, margin_line, reconcile_line, conns_line, silent_line;
    int driver_jobs_line;
    bool has_default;
    struct amount default_budget;
    bool wait;         /* when-full wait */
    uint64_t wait_ms;  /* its longest wait */
    uint64_t over_margin;
    uint64_t reconcile_ms;
    uint64_t connections_per_user;
    uint64_t driver_jobs_per_user;
    uint64_t silent_ms; /* first-message-within */
    int nrules;
    struct policy_rule rules[POLICY_MAX_RULES];
};

/* The policy of a file with nothing in it. */
void policy_default(struct policy *p);

/* 0, or -1 with "FILE:LINE: reason" in err; p is written only on success. */
int policy_parse(const char *text, size_t len, const char *file, struct policy *p, char *err,
                 size_t errlen);
/* Reads the file: it must be a regular file, not empty and unchanged while
 * read, so that one caught half-written is refused rather than read as a
 * policy with fewer rules; and one only root (or the daemon's own user)
 * can change: owned by them, writable by no one else. A symbolic link is
 * followed (Kubernetes ConfigMaps, config management) and what it leads
 * to is what is checked. */
int policy_load(const char *path, struct policy *p, char *err, size_t errlen);

/* Checks the rules against the node's GPUs (their UUIDs and sizes): every
 * "on DEVICE" names one of them, a GPU's reservations fit in it, and the
 * default budget fits in each. 0, or -1 with "FILE:LINE: reason". */
int policy_check_devices(const struct policy *p, const char *const *uuids,
                         const uint64_t *totals, int n, char *err, size_t errlen);

/* What the policy says, one line per directive, as understood. */
void policy_describe(const struct policy *p, FILE *out);

/* What a rule may do that its writer may not mean: a "for job" reservation
 * without "of" matches only jobs root registers (Slurm steps), never a
 * user's own vram run --job or VRAM_JOB. Into out (n bytes), "FILE:LINE:
 * ..." and true if rule i has something to say. */
bool policy_rule_warning(const struct policy *p, int i, char *out, size_t n);

/* True if a rule's device selector names this device. */
bool policy_on_device(const struct policy_rule *r, int index, const char *uuid);

#endif
