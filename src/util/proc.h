/* proc: what /proc says of a process, where more than one part asks. */
#ifndef VRAM_PROC_H
#define VRAM_PROC_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* The process's start time in clock ticks after boot (/proc/PID/stat's
 * field 22): with the pid, what tells a process from a later one that
 * reuses its pid. 0 if it is gone or cannot be read. */
uint64_t proc_start_time(pid_t pid);
/* The children of every thread of process pid (/proc/PID/task/TID/
 * children: a thread's own, which a process whose children other threads
 * forked, or whose orphans were handed to it as a subreaper, needs all of),
 * at most max of them in out: how many were read. */
int proc_children(pid_t pid, pid_t *out, int max);

/* This process runs in the host's pid namespace (the initial one, whose
 * inode the kernel fixes: PROC_PID_INIT_INO), so that its pid is the one
 * the host sees. True too when /proc cannot say (no /proc mounted). */
bool proc_in_initial_pid_namespace(void);

#endif
