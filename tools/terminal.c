/* terminal: raw keys, the alternate screen, and the terminal given back. */
#include "terminal.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

/* What the handlers need, set before they are installed. */
static struct termios saved;
static volatile sig_atomic_t taken, resized;

#define ENTER "\033[?1049h\033[?25l" /* the alternate screen, the cursor hidden */
#define LEAVE "\033[?25h\033[?1049l"

static void put(const char *s, size_t n)
{
    while (n > 0) {
        ssize_t w = write(STDOUT_FILENO, s, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        s += w, n -= (size_t)w;
    }
}

/* Async-signal-safe: write and tcsetattr only. */
static void give_back(void)
{
    if (!taken)
        return;
    taken = 0;
    put(LEAVE, sizeof LEAVE - 1);
    tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved);
}

static int take(void)
{
    struct termios raw = saved;
    /* Keys as they are typed, not echoed; ^C and ^Z still send their
     * signals (ISIG stays), and output is as usual (OPOST stays). */
    raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
    raw.c_cc[VMIN] = 1;
    raw.c_cc[VTIME] = 0;
    if (tcsetattr(STDIN_FILENO, TCSAFLUSH, &raw) != 0)
        return -1;
    taken = 1;
    put(ENTER, sizeof ENTER - 1);
    return 0;
}

static void on_end(int sig)
{
    int e = errno;
    give_back();
    signal(sig, SIG_DFL);
    raise(sig); /* as it would have ended top without us */
    errno = e;
}

static void on_stop(int sig)
{
    (void)sig;
    int e = errno;
    give_back();
    signal(SIGTSTP, SIG_DFL);
    raise(SIGTSTP); /* stops here; continues below on SIGCONT */
    signal(SIGTSTP, on_stop);
    take();
    resized = 1; /* draw again */
    errno = e;
}

static void on_winch(int sig)
{
    (void)sig;
    resized = 1;
}

void terminal_close(void)
{
    give_back();
}

int terminal_open(void)
{
    if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO) || tcgetattr(STDIN_FILENO, &saved) != 0)
        return -1;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    sa.sa_handler = on_end;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    sigaction(SIGQUIT, &sa, NULL);
    sa.sa_handler = on_stop;
    sigaction(SIGTSTP, &sa, NULL);
    sa.sa_handler = on_winch; /* no SA_RESTART: poll returns at once */
    sigaction(SIGWINCH, &sa, NULL);
    if (take() != 0)
        return -1;
    atexit(terminal_close);
    return 0;
}

void terminal_size(int *width, int *height)
{
    struct winsize ws;
    *width = 80, *height = 24;
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col && ws.ws_row)
        *width = ws.ws_col, *height = ws.ws_row;
}

/* The next byte within ms, or -1. */
static int byte(int ms)
{
    struct pollfd p = {STDIN_FILENO, POLLIN, 0};
    if (poll(&p, 1, ms) <= 0)
        return -1;
    unsigned char c;
    return read(STDIN_FILENO, &c, 1) == 1 ? c : -2;
}

int terminal_key(int timeout_ms)
{
    if (resized) {
        resized = 0;
        return KEY_RESIZE;
    }
    struct pollfd p = {STDIN_FILENO, POLLIN, 0};
    int r = poll(&p, 1, timeout_ms);
    if (r < 0 && errno == EINTR && resized) {
        resized = 0;
        return KEY_RESIZE;
    }
    if (r <= 0)
        return KEY_NONE;
    int c = byte(0);
    if (c == -2 || (p.revents & (POLLHUP | POLLERR) && c < 0))
        return KEY_EOF;
    if (c != 27)
        return c < 0 ? KEY_NONE : c;
    /* An escape sequence arrives whole; a lone ESC is ignored. */
    int c1 = byte(30);
    if (c1 != '[' && c1 != 'O')
        return KEY_NONE;
    int c2 = byte(30);
    switch (c2) {
    case 'A': return KEY_UP;
    case 'B': return KEY_DOWN;
    case 'H': return KEY_HOME;
    case 'F': return KEY_END;
    case '1': case '4': case '5': case '6': case '7': case '8': {
        int c3 = byte(30);
        while (c3 >= 0 && c3 != '~' && c3 < 64) /* parameters, as in ESC [ 5 ; 2 ~ */
            c3 = byte(30);
        if (c3 != '~')
            return KEY_NONE;
        return c2 == '5' ? KEY_PGUP : c2 == '6' ? KEY_PGDN : c2 == '1' || c2 == '7' ? KEY_HOME
                                                                                     : KEY_END;
    }
    default: return KEY_NONE;
    }
}

void terminal_draw(const char *screen, size_t len)
{
    /* Built whole, written at once: no flicker between clearing and drawing. */
    size_t cap = len * 5 + 64, n = 0;
    char *out = malloc(cap);
    if (!out)
        return;
    memcpy(out, "\033[H", 3), n = 3;
    for (size_t i = 0; i < len; i++) {
        if (screen[i] == '\n') {
            memcpy(out + n, "\033[K", 3), n += 3;
            if (i + 1 < len) /* the last line ends without one: no scrolling */
                out[n++] = '\r', out[n++] = '\n';
            continue;
        }
        out[n++] = screen[i];
    }
    memcpy(out + n, "\033[J", 3), n += 3;
    put(out, n);
    free(out);
}
