/* What the ledger's files share (ledger.c, ledger_admit.c, ledger_held.c,
 * ledger_view.c); not for the ledger's users, who have ledger.h. */
#ifndef VRAM_LEDGER_INTERNAL_H
#define VRAM_LEDGER_INTERNAL_H

#include "ledger.h"

/* Whether a policy rule covers a client (its user, a group of its, or, for
 * "job", a job root registered with a matching name). */
bool ledger_rule_covers(const struct policy_rule *r, const struct ledger_client *c);
/* What a client's grant on a device adds to the device's granted sum:
 * nothing for a monitor or a grant drawn from a job. */
uint64_t ledger_own_grant(const struct ledger_client *c, int d);
/* NVML's usage of a client beyond its grant (a member's is its job's). */
uint64_t ledger_excess(const struct ledger_client *c, int d);
/* What a client has in use on a device, for the device's in-use figure. */
uint64_t ledger_in_use(const struct ledger_client *c, int d);
/* Adds (+1) or takes away (-1) what a client's standing on a device puts
 * in the kept sums: around every change of what they are made of. */
void ledger_account(struct ledger *l, struct ledger_client *c, int d, int sign);
/* Sets a client's grant on a device and the job it draws from, sums and all. */
void ledger_set_grant(struct ledger *l, struct ledger_client *c, int d, uint64_t bytes,
                      struct ledger_client *job);
/* The device's wait queue. */
void ledger_enqueue(struct ledger *l, struct ledger_client *c, int d);
void ledger_dequeue(struct ledger *l, struct ledger_client *c, int d);
/* Unused reservations that count against c if it takes w more (c NULL:
 * against everyone). */
uint64_t ledger_reserved_against(const struct ledger *l, const struct ledger_client *c, int dev,
                                 uint64_t w);

#endif
