/* vram status: vramd's ledger once (or, without vramd, NVML's view, as vram
 * top shows it: source.h), for people (the top screen), scripts (--json) or
 * metrics (--prometheus). */
#include "../src/client/client.h"
#include "../src/view/metrics.h"
#include "../src/view/screen.h"
#include "../src/view/snapshot_json.h"
#include "cli.h"
#include "source.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

static void status_usage(FILE *out)
{
    fprintf(out,
            "usage: vram status [--json [--no-history] | --prometheus] [--socket PATH]\n"
            "\n"
            "Who holds how much GPU memory on this node, as vramd's ledger says, printed\n"
            "once: each GPU (total, reserved, granted, used, used outside any grant, free:\n"
            "total less used, grantable: what vramd would grant a request now, the\n"
            "figure its refusals give), each user and each process (budget, used, peak,\n"
            "what NVML sees, waiting or over budget, what holds it to its budget: the\n"
            "driver's own per-cgroup limit, or the interposer alone) and the trend of\n"
            "each GPU and job: the vram top screen, or the same for programs. Root sees\n"
            "every process; others see their own processes and other users' totals.\n"
            "Without vramd (none running, or VRAM_DAEMON=off), as vram top --once: NVML's\n"
            "view and your vram run commands' budgets, saying that vramd is not running,\n"
            "and exits with 3 (as systemctl status for a service not running; 0 when\n"
            "vramd answers).\n"
            "\n"
            "  --json          the same as one JSON object, for scripts: {\"vramd\" (false:\n"
            "                  NVML's view, the ledger's own figures null), \"host\",\n"
            "                  \"driver_version\", \"nvml_version\", \"cuda_driver_version\",\n"
            "                  \"devices\", \"users\", \"processes\", \"waiting\" (in queue\n"
            "                  order), \"unseen\" (processes using memory no grant covers)};\n"
            "                  sizes in bytes, null where unknown; each GPU and each of\n"
            "                  the reader's processes with its \"history\": the highest in\n"
            "                  use and budget of every second of the last 2 minutes\n"
            "                  (\"recent\") and of every 10 s of the last hour (\"hour\").\n"
            "                  man vram lists every field\n"
            "  --no-history    --json without the history\n"
            "  --prometheus    the same in Prometheus text format (as vramd --metrics-file\n"
            "                  writes it; vram_vramd_up 0 for NVML's view)\n"
            "  --socket PATH   vramd's socket (default: VRAM_DAEMON,\n"
            "                  " LEDGER_SYSTEM_SOCKET ", then the user's own daemon's)\n"
            "  --help          this text\n");
}

int cmd_status(int argc, char **argv)
{
    const char *json = NULL, *prom = NULL, *socket_path = NULL, *help = NULL, *bare = NULL;
    const struct cli_option table[] = {
        {"--json", CLI_FLAG, &json},   {"--prometheus", CLI_FLAG, &prom},
        {"--no-history", CLI_FLAG, &bare},
        {"--socket", CLI_VALUE, &socket_path}, {"--help", CLI_FLAG, &help},
        {"-h", CLI_FLAG, &help},       {NULL, 0, NULL},
    };
    if (cli_parse("status", table, argc, argv, 2, false) < 0)
        return 2;
    if (help) {
        status_usage(stdout);
        return 0;
    }
    if (json && prom)
        return cli_usage_error("status", "--json and --prometheus: give one of them");
    if (bare && !json)
        return cli_usage_error("status", "--no-history is an option of --json");
    enum cli_history history = bare || prom ? CLI_HISTORY_NONE
                               : json       ? CLI_HISTORY_ALL
                                            : CLI_HISTORY_RECENT;
    struct snapshot s;
    static struct source src;
    if (source_open("status", socket_path, history, &src, &s) != 0)
        return 1;
    if (json)
        snapshot_json(&s, stdout);
    else if (prom)
        snapshot_prometheus(&s, stdout);
    else {
        struct top_view v = {.width = 80, .title = "vram status", .nvml_view = src.nvml,
                             .problem = src.note[0] ? src.note : NULL};
        const char *columns = getenv("COLUMNS");
        struct winsize ws;
        if (isatty(STDOUT_FILENO) && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col)
            v.width = ws.ws_col;
        else if (columns && atoi(columns) > 0)
            v.width = atoi(columns);
        v.now = time(NULL);
        snapshot_top(&s, &v, stdout);
    }
    snapshot_free(&s);
    bool nvml = src.nvml;
    source_close(&src);
    /* Printed, but no vramd answered: 3, as systemctl status and LSB's
     * status actions say "not running", so that a script (or a wait for
     * vramd to start) can still tell. */
    return nvml ? 3 : 0;
}
