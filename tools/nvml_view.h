/* nvml_view: the node as NVML and the commands' own states show it, for
 * `vram top` and `vram status` where no vramd runs.
 *
 * A snapshot (src/ledger/snapshot.h) as the daemon's would be, so that one
 * screen draws both: every GPU NVML lists (by NVML's index, as vramd and
 * nvidia-smi number them) with its memory and sensors; every process NVML
 * lists, with its user from /proc, as a 'p' entry where it has a budget and
 * an 'n' entry where it has none; and each `vram run` command of this user
 * as a job ('j', named run-PID after vram run's pid) with its budget and
 * what its live processes hold by its own count (a killed one's count left
 * out, as vramd leaves out a client that went), its processes its members. A
 * command is found as its processes find it: VRAM_COMMAND in a process's
 * environment names the memfd of its state in /proc/PID/fd, which only the
 * command's user (or root, for their own commands) may open; other users'
 * processes are shown with NVML's figures alone.
 */
#ifndef VRAM_NVML_VIEW_H
#define VRAM_NVML_VIEW_H

#include "../src/protocol/snapshot.h"

#include <stddef.h>

/* Loads NVML (nvml_query.h) for the views that follow. 0, or -1 with the
 * reason. */
int nvml_view_open(char *err, size_t n);
void nvml_view_close(void);
/* The node now, into s (initialised here; the caller frees it). 0, or -1
 * with the reason. */
int nvml_view_take(struct snapshot *s, char *err, size_t n);

#endif
