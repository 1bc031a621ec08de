/* vram oci-hook and vramd (oci_hook.h): the container found and checked
 * becomes one job, registered on one connection (CONTAINER, once per GPU),
 * vramd's answer deciding whether it starts; at poststop its job ends
 * (STOPPED). */
#include "../src/client/agent.h"
#include "../src/client/client.h"
#include "../src/client/fetch.h"
#include "../src/protocol/protocol.h"
#include "oci_hook.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LEDGER_GPUS_MAX 16 /* GPUs of "all": as many as vramd keeps */

bool oci_hook_saying(void)
{
    const char *log = getenv("VRAM_LOG");
    return log && (strcmp(log, "info") == 0 || strcmp(log, "debug") == 0);
}

static void said_waiting(void *arg, uint64_t until_ms, const char *text)
{
    const struct container *c = arg;
    if (oci_hook_saying())
        fprintf(stderr, "vram oci-hook: container %s: waiting up to %.1f s for GPU memory: %s\n",
                c->name, (double)until_ms / 1000, text);
}

/* vramd's socket, connected and trusted: the descriptor; -2 when there is
 * no vramd to ask (the interposer alone holds the container's processes,
 * each to its budget); -1 after a refusal (why). */
static int connect_vramd(const struct container *c, char *why, size_t n)
{
    char path[108], err[256];
    int r = ledger_find_socket(path, sizeof path, err, sizeof err);
    if (r < 0) {
        snprintf(why, n, "%s", err);
        return -1;
    }
    if (r > 0) {
        if (oci_hook_saying())
            fprintf(stderr, "vram oci-hook: container %s: no vramd (%s); the interposer alone "
                            "holds each of its processes to its budget\n",
                    c->name, err[0] ? err : "VRAM_DAEMON=off");
        return -2;
    }
    int fd = ledger_connect(path);
    if (fd < 0) {
        /* A vramd stopped on purpose takes its socket with it; one that
         * crashed leaves a socket no one answers: as vram run, the
         * processes then hold what vramd's fallback file allows. */
        if (oci_hook_saying())
            fprintf(stderr, "vram oci-hook: container %s: vramd at %s does not answer (%s); the "
                            "interposer alone holds its processes\n",
                    c->name, path, strerror(errno));
        return -2;
    }
    if (!ledger_peer_trusted(fd, why, n)) {
        close(fd);
        return -1;
    }
    return fd;
}

/* The GPUs to register: the one the CDI device is (its UUID, or its index
 * as NVML and vramd number it), or for "all" every GPU vramd knows. */
static int gpus_of(const struct container *c, char (*uuid)[96], int max, char *why, size_t n)
{
    bool index = strspn(c->gpu, "0123456789") == strlen(c->gpu);
    if (strcmp(c->gpu, "all") != 0 && !index) {
        snprintf(uuid[0], sizeof uuid[0], "%s", c->gpu);
        return 1;
    }
    char path[108], err[256];
    struct snapshot s;
    if (ledger_find_socket(path, sizeof path, err, sizeof err) != 0 ||
        snapshot_fetch(path, &s, err, sizeof err) != 0) {
        snprintf(why, n, "cannot ask vramd for its GPUs: %s", err);
        return -1;
    }
    int k = 0;
    for (int d = 0; d < s.ndev && k < max; d++)
        if (!index || s.dev[d].index == atoi(c->gpu))
            snprintf(uuid[k++], sizeof uuid[0], "%s", s.dev[d].uuid);
    if (!k)
        snprintf(why, n, "GPU %s: vramd has no GPU of that index (it has %d)", c->gpu, s.ndev);
    snapshot_free(&s);
    return k ? k : -1;
}

/* The container becomes one vramd job (CONTAINER, once per GPU, on one
 * connection): vramd's answer decides whether it starts. The hook exits
 * once granted; vramd holds the job for the container's cgroup. */
