/* client: talking to vramd over its UNIX socket.
 *
 * Where the socket is: VRAM_DAEMON names it (or "off": no daemon); else
 * the system daemon's /run/vram/vramd.sock if it exists; else a user's own
 * daemon's $XDG_RUNTIME_DIR/vram/vramd.sock (or /tmp/vram-UID/vramd.sock).
 * No socket means no daemon, and every part of vram then works alone.
 */
#ifndef VRAM_CLIENT_H
#define VRAM_CLIENT_H

#include "protocol.h"

#include <stdbool.h>
#include <stddef.h>

#define LEDGER_SYSTEM_SOCKET "/run/vram/vramd.sock"

/* The daemon's default socket for a daemon of this user (root: the
 * system one). */
void ledger_default_socket(char *out, size_t n);
/* The socket a client should use: 0 with the path, 1 if there is none
 * (VRAM_DAEMON=off, or no socket exists), -1 with err if VRAM_DAEMON is
 * malformed. */
int ledger_find_socket(char *out, size_t n, char *err, size_t errlen);

/* A connected socket (close-on-exec), or -1 with errno set. */
int ledger_connect(const char *path);
/* Sends a built message; 0, or -1 (the peer is gone, or it did not fit). */
int ledger_send(int fd, struct proto_writer *w);
/* Receives and parses one message within timeout_ms (-1: no limit). 0, or
 * -1 with err ("the daemon closed the connection", a timeout, garbage). */
int ledger_recv(int fd, struct proto_msg *m, int timeout_ms, char *err, size_t errlen);

#endif
