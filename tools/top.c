/* vram top: vramd's ledger, live, as htop and nvitop show a machine.
 *
 * In a terminal it takes the screen (terminal.c): the screen is drawn from
 * the last snapshot at every key (sorting and scrolling never wait for the
 * daemon) and a new snapshot is fetched every --interval; a daemon that
 * stops answering is said under the header while the last picture stays.
 * Elsewhere (a pipe, a file) it prints whole screens, as top -b does. */
#include "../src/client/client.h"
#include "../src/view/screen.h"
#include "../src/util/parse.h"
#include "cli.h"
#include "processes.h"
#include "source.h"
#include "terminal.h"

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

static void top_usage(FILE *out)
{
    fprintf(out,
            "usage: vram top [--once] [--interval DURATION] [--sort KEY] [--socket PATH]\n"
            "\n"
            "Who holds the GPUs' memory, refreshed in place, as htop and nvitop show a\n"
            "machine. With vramd, its ledger: a header (host, time, driver, CUDA and\n"
            "NVML versions); each GPU (name, total, reserved for named users or jobs and\n"
            "not yet theirs, granted as budgets, used, used outside any grant, free: total\n"
            "less used, grantable: what vramd would grant a request now) with a bar\n"
            "(# used, = granted or reserved, . free) and its UUID; each user\n"
            "(processes, budget, used, the most they held at once, used outside grants,\n"
            "waiting); each job, its processes under it, and each process (budget, used,\n"
            "peak, what NVML sees, state: ok, OVER its budget, wait N in the queue,\n"
            "unseen for memory used without a grant; LIMIT where the driver holds some\n"
            "grant (driver R615 and later, vramd --driver-limits): driver or interposer;\n"
            "running time, command); then, where there is room, each GPU's and each\n"
            "job's trend over the last 2 minutes from vramd's history (Unicode blocks\n"
            "where the locale is UTF-8, else ASCII). Root sees every process; others\n"
            "see their own processes and other users' totals.\n"
            "Without vramd (none found, or VRAM_DAEMON=off), NVML's view, for any user,\n"
            "saying why under the header: each GPU (used, free, the budgets of the\n"
            "commands on it, utilisation, temperature, power), each user's total, each\n"
            "process NVML lists (any user's), and each of your vram run commands as a\n"
            "job (run-PID: its budget, what its live processes hold by its count, the\n"
            "most they held). The GPUs stay on screen; the processes scroll.\n"
            "\n"
            "Keys: q quit; m, u, p, t, g sort the processes by memory, user, pid,\n"
            "running time or GPU (a new sort starts in its own order, the same key again\n"
            "reverses it); r reverses; arrows select a process, PgUp, PgDn, Home, End\n"
            "scroll; k sends the selected process SIGTERM after asking (your own\n"
            "processes; root: anyone's).\n"
            "\n"
            "  --once               print one screen and exit\n"
            "  --interval DURATION  refresh period: seconds (1, 0.5) or 500ms, 2s (default\n"
            "                       1s); 0 is refused: for one screen, --once\n"
            "  --sort KEY           the processes' order at start: memory (default), user,\n"
            "                       pid, time or gpu, or the start of one (mem)\n"
            "  --socket PATH        vramd's socket (default: VRAM_DAEMON,\n"
            "                       " LEDGER_SYSTEM_SOCKET ", then the user's own daemon's)\n"
            "  --help               this text\n");
}

/* The processes' full command lines, read once per snapshot where this
 * user may (their own processes; root's, all): nvitop's COMMAND column.
 * Only a process with the start time the ledger has is the ledger's. */
struct lines {
    const struct snapshot *s;
    char (*line)[256];
};

static void read_lines(struct lines *l, const struct snapshot *s)
{
    free(l->line);
    l->s = s;
    l->line = calloc((size_t)s->n + 1, sizeof *l->line);
    for (int i = 0; l->line && i < s->n; i++) {
        const struct snap_entry *e = &s->e[i];
        char line[sizeof l->line[i]];
        if ((e->role == 'p' || e->role == 'n') && e->pid > 0 && e->start &&
            process_start((unsigned)e->pid) == e->start &&
            process_program((unsigned)e->pid, false, line, sizeof line, NULL))
            snprintf(l->line[i], sizeof l->line[i], "%s", line);
    }
}

static const char *command_line(const struct snap_entry *e, void *arg)
{
    const struct lines *l = arg;
    ptrdiff_t i = e - l->s->e;
    return l->line && i >= 0 && i < l->s->n && l->line[i][0] ? l->line[i] : NULL;
}

static void clocks(struct top_view *v)
{
    v->now = time(NULL);
    v->ticks = sysconf(_SC_CLK_TCK);
    v->uptime = 0;
    FILE *f = fopen("/proc/uptime", "re");
    if (f) {
        if (fscanf(f, "%lf", &v->uptime) != 1)
            v->uptime = 0;
        fclose(f);
    }
}

