/* nvml_pid: the pid under which NVML lists a process, and whether the
 * other pids of NVML's list are this process's pid namespace's.
 *
 * NVIDIA's kernel module names each of its clients, to whoever reads the
 * list, by the client's pid in the reader's pid namespace since R535
 * (os_find_ns_pid: pid_vnr; a client the reader cannot see is left out:
 * NVIDIA/open-gpu-kernel-modules, kernel-open/nvidia/os-interface.c, first
 * in 535.43). Before R535 it named each by its pid on the host (the
 * initial pid namespace), whoever read. So a process finds itself in
 * NVML's list under getpid() when it runs in the host's pid namespace, or
 * on a driver of R535 or later; in a container (a pid namespace of its
 * own) on an older driver, under a pid it cannot learn by itself: vramd,
 * on the host, sees it through SO_PEERCRED and says it in its answer to
 * HELLO (pid=). Without that it is not known, and neither are the other
 * pids of the list, which are the host's: nothing of NVML's list may then
 * be matched to a process this one can see in /proc. */
#ifndef VRAM_NVML_PID_H
#define VRAM_NVML_PID_H

#include <stdbool.h>

#define NVML_PID_NAMESPACED_SINCE 535 /* the first driver series naming clients per reader */

struct nvml_pid_view {
    unsigned self;       /* NVML's pid of this process; 0 when it cannot be known */
    bool this_namespace; /* NVML's pids are this process's pid namespace's (its /proc's) */
    const char *why;     /* when self is 0: why, as the end-of-run line says it */
};

/* `driver` is NVML's driver version ("580.65.06"; NULL or not a version:
 * not known, taken as older than R535); `initial` says this process is in
 * the host's pid namespace; `self` is its getpid(); `daemon_pid` what
 * vramd said (0: nothing). */
struct nvml_pid_view nvml_pid_view(const char *driver, bool initial, unsigned self,
                                   unsigned daemon_pid);

/* The series of a driver version ("580.65.06": 580), 0 when not a version. */
int nvml_pid_driver_series(const char *driver);

#endif
