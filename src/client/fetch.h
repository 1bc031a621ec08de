/* fetch: a reader's questions to vramd, each answered page after page
 * (bounded answers; a cursor that does not move on ends the question):
 * the ledger as a snapshot (STATUS) and its history (HISTORY). For vram
 * status, top, devices and plot, the tests and the benchmark; not in the
 * programs vram governs, which only ask for their grants (agent.h).
 */
#ifndef VRAM_FETCH_H
#define VRAM_FETCH_H

#include "../protocol/history_view.h"
#include "../protocol/snapshot.h"

#include <stdbool.h>
#include <stddef.h>

/* Asks the daemon at `socket_path` for the ledger (STATUS, page after
 * page) and rebuilds it in s (initialised here; the caller frees it). 0,
 * or -1 with err. */
int snapshot_fetch(const char *socket_path, struct snapshot *s, char *err, size_t errlen);

/* Asks the daemon at socket_path for its history (HISTORY page after page;
 * job NULL: the devices and the live clients). v is initialised here; the
 * caller frees it. 0, or -1 with err (the daemon's own words when it
 * refused). */
int history_fetch(const char *socket_path, const char *job, bool recent_only,
                  struct history_view *v, char *err, size_t errlen);

#endif
