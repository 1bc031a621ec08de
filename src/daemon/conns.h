/* conns: the clients' connections, for the loop (vramd.c). */
#ifndef VRAM_CONNS_H
#define VRAM_CONNS_H

#include "daemon.h"

/* What becomes of a connection's messages: answers.c's functions, given by
 * the loop (vramd.c), so that the transport calls no handler by name and
 * the handlers call only conn_send and conns_drop_struck (which
 * tests/fake_conns.c stands in for). */
struct conns_handlers {
    int (*handle)(struct conn *c, const char *buf, size_t len);
    int (*strike)(struct conn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
    void (*gone)(struct conn *c);
    void (*admit_waiting)(void);
};

void conns_init(int listen_fd, int ep, const struct conns_handlers *h);
/* Accepts every pending connection. */
void conns_accept(void);
/* On the timer: accepting again after a pause, closing connections that
 * said nothing for too long. */
void conns_tick(uint64_t now);
/* The client on `fd` has something to read (or has gone). */
void conns_readable(int fd);

#endif
