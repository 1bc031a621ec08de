/* agent: a process's standing with vramd, for the interposer and libvram.
 *
 * When a device is first used, agent_request() asks the daemon for the
 * process's budget on it (the locally configured one, or 0 for the
 * policy's default), waiting in the daemon's queue when VRAM_WAIT says so.
 * The answer becomes the local limit, which the caller keeps enforcing on
 * its own hot path: the daemon is never asked per allocation.
 *
 * After the first grant a background thread reports usage every 200 ms
 * when it changed (one small message per device, not one per allocation)
 * and notices the daemon going away; while it is away the local limits
 * hold, and when it is back the thread re-registers the grants. The
 * connection is the grant: when the process dies, however it dies, the
 * kernel closes it and the daemon takes the memory back.
 *
 * No daemon (no socket, or VRAM_DAEMON=off): AGENT_ALONE, and the caller
 * works exactly as without one. A daemon that is down (its socket does not
 * answer, or only its fallback file is there) is waited for up to 5 s, said
 * on stderr (once while it is down); then the process is held to the
 * daemon's fallback budget for the GPU (and its own, if smaller), or
 * refused if there is none, and the background thread registers that
 * budget when the daemon is back. The daemon's answer then is obeyed: while
 * it does not take a budget (back), the caller takes no more memory of the
 * device (`allow`, said on stderr as VRAM_LOG allows; what the program
 * holds stays its own), so that no restart leaves more budgets than GPU;
 * the budget is offered again every 5 s. A daemon that refuses the process
 * (ERR to HELLO), or one that is not to be trusted, is a refusal. Every
 * wait for the daemon is bounded.
 */
#ifndef VRAM_AGENT_H
#define VRAM_AGENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define AGENT_MAX_SLOTS 64

/* The caller's current and highest usage of its device `slot`. */
/* VRAM_WAIT, read as every process and vram run read it: a duration first
 * (VRAM_WAIT=1 is one second; 0 does not wait), then true (as long as the
 * daemon's policy allows: *ms = AGENT_WAIT_POLICY) or false. Unset is 0.
 * -1 with a message naming the variable, the value and what is accepted. */
#define AGENT_WAIT_POLICY UINT64_MAX
int agent_wait_setting(uint64_t *ms, char *why, size_t n);
/* The same for a value given (NULL: unset): vram oci-hook reads a
 * container's VRAM_WAIT from its environment as written in config.json. */
int agent_wait_parse(const char *value, uint64_t *ms, char *why, size_t n);

/* A process of a container's job (VRAM_COMMAND=vramd, which the CDI spec
 * of vram cdi generate sets): asks vramd for the job's command state,
 * which every process of the container shares (STATE; vramd knows the
 * container by the process's cgroup). 0 with the descriptor in *fd and the
 * job's name; 1 with why when there is none to be had, and the process
 * works as without vram run (no vramd, vramd down, or the process is in
 * no container's job); -1 with why when the daemon at the socket is not
 * to be trusted. Waits AGENT_STATE_TIMEOUT_MS at most. */
#define AGENT_STATE_TIMEOUT_MS 5000
int agent_container_state(int *fd, char *job, size_t jobn, char *why, size_t n);

typedef void (*agent_usage_fn)(int slot, uint64_t *used, uint64_t *peak);
/* The daemon refused to count the budget of device `slot` after it came
 * back (allowed false: the caller takes no more memory of the device), or
 * counts it again (true). Called on the agent's thread. */
typedef void (*agent_allow_fn)(int slot, bool allowed);

enum agent_result { AGENT_ALONE, AGENT_GRANTED, AGENT_DENIED };

/* `slot` is the caller's number for the device (0..AGENT_MAX_SLOTS-1);
 * `bytes` the budget it would enforce alone (0: none configured). On
 * GRANTED *granted is the budget to enforce; on DENIED why says why (and
 * the caller refuses every allocation on the device). */
enum agent_result agent_request(int slot, const char *uuid, uint64_t total, uint64_t bytes,
                                agent_usage_fn usage, agent_allow_fn allow, uint64_t *granted,
                                char *why, size_t n);

/* This process's pid on the host as vramd's answer to HELLO said it
 * (pid=, src/protocol/protocol.h), 0 when no answer said it (no daemon
 * yet, or one outside the host's pid namespace). A pid NVML before R535
 * lists a process in a container under (src/cuda/nvml_pid.h). */
unsigned agent_host_pid(void);

#endif
