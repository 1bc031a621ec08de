/* conns: the clients' connections, for the loop (vramd.c). */
#ifndef VRAM_CONNS_H
#define VRAM_CONNS_H

#include "daemon.h"

void conns_init(int listen_fd, int ep);
/* Accepts every pending connection. */
void conns_accept(void);
/* On the timer: accepting again after a pause, closing connections that
 * said nothing for too long. */
void conns_tick(uint64_t now);
/* The client on `fd` has something to read (or has gone). */
void conns_readable(int fd);

#endif