int oci_hook_register(const struct container *c, char *why, size_t n)
{
    if (oci_hook_saying())
        fprintf(stderr,
                "vram oci-hook: container %s (%s): pid %ld, cgroup %s, GPU %s, budget %s%s%s%s%s, "
                "user %u (its processes run as %u)\n",
                c->name, c->id, c->pid, c->cgroup, c->gpu,
                c->limit_var[0] ? c->limit_var : "vramd's", c->limit_var[0] ? "=" : " policy default",
                c->limit_value, c->limit_origin[0] ? " from " : "", c->limit_origin,
                (unsigned)c->owner, (unsigned)c->as);
    int fd = connect_vramd(c, why, n);
    if (fd < 0)
        return fd == -2 ? 0 : 1;
    char (*uuid)[96] = calloc(LEDGER_GPUS_MAX, sizeof *uuid);
    int ngpus = uuid ? gpus_of(c, uuid, LEDGER_GPUS_MAX, why, n) : -1;
    int rc = ngpus < 0 ? 1 : 0, granted = 0;
    char text[64];
    for (int i = 0; i < ngpus && !rc; i++) {
        struct proto_writer w;
        proto_begin(&w, VERB_CONTAINER);
        proto_add(&w, "id", c->id);
        proto_add(&w, "name", c->name);
        proto_add_u64(&w, "pid", (uint64_t)c->pid);
        proto_add(&w, "cgroup", c->cgroup);
        proto_add(&w, "dev", uuid[i]);
        if (c->fraction > 0) {
            snprintf(text, sizeof text, "%.9g", c->fraction);
            proto_add(&w, "fraction", text);
        } else {
            proto_add_u64(&w, "bytes", c->bytes);
        }
        if (c->speaks_for) {
            proto_add_u64(&w, "uid", c->owner);
            proto_add_u64(&w, "gid", c->group);
            proto_add_u64(&w, "as", c->as);
        }
        uint64_t wait = c->wait_ms == AGENT_WAIT_POLICY ? UINT64_MAX / 2 : c->wait_ms;
        if (wait)
            proto_add_u64(&w, "wait", wait);
        struct proto_msg m;
        bool timed_out;
        if (ledger_send(fd, &w) != 0 ||
            ledger_answer(fd, wait ? wait : 0, said_waiting, (void *)c, &m, &timed_out, why, n)) {
            rc = 1;
            break;
        }
        const char *t = proto_get(&m, "text");
        if (m.verb == VERB_GRANT) {
            granted++;
            if (oci_hook_saying())
                fprintf(stderr, "vram oci-hook: container %s: granted %s bytes on %s%s\n",
                        c->name, proto_get(&m, "bytes") ? proto_get(&m, "bytes") : "?", uuid[i],
                        proto_get(&m, "backend") ? ", held by the driver's limit too" : "");
        } else {
            snprintf(why, n, "vramd %s the container GPU memory on %s: %s",
                     m.verb == VERB_DENY ? "refused" : "did not grant", uuid[i],
                     t ? t : proto_verb_name(m.verb));
            rc = 1;
        }
    }
    if (rc && granted) {
        /* Not starting: what it was granted goes back now, not when the
         * runtime has removed its cgroup. */
        struct proto_writer w;
        struct proto_msg m;
        char err[128];
        proto_begin(&w, VERB_STOPPED);
        proto_add(&w, "id", c->id);
        if (ledger_send(fd, &w) == 0)
            ledger_recv(fd, &m, LEDGER_ANSWER_TIMEOUT_MS, err, sizeof err);
    }
    free(uuid);
    close(fd);
    return rc;
}

/* poststop: the container's job ends now (vramd also ends it the moment
 * its cgroup is empty). */
int oci_hook_end(const struct container *c, char *why, size_t n)
{
    if (oci_hook_saying())
        fprintf(stderr, "vram oci-hook: container %s (%s) stopped\n", c->name, c->id);
    int fd = connect_vramd(c, why, n);
    if (fd < 0)
        return fd == -2 ? 0 : 1;
    struct proto_writer w;
    struct proto_msg m;
    char err[256];
    proto_begin(&w, VERB_STOPPED);
    proto_add(&w, "id", c->id);
    int rc = 0;
    if (ledger_send(fd, &w) != 0 ||
        ledger_recv(fd, &m, LEDGER_ANSWER_TIMEOUT_MS, err, sizeof err) != 0) {
        snprintf(why, n, "vramd did not answer STOPPED: %s", err);
        rc = 1;
    } else if (m.verb != VERB_OK) {
        snprintf(why, n, "vramd: %s", proto_get(&m, "text") ? proto_get(&m, "text") : "refused");
        rc = 1;
    } else if (oci_hook_saying()) {
        fprintf(stderr, "vram oci-hook: container %s: its job ended\n", c->name);
    }
    close(fd);
    return rc;
}

