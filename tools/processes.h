/* processes: who a process holding GPU memory is, as /proc says: for
 * `vram devices` and `vram top`, which show it as nvidia-smi's process
 * table and nvitop do. What NVML says of the GPUs is src/cuda/nvml_query.h.
 */
#ifndef VRAM_PROCESSES_H
#define VRAM_PROCESSES_H

#include "../src/cuda/nvml_processes.h"

#include <stdbool.h>
#include <stddef.h>

/* Who a process is: its real uid and user name, and its command line
 * (arguments joined by spaces). Unknown parts (a process gone, or hidden
 * by /proc's hidepid) are "-" and uid -1. */
struct process_identity {
    long uid;
    char user[64];
    char command[256];
};
void process_identify(unsigned pid, struct process_identity *id);

/* The process's start time (clock ticks after boot, as /proc/PID/stat
 * says and vramd keeps it), or 0 if it is gone. */
unsigned long long process_start(unsigned pid);
/* Its command line, arguments joined by spaces, into out; false if it
 * cannot be read or is empty (a kernel thread, a zombie). */
bool process_command_line(unsigned pid, char *out, size_t n);
/* Its command line from its program's name on, without the program's
 * folder (the arguments say more: nvitop's COMMAND column), into out, and
 * the length of the name in *name_len (unless NULL); with after_dashes,
 * from the word after the first "--" argument (vram run's program) where
 * there is one. The folder ends at the last '/' of the program's own
 * argument, so a folder with spaces ("/home/Jane Doe/bin/train") is left
 * out whole. False if it cannot be read or is empty. */
bool process_program(unsigned pid, bool after_dashes, char *out, size_t n, size_t *name_len);

#endif
