/* text: what vram puts on a terminal from outside (NVML's names and
 * versions, the host's name, /proc): printable ASCII only, so that no
 * byte of a GPU's name or a process's command line can move the cursor,
 * retitle the window or answer for the terminal. One function, for vramd
 * and every tool that shows such text. */
#ifndef VRAM_TEXT_H
#define VRAM_TEXT_H

#include <stddef.h>

/* in, with every byte outside printable ASCII (32 to 126) as '?', into out
 * (n bytes, cut to fit, always terminated). */
void text_printable(char *out, size_t n, const char *in);

#endif
