/* protocol: the messages between vramd and its clients.
 *
 * The socket is a UNIX SOCK_SEQPACKET socket, so each message arrives
 * whole or not at all, and one longer than PROTO_MAX is seen as truncated
 * rather than run into the next. A message is one line of text:
 *
 *     VRAM/1 VERB key=value key=value ... [text=free text to the end]
 *
 * Text, because a person debugging with socat can read it and a fuzzer
 * finds the edges of a small grammar quickly. Values are printable ASCII
 * without spaces, except `text`, which must come last and takes the rest of
 * the line. Nothing in a message says who sent it: the daemon learns the
 * sender's pid, uid and gid from the kernel (SO_PEERCRED).
 *
 * Client to daemon:
 *   HELLO role=process|command|monitor [cmd=NAME] [job=NAME] [start=TICKS]
 *                       role=command: vram run, for its whole command: a job
 *                       of this user's (named job=, else run-PID) whose
 *                       REQUESTs are the command's grants
 *   REQUEST dev=UUID total=BYTES bytes=BYTES [wait=MS] [restore=BYTES]
 *                       ask for a budget on a device (bytes=0: the policy's
 *                       default); restore= re-registers one already held
 *   REPORT dev=UUID used=BYTES peak=BYTES      usage, batched by the client
 *                       (a job's: all its processes')
 *   RELEASE dev=UUID                           give a grant back early
 *   JOB job=NAME uid=N gid=N dev=UUID|index=N total=BYTES bytes=BYTES [restore=BYTES]
 *                       root only: a grant for a job (Slurm), held by this
 *                       connection; processes of the job draw from it
 *   MEMBER pid=N [dev=UUID used=BYTES peak=BYTES]
 *                       a job's (JOB or role=command): process N of the job,
 *                       a process of the job's user, uses this inside the
 *                       job's grant; without dev=, it has left the job
 *   PLACE job=NAME [cgroup=PATH]
 *                       root only, on a connection of its own: put the sender
 *                       (the kernel's pid, a Slurm task before it execs) in
 *                       the cgroup of job NAME, registered by root (JOB),
 *                       where the driver holds its grants, made below the
 *                       sender's; with cgroup= (Slurm's step cgroup, as
 *                       /proc/PID/cgroup writes it, the sender at or below
 *                       it), that cgroup holds them, nothing moved; answered
 *                       OK backend=driver (placed) or backend=interposer
 *                       (nothing to do), or ERR
 *   CONTAINER id=ID name=NAME pid=N cgroup=PATH dev=UUID total=BYTES
 *             [bytes=BYTES | fraction=F] [uid=N gid=N as=N] [wait=MS]
 *                       vram oci-hook, at a container's creation: container ID
 *                       (NAME as podman ps shows it), whose first process is
 *                       pid N (the kernel's word: in cgroup PATH, as
 *                       /proc/PID/cgroup writes it, whose last part names ID)
 *                       is one job, named NAME@ID's first 12, held by that
 *                       cgroup, never moved (vramd ends it when the cgroup is
 *                       empty, or at STOPPED); asks for its budget on dev=
 *                       (bytes=0 and no fraction=: the policy's default), one
 *                       message per GPU. uid=, gid= (the job's owner) and as=
 *                       (the user its processes run as) are root's word only:
 *                       a user registers only their own container. Answered
 *                       as REQUEST: GRANT, WAIT, DENY
 *   STOPPED id=ID       vram oci-hook at poststop: container ID's job ends
 *                       (root, or the job's user)
 *   STATE               a process of a container's job (vramd finds which by
 *                       the sender's cgroup): OK job=NAME with the job's
 *                       command state, a descriptor (SCM_RIGHTS), which the
 *                       interposer uses as vram run's (VRAM_COMMAND=vramd);
 *                       DENY when the sender is in no container's job
 *   STATUS [after=CURSOR]                      the ledger, as its reader may see it,
 *                       one page: the first (no after=) with the devices
 *   HISTORY [job=NAME] [tier=recent|all] [after=CURSOR]
 *                       the recent past (history.h), one page: without job=,
 *                       the devices' and the live clients' series the reader
 *                       may see; with it, that job's (live or ended)
 * Daemon to client:
 *   OK [client=ID] [pid=N]
 *                    to HELLO, pid= is the client's pid as the kernel gave
 *                    it to vramd (SO_PEERCRED), said only where vramd runs
 *                    in the host's pid namespace: the pid an NVML before
 *                    R535 lists a process in a container under
 *                    (src/cuda/nvml_pid.h)
 *                    GRANT dev= bytes= [backend=driver: the driver's limit holds
 *                    it too]   WAIT dev= until=MS text=   DENY dev= text=
 *   ERR text=        and for STATUS: NODE ..., DEV ..., PROC ..., END [next=CURSOR]
 *                    (NODE and DEV on the first page only; next=: ask again
 *                    with after=CURSOR for the next page)
 *                    for HISTORY: per series SERIES ... then SAMPLES ...
 *                    (history_view.h), END [next=CURSOR] now=MS wall=MS
 * A list of numbers (SAMPLES) is written in runs: "5,7*3" is 5,7,7,7.
 */
