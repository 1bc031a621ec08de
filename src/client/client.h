/* client: talking to vramd over its UNIX socket.
 *
 * Where the socket is: VRAM_DAEMON names it (or "off": no daemon); else
 * the system daemon's /run/vram/vramd.sock if it exists; else a user's own
 * daemon's $XDG_RUNTIME_DIR/vram/vramd.sock (or /tmp/vram-UID/vramd.sock).
 * No socket means no daemon, and every part of vram then works alone. A
 * daemon that is down leaves its fallback file beside its socket (what a
 * process may hold while it is down): then a daemon is configured, and the
 * agent holds a process to that.
 *
 * Nothing is believed that someone else could have put there: a socket or
 * fallback file counts only if it, and the directory it is in, belong to
 * root or to this user and no one else can replace it, and a connection
 * only if the daemon at its other end runs as root or as this user. Every
 * wait for the daemon is bounded.
 */
#ifndef VRAM_CLIENT_H
#define VRAM_CLIENT_H

#include "../protocol/protocol.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define LEDGER_SYSTEM_SOCKET "/run/vram/vramd.sock"
#define LEDGER_FALLBACK_NAME "vramd.fallback" /* beside the socket */

/* The daemon's default socket for a daemon of this user (root: the
 * system one). */
void ledger_default_socket(char *out, size_t n);
/* The socket a client should use: 0 with the path (a daemon is configured:
 * its socket, or its fallback file, is there); 1 if there is none
 * (VRAM_DAEMON=off, or nothing trustworthy found: then err says what was
 * ignored, or is empty); -1 with err if VRAM_DAEMON is malformed or names a
 * place someone else controls. */
int ledger_find_socket(char *out, size_t n, char *err, size_t errlen);
/* Whether `path` (a socket, or a regular file if !socket) and its
 * directory belong to root or this user and no one else can replace them.
 * True, or false with why. A path that does not exist is trusted if its
 * directory is. */
bool ledger_place_trusted(const char *path, bool socket, char *why, size_t n);

/* Where that file is for the daemon at `socket_path`. */
void ledger_fallback_path(const char *socket_path, char *out, size_t n);
/* What every message about a daemon that is down ends with: how to go on
 * without it. */
#define LEDGER_DOWN_ADVICE "VRAM_DAEMON=off runs without vramd"

/* The fallback beside the daemon's socket: the most a process may hold on
 * the GPU `uuid` while the daemon is down. 0 with *bytes (0: nothing);
 * 1 if there is no such file or line; -1 with why if the file is not to
 * be believed. */
int ledger_fallback(const char *socket_path, const char *uuid, uint64_t *bytes, char *why,
                    size_t n);

/* A connected socket (close-on-exec), or -1 with errno set; waits at most
 * LEDGER_TIMEOUT_MS for a daemon whose backlog is full. */
#define LEDGER_TIMEOUT_MS 10000
int ledger_connect(const char *path);
/* The daemon at the other end runs as root or as this user: true, or false
 * with why. */
bool ledger_peer_trusted(int fd, char *why, size_t n);
/* Sends a built message within LEDGER_TIMEOUT_MS; 0, or -1 (the peer is
 * gone, does not read, or it did not fit). */
int ledger_send(int fd, struct proto_writer *w);
/* Receives and parses one message within timeout_ms (-1: no limit). 0, or
 * -1 with err ("the daemon closed the connection", a timeout, garbage). */
int ledger_recv(int fd, struct proto_msg *m, int timeout_ms, char *err, size_t errlen);
/* The same, and the descriptor that came with the message (SCM_RIGHTS,
 * close-on-exec) in *passed, or -1. */
int ledger_recv_fd(int fd, struct proto_msg *m, int *passed, int timeout_ms, char *err,
                   size_t errlen);

/* Milliseconds on the monotonic clock: what every deadline here is
 * measured in. */
uint64_t ledger_now_ms(void);

/* A daemon that takes longer than this to answer counts as down. */
#define LEDGER_ANSWER_TIMEOUT_MS 10000
/* Heard for each WAIT while a request waits: until when at the latest the
 * daemon holds it (ms from now) and its text. */
typedef void (*ledger_wait_fn)(void *arg, uint64_t until_ms, const char *text);
/* The answer to a request just sent on fd, past any WAITs: 0 with *m the
 * answer (any verb but WAIT), or -1 with why (the connection failed, or no
 * answer came in time: *timed_out). Every wait is bounded: the first
 * answer comes within LEDGER_ANSWER_TIMEOUT_MS; once queued, by the time
 * the first WAIT said (until=, at most wait_ms; without until=, wait_ms,
 * or at once if wait_ms is UINT64_MAX, "as the policy allows") and
 * LEDGER_ANSWER_TIMEOUT_MS more. A daemon that answers WAIT again and
 * again does not move that deadline. on_wait may be NULL. */
int ledger_answer(int fd, uint64_t wait_ms, ledger_wait_fn on_wait, void *arg,
                  struct proto_msg *m, bool *timed_out, char *why, size_t n);

#endif
