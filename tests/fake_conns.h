/* fake_conns: vramd's answers without its loop or sockets.
 *
 * answers.c and its files (answers.h) reach a client only through
 * conn_send() (conn_send_fd() for a container's state) and drop clients
 * through conns_drop_struck(); this transport provides them, keeping what
 * the daemon sends per connection. The handler tests (test_answers) and the
 * daemon-level fuzzer (tests/fuzz/fuzz_daemon.c) drive the real handlers
 * and the real ledger with it.
 */
#ifndef VRAM_FAKE_CONNS_H
#define VRAM_FAKE_CONNS_H

#include "../src/daemon/daemon.h"

#ifndef FAKE_KEEP
#define FAKE_KEEP 128 /* answers kept per connection, the first ones */
#endif

struct fake_conn {
    struct conn c;
    bool closed; /* dropped by the daemon, or closed by the test */
    int sent;    /* answers since the last fake_say */
    char out[FAKE_KEEP][PROTO_MAX + 1];
};

/* Sets up D: the policy text (NULL: none) and one device per UUID, as if
 * NVML had listed them (NULL-terminated, each `total` bytes). */
void fake_daemon(const char *policy_text, const char *const *uuids, uint64_t total);
void fake_daemon_end(void);

/* A connection from a process, as the kernel would describe it. */
struct fake_conn *fake_open(pid_t pid, uid_t uid, gid_t gid);
/* One message from the client; then the daemon drops whom it struck.
 * Returns what answers_handle returned. */
int fake_say(struct fake_conn *f, const char *msg);
int fake_send(struct fake_conn *f, const char *msg, size_t len);
/* The client's end closes: its grants come back, waiters are admitted. */
void fake_close(struct fake_conn *f);
/* The first kept answer (since the last fake_say) containing `needle`. */
const char *fake_answer(const struct fake_conn *f, const char *needle);
/* The daemon dies and starts again: its state file is written (to a
 * temporary file), every connection is gone, and a new ledger with the
 * same policy and devices holds the grants of the file for their owners. */
void fake_restart(void);
/* Every connection, closed or not, is freed. */
void fake_free_all(void);

#endif