/* Whole screens on standard output: --once, or not a terminal. */
static int print_screens(const struct source *src, struct snapshot s, struct top_view *v,
                         bool once, uint64_t interval)
{
    struct winsize ws;
    const char *columns = getenv("COLUMNS");
    if (isatty(STDOUT_FILENO) && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col)
        v->width = ws.ws_col;
    else
        v->width = columns && atoi(columns) > 0 ? atoi(columns) : 80;
    for (int first = 1;; first = 0) {
        char err[512];
        if (!first && source_take(src, &s, err, sizeof err) != 0) {
            fprintf(stderr, "vram top: %s\n", err);
            return 1;
        }
        struct lines l = {0};
        read_lines(&l, &s);
        v->command_line = command_line, v->arg = &l;
        clocks(v);
        if (!first)
            putchar('\n');
        snapshot_top(&s, v, stdout);
        free(l.line);
        snapshot_free(&s);
        fflush(stdout);
        if (once)
            return 0;
        struct timespec t = {(time_t)(interval / 1000), (long)(interval % 1000) * 1000000L};
        nanosleep(&t, NULL);
    }
}

static uint64_t now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

static void draw(const struct snapshot *s, struct top_view *v, int *rows)
{
    terminal_size(&v->width, &v->height);
    clocks(v);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return;
    *rows = snapshot_top(s, v, f);
    fclose(f);
    terminal_draw(buf, len);
    free(buf);
}

/* A signal from the screen, as htop and nvitop send one: to the selected
 * row's process, this user's own (root: anyone's), after a question. */
struct signal_ask {
    bool asking;
    struct snap_entry who;
    char name[64];
};

static void ask_signal(const struct top_view *v, const struct lines *l, struct signal_ask *a,
                       char *say, size_t n)
{
    const struct snap_entry *e = &v->selected;
    if (!v->pick.on) {
        snprintf(say, n, "select a process first (arrow keys), then k");
        return;
    }
    if (e->pid <= 0 || e->role == 'u') {
        snprintf(say, n, "no process on that row to signal");
        return;
    }
    if (e->role == 'j') { /* its holder is vram run, or Slurm's slurmstepd */
        snprintf(say, n, "a job's row: select one of its processes to signal");
        return;
    }
    if (getuid() != 0 && e->uid != (uint32_t)getuid()) {
        snprintf(say, n, "%d is %s's process: you may signal only your own", e->pid, e->user);
        return;
    }
    a->asking = true;
    a->who = *e;
    /* The name from the snapshot's own entry (command_line's argument). */
    const char *line = NULL;
    for (int i = 0; i < l->s->n && !line; i++) {
        const struct snap_entry *x = &l->s->e[i];
        if (x->pid == e->pid && x->dev == e->dev && x->id == e->id && x->role == e->role)
            line = command_line(x, (void *)l);
    }
    if (!line)
        line = e->cmd;
    snprintf(a->name, sizeof a->name, "%.*s", (int)strcspn(line, " "), line);
    snprintf(say, n, "send SIGTERM to %d (%s)? y/n", e->pid, a->name);
}

static void answer_signal(struct signal_ask *a, int key, char *say, size_t n)
{
    a->asking = false;
    const struct snap_entry *e = &a->who;
    if (key != 'y' && key != 'Y') {
        snprintf(say, n, "no signal sent");
        return;
    }
    /* The pid may be another process's by now. */
    if (e->start && process_start((unsigned)e->pid) != e->start) {
        snprintf(say, n, "%d (%s) has ended: no signal sent", e->pid, a->name);
        return;
    }
    if (kill(e->pid, SIGTERM) != 0)
        snprintf(say, n, "SIGTERM to %d (%s): %s", e->pid, a->name, strerror(errno));
    else
        snprintf(say, n, "sent SIGTERM to %d (%s)", e->pid, a->name);
}

