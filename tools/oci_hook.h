/* oci_hook: vram oci-hook's two halves. oci_hook.c reads and checks what
 * the container runtime hands the hook (its state, the bundle's
 * config.json, the container's process and cgroup) into a struct
 * container; oci_vramd.c makes that container one vramd job, and ends it.
 */
#ifndef VRAM_OCI_HOOK_H
#define VRAM_OCI_HOOK_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* What the hook found: the job a container is. */
struct container {
    char id[256];   /* the runtime's id (podman: 64 hex digits) */
    char name[256]; /* as podman ps shows it, else the id's first 12 characters */
    long pid;       /* its first process, on the host (createRuntime) */
    char cgroup[PATH_MAX]; /* as /proc/PID/cgroup says it (cgroup2's "0::" line) */
    char gpu[96];          /* the GPU's UUID, or "all" */
    char limit_var[32], limit_value[224]; /* the budget as set, or "" for the policy's */
    char limit_origin[64]; /* where it was set: "the container's environment", ... */
    uint64_t bytes;        /* the budget on each GPU: a size, */
    double fraction;       /* or a fraction of it (0: neither, the policy's default) */
    uint64_t wait_ms;      /* VRAM_WAIT: how long its admission may wait */
    /* Whose it is, said to vramd where the hook runs as root on the host
     * (rootful: the runtime's word); in a user namespace (rootless) vramd
     * takes the kernel's word instead, and nothing is said. */
    bool speaks_for;
    uid_t owner;           /* the user the job belongs to */
    gid_t group;
    uid_t as;              /* the user its processes run as, on the host */
};

/* VRAM_LOG=info or debug: the hook says what it found and did. */
bool oci_hook_saying(void);
/* createRuntime: container c becomes one vramd job (CONTAINER per GPU);
 * 0 when granted, or when there is no vramd to ask (the interposer then
 * holds each of its processes alone); 1 with why (vramd's refusal) to
 * fail the container's start. */
int oci_hook_register(const struct container *c, char *why, size_t n);
/* poststop: its job ends (STOPPED). 0, or 1 with why. */
int oci_hook_end(const struct container *c, char *why, size_t n);

#endif