#ifndef VRAM_PROTOCOL_H
#define VRAM_PROTOCOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PROTO_VERSION 1
#define PROTO_MAX 1024 /* bytes in one message, the longest that is accepted */
#define PROTO_MAX_FIELDS 24
#define PROTO_NAME_MAX 64 /* a job, command or user name */
/* The most devices a daemon keeps and its messages name (dev= below it):
 * the ledger's, its snapshot's and its history's. */
#define SNAP_MAX_DEVICES 16

enum proto_verb {
    VERB_HELLO, VERB_REQUEST, VERB_REPORT, VERB_RELEASE, VERB_JOB, VERB_STATUS, VERB_MEMBER,
    VERB_OK, VERB_GRANT, VERB_WAIT, VERB_DENY, VERB_ERR, VERB_NODE, VERB_DEV, VERB_PROC, VERB_END,
    VERB_HISTORY, VERB_SERIES, VERB_SAMPLES, VERB_PLACE, VERB_CONTAINER, VERB_STOPPED,
    VERB_STATE,
    VERB_COUNT
};

const char *proto_verb_name(enum proto_verb v);

struct proto_msg {
    enum proto_verb verb;
    int nfields;
    struct {
        const char *key, *value;
    } field[PROTO_MAX_FIELDS];
    char buf[PROTO_MAX + 1]; /* the fields point into this copy */
};

/* Parses one message of `len` bytes. 0, or -1 with the reason in err: a
 * wrong version, an unknown verb, a malformed or repeated field. */
int proto_parse(const char *data, size_t len, struct proto_msg *m, char *err, size_t errlen);

/* A field's value, or NULL. */
const char *proto_get(const struct proto_msg *m, const char *key);
/* Reads a field as a decimal number up to `max`. 1 if absent (and `out`
 * untouched), 0 if read, -1 with a reason in err if malformed. */
int proto_get_u64(const struct proto_msg *m, const char *key, uint64_t max, uint64_t *out,
                  char *err, size_t errlen);
/* Reads a field that is a list of numbers written in runs ("0,4096*12,8"),
 * each number up to `max_value`, into out[0..max) and its length into *n.
 * 1 if absent, 0 if read, -1 with a reason in err if malformed: an empty
 * item, a count of 0, more than `max` numbers. */
int proto_get_runs(const struct proto_msg *m, const char *key, uint64_t max_value, uint64_t *out,
                   int max, int *n, char *err, size_t errlen);
/* True if s is a name the protocol carries: 1..PROTO_NAME_MAX-1 of
 * [A-Za-z0-9._:@+/-]. */
bool proto_name_ok(const char *s);
/* Copies s into out as a name the protocol carries: other bytes become
 * '_', an empty string "-". */
void proto_name_clean(const char *s, char *out, size_t n);

/* Building a message. Adding past PROTO_MAX marks the writer overflowed,
 * and proto_end() then returns -1 rather than send half a message. */
struct proto_writer {
    char buf[PROTO_MAX + 1];
    size_t len;
    bool overflow;
};
void proto_begin(struct proto_writer *w, enum proto_verb v);
void proto_add(struct proto_writer *w, const char *key, const char *value);
void proto_add_u64(struct proto_writer *w, const char *key, uint64_t value);
/* A list of numbers, written in runs (see proto_get_runs). */
void proto_add_runs(struct proto_writer *w, const char *key, const uint64_t *v, int n);
/* How many bytes proto_add_runs writes for v[0..n), separators included,
 * without the key. */
size_t proto_runs_length(const uint64_t *v, int n);
/* The free text field; must be the last. */
void proto_add_text(struct proto_writer *w, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* The message's length, or -1 if it did not fit. */
int proto_end(struct proto_writer *w);

#endif
