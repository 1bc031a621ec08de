/* vram top: vramd's ledger, live. */
#include "../src/ledger/client.h"
#include "../src/util/parse.h"
#include "cli.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

static void top_usage(FILE *out)
{
    fprintf(out,
            "usage: vram top [--once] [--interval DURATION] [--socket PATH]\n"
            "\n"
            "What vramd's ledger holds, refreshed in place: each device (total, reserved\n"
            "for named users or jobs and not yet theirs, granted as budgets, used, used\n"
            "outside any grant), each user (budget, used, peak, waiting) and each process\n"
            "(budget, used, peak, what NVML sees, state), then each device's and each job's\n"
            "trend over the last 2 minutes from vramd's history (Unicode blocks where the\n"
            "locale is UTF-8, else ASCII). Root sees every process; others see their own\n"
            "processes and other users' totals.\n"
            "\n"
            "  --once               print one screen and exit\n"
            "  --interval DURATION  refresh period: seconds (1, 0.5) or 500ms, 2s (default\n"
            "                       1s); 0 is refused: for one screen, --once\n"
            "  --socket PATH        vramd's socket (default: VRAM_DAEMON,\n"
            "                       " LEDGER_SYSTEM_SOCKET ", then the user's own daemon's)\n"
            "  --help               this text\n");
}

int cmd_top(int argc, char **argv)
{
    const char *once = NULL, *interval_text = NULL, *socket_path = NULL, *help = NULL;
    const struct cli_option table[] = {
        {"--once", CLI_FLAG, &once},         {"--interval", CLI_VALUE, &interval_text},
        {"--socket", CLI_VALUE, &socket_path}, {"--help", CLI_FLAG, &help},
        {"-h", CLI_FLAG, &help},             {NULL, 0, NULL},
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
    bool tty = isatty(STDOUT_FILENO);
    for (;;) {
        struct snapshot s;
        if (cli_fetch_ledger("top", socket_path, &s, CLI_HISTORY_RECENT) != 0)
            return 1;
        struct winsize ws;
        int width = tty && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 ? ws.ws_col : 80;
        if (!once && tty)
            fputs("\033[H\033[J", stdout); /* in place */
        snapshot_top(&s, stdout, width);
        snapshot_free(&s);
        fflush(stdout);
        if (once)
            return 0;
        struct timespec t = {(time_t)(interval / 1000), (long)(interval % 1000) * 1000000L};
        nanosleep(&t, NULL);
    }
}
