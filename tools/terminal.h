/* terminal: the terminal `vram top` lives in, as htop and nvitop use it.
 *
 * Keys are read one at a time (no line editing, no echo), the screen is
 * drawn on the alternate screen with the cursor hidden, and the terminal is
 * given back exactly as it was however top ends: q, an error, or a signal
 * (Ctrl-C, SIGTERM, SIGHUP: the terminal is restored in the handler, then
 * the signal is taken as it would have been). Ctrl-Z gives the terminal
 * back while top is stopped and takes it again when it continues.
 */
#ifndef VRAM_TERMINAL_H
#define VRAM_TERMINAL_H

#include <stdbool.h>
#include <stddef.h>

enum {
    KEY_NONE = 0, /* the time passed */
    KEY_RESIZE = 256, /* the terminal changed size, or top continued after Ctrl-Z */
    KEY_UP, KEY_DOWN, KEY_PGUP, KEY_PGDN, KEY_HOME, KEY_END,
    KEY_EOF, /* the terminal is gone */
};

/* Takes the terminal on standard input and output. 0, or -1 (then nothing
 * was changed). */
int terminal_open(void);
/* Gives it back (also done at exit). */
void terminal_close(void);
/* Its size now. */
void terminal_size(int *width, int *height);
/* Waits up to timeout_ms for a key: a character (its code), one of the
 * KEY_ values, or KEY_NONE. */
int terminal_key(int timeout_ms);
/* Draws a screen of newline-ended lines from the top left corner, each
 * line cleared to its end and the rest of the screen below it. */
void terminal_draw(const char *screen, size_t len);

#endif