/* The live screen: keys and a refresh every interval. */
static int live(const struct source *src, struct snapshot s, struct top_view *v,
                uint64_t interval)
{
    struct lines l = {0};
    read_lines(&l, &s);
    v->live = true;
    v->cursor = -1;
    v->command_line = command_line, v->arg = &l;
    char problem[600] = "", say[300] = "";
    struct signal_ask ask = {0};
    uint64_t next = now_ms() + interval;
    int rows = 0;
    for (;;) {
        uint64_t now = now_ms();
        if (now >= next) {
            struct snapshot fresh;
            char err[512];
            if (source_take(src, &fresh, err, sizeof err) == 0) {
                snapshot_free(&s);
                s = fresh;
                read_lines(&l, &s);
                snprintf(problem, sizeof problem, "%s", src->note); /* why NVML's, or "" */
            } else {
                snprintf(problem, sizeof problem, "%s: %s (trying again)",
                         src->nvml ? "NVML" : "vramd", err);
            }
            v->problem = problem[0] ? problem : NULL;
            next = now + interval;
        }
        v->prompt = say[0] ? say : NULL;
        draw(&s, v, &rows);
        now = now_ms();
        int key = terminal_key(next > now ? (int)(next - now) : 0);
        if (key == KEY_NONE || key == KEY_RESIZE)
            continue;
        say[0] = 0; /* an answer stays until the next key */
        if (ask.asking && key != KEY_EOF) {
            answer_signal(&ask, key, say, sizeof say);
            next = now; /* show what it did */
            continue;
        }
        int page = v->height > 12 ? v->height / 2 : 5;
        bool moved = true, selecting = v->cursor >= 0;
        switch (key) {
        case 'q': case 'Q': case KEY_EOF:
            terminal_close();
            free(l.line);
            snapshot_free(&s);
            return 0;
        case 'r': v->reverse = !v->reverse; break;
        case 'k': ask_signal(v, &l, &ask, say, sizeof say); break;
        case KEY_UP: v->cursor = v->cursor < 0 ? v->scroll : v->cursor - 1; break;
        case KEY_DOWN: v->cursor = v->cursor < 0 ? v->scroll : v->cursor + 1; break;
        case KEY_PGUP: v->scroll -= page, v->cursor -= v->cursor >= 0 ? page : 0; break;
        case KEY_PGDN: case ' ': v->scroll += page, v->cursor += v->cursor >= 0 ? page : 0; break;
        case KEY_HOME: v->scroll = 0, v->cursor = v->cursor >= 0 ? 0 : -1; break;
        case KEY_END: /* the screen keeps both within bounds */
            v->scroll = rows, v->cursor = v->cursor >= 0 ? rows : -1;
            break;
        default:
            moved = false;
            for (int k = 0; k < SORT_COUNT; k++)
                if (key == top_sort_key[k] || key == top_sort_key[k] - 'a' + 'A') {
                    /* A new sort starts in its own order (as nvitop's);
                     * the same key again turns it round. */
                    v->reverse = (int)v->sort == k ? !v->reverse : false;
                    v->sort = (enum top_sort)k;
                    v->scroll = 0;
                }
        }
        if (moved && key != 'r' && key != 'k') {
            if ((selecting || key == KEY_UP || key == KEY_DOWN) && v->cursor < 0)
                v->cursor = 0; /* a selection stays one; the screen keeps it in bounds */
            v->pick.on = false; /* the row moved: the selection is where it is now */
        }
    }
}

int cmd_top(int argc, char **argv)
{
    const char *once = NULL, *interval_text = NULL, *socket_path = NULL, *help = NULL,
               *sort = NULL;
    const struct cli_option table[] = {
        {"--once", CLI_FLAG, &once},           {"--interval", CLI_VALUE, &interval_text},
        {"--sort", CLI_VALUE, &sort},          {"--socket", CLI_VALUE, &socket_path},
        {"--help", CLI_FLAG, &help},           {"-h", CLI_FLAG, &help},
        {NULL, 0, NULL},
    };
    if (cli_parse("top", table, argc, argv, 2, false) < 0)
        return 2;
    if (help) {
        top_usage(stdout);
        return 0;
    }
    /* --interval 0 is refused rather than read as "as fast as possible"
     * (a busy loop against the daemon) or "once" (that is --once). */
    uint64_t interval = 1000;
    parse_why why;
    if (interval_text && parse_duration(interval_text, &interval, &why) != 0)
        return cli_usage_error("top", "--interval \"%s\": %s; accepted: %s", interval_text,
                               why.text, PARSE_DURATION_FORMS);
    if (interval == 0)
        return cli_usage_error("top", "--interval \"%s\": the refresh period must be more than "
                               "0 (for one screen, use --once); accepted: %s",
                               interval_text, PARSE_DURATION_FORMS);
    struct top_view v = {.width = 80, .sort = SORT_MEMORY, .cursor = -1};
    if (sort) {
        int k = top_sort_named(sort);
        if (k < 0)
            return cli_usage_error("top", "--sort \"%s\": names no sort; accepted: memory, user, "
                                   "pid, time or gpu, or the start of just one of them (mem)",
                                   sort);
        v.sort = (enum top_sort)k;
    }
    /* The first look decides: no vramd and no NVML, no screen taken. */
    static struct source src;
    struct snapshot s;
    if (source_open("top", socket_path, CLI_HISTORY_RECENT, &src, &s) != 0)
        return 1;
    v.nvml_view = src.nvml;
    v.problem = src.note[0] ? src.note : NULL;
    int rc;
    if (!once && isatty(STDIN_FILENO) && isatty(STDOUT_FILENO) && terminal_open() == 0)
        rc = live(&src, s, &v, interval);
    else
        rc = print_screens(&src, s, &v, once != NULL, interval);
    source_close(&src);
    return rc;
}
