/* source: where vram top and vram status take the node's picture from.
 *
 * vramd's ledger where one answers (or where --socket names one); else
 * NVML's view and the reader's own vram run commands (nvml_view.h), with a
 * line that says plainly why: vramd is not running, is not to be asked
 * (VRAM_DAEMON=off: no socket is named then), or does not answer. One
 * choice for both commands, so that `vram status` and `vram top --once`
 * show the same node the same way.
 */
#ifndef VRAM_SOURCE_H
#define VRAM_SOURCE_H

#include "cli.h"

#include <stdbool.h>
#include <stddef.h>

struct source {
    bool nvml;              /* NVML's view (the snapshot's nvml_view) */
    const char *socket;     /* --socket's; NULL: found as every client finds it */
    enum cli_history history;
    char note[600];         /* why NVML's view, for under the header; "" with vramd */
};

/* Chooses, and takes the first picture into s (the caller frees it). 0, or
 * 1 after a message on stderr that names `cmd` (--socket names no vramd
 * that answers, VRAM_DAEMON is malformed, or neither vramd nor NVML can be
 * read). */
int source_open(const char *cmd, const char *socket_path, enum cli_history history,
                struct source *src, struct snapshot *s);
/* Another picture from the same source: 0, or -1 with the reason. */
int source_take(const struct source *src, struct snapshot *s, char *err, size_t n);
void source_close(struct source *src);

#endif
