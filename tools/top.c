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
#include "terminal.h"

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
            "What vramd's ledger holds, refreshed in place, as htop and nvitop show a\n"
            "machine: a header (host, time, driver, CUDA and NVML versions); each GPU\n"
            "(name, total, reserved for named users or jobs and not yet theirs, granted\n"
            "as budgets, used, used outside any grant, free) with a bar (# used,\n"
            "= granted or reserved, . free) and its UUID; each user (processes, budget,\n"
            "used, the most they held at once, used outside grants, waiting); each\n"
            "process (budget, used, peak, what NVML sees, state: ok, OVER its budget,\n"
            "wait N in the queue, unseen for memory used without a grant; running time,\n"
            "command); then, where there is room, each GPU's and each job's trend over\n"
            "the last 2 minutes from vramd's history (Unicode blocks where the locale is\n"
            "UTF-8, else ASCII). Root sees every process; others see their own\n"
            "processes and other users' totals. The GPUs stay on screen; the processes\n"
            "scroll.\n"
            "\n"
            "Keys: q quit; m, u, p, t, g sort the processes by memory, user, pid,\n"
            "running time or GPU; r reverses; arrows, PgUp, PgDn, Home, End scroll.\n"
            "\n"
            "  --once               print one screen and exit\n"
            "  --interval DURATION  refresh period: seconds (1, 0.5) or 500ms, 2s (default\n"
            "                       1s); 0 is refused: for one screen, --once\n"
            "  --sort KEY           the processes' order at start: memory (default), user,\n"
            "                       pid, time or gpu\n"
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
            process_command_line((unsigned)e->pid, line, sizeof line)) {
            /* The program's name without its folder: the arguments say more. */
            size_t end = strcspn(line, " ");
            const char *base = line;
            for (size_t k = 0; k < end; k++)
                if (line[k] == '/' && k + 1 < end)
                    base = line + k + 1;
            snprintf(l->line[i], sizeof l->line[i], "%s", base);
        }
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
static int print_screens(const char *socket_path, struct top_view *v, bool once,
                         uint64_t interval)
{
    struct winsize ws;
    const char *columns = getenv("COLUMNS");
    if (isatty(STDOUT_FILENO) && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col)
        v->width = ws.ws_col;
    else
        v->width = columns && atoi(columns) > 0 ? atoi(columns) : 80;
    for (int first = 1;; first = 0) {
        struct snapshot s;
        if (cli_fetch_ledger("top", socket_path, &s, CLI_HISTORY_RECENT) != 0)
            return 1;
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

/* The live screen: keys and a refresh every interval. */
static int live(const char *socket_path, struct snapshot s, struct top_view *v, uint64_t interval)
{
    struct lines l = {0};
    read_lines(&l, &s);
    v->live = true;
    v->command_line = command_line, v->arg = &l;
    char problem[600] = "";
    uint64_t next = now_ms() + interval;
    int rows = 0;
    for (;;) {
        uint64_t now = now_ms();
        if (now >= next) {
            struct snapshot fresh;
            char err[512];
            if (cli_take_ledger(socket_path, &fresh, CLI_HISTORY_RECENT, err, sizeof err) >= 0) {
                snapshot_free(&s);
                s = fresh;
                read_lines(&l, &s);
                problem[0] = 0;
            } else {
                snprintf(problem, sizeof problem, "vramd: %s (trying again)", err);
            }
            v->problem = problem[0] ? problem : NULL;
            next = now + interval;
        }
        draw(&s, v, &rows);
        now = now_ms();
        int key = terminal_key(next > now ? (int)(next - now) : 0);
        int page = v->height > 12 ? v->height / 2 : 5;
        switch (key) {
        case 'q': case 'Q': case KEY_EOF:
            terminal_close();
            free(l.line);
            snapshot_free(&s);
            return 0;
        case 'r': v->reverse = !v->reverse; break;
        case KEY_UP: case 'k': v->scroll--; break;
        case KEY_DOWN: case 'j': v->scroll++; break;
        case KEY_PGUP: v->scroll -= page; break;
        case KEY_PGDN: case ' ': v->scroll += page; break;
        case KEY_HOME: v->scroll = 0; break;
        case KEY_END: v->scroll = rows; break; /* the screen keeps it within bounds */
        default:
            for (int k = 0; k < SORT_COUNT; k++)
                if (key == top_sort_key[k] || key == top_sort_key[k] - 'a' + 'A') {
                    v->sort = (enum top_sort)k;
                    v->scroll = 0;
                }
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
    struct top_view v = {.width = 80, .sort = SORT_MEMORY};
    if (sort) {
        int k = 0;
        while (k < SORT_COUNT && strcmp(sort, top_sort_name[k]) != 0)
            k++;
        if (k == SORT_COUNT)
            return cli_usage_error("top", "--sort \"%s\": not a sort; accepted: memory, user, "
                                   "pid, time or gpu", sort);
        v.sort = (enum top_sort)k;
    }
    if (!once && isatty(STDIN_FILENO) && isatty(STDOUT_FILENO)) {
        /* The first look decides: no daemon, no screen taken. */
        struct snapshot s;
        if (cli_fetch_ledger("top", socket_path, &s, CLI_HISTORY_RECENT) != 0)
            return 1;
        if (terminal_open() == 0)
            return live(socket_path, s, &v, interval);
        snapshot_free(&s);
    }
    return print_screens(socket_path, &v, once != NULL, interval);
}
