/* source: vramd's ledger or NVML's view (source.h). */
#include "source.h"

#include "../src/client/client.h"
#include "nvml_view.h"

#include <stdio.h>
#include <string.h>

int source_take(const struct source *src, struct snapshot *s, char *err, size_t n)
{
    if (src->nvml)
        return nvml_view_take(s, err, n);
    return cli_take_ledger(src->socket, s, src->history, err, n) < 0 ? -1 : 0;
}

int source_open(const char *cmd, const char *socket_path, enum cli_history history,
                struct source *src, struct snapshot *s)
{
    char path[256], err[512];
    *src = (struct source){.socket = socket_path, .history = history};
    if (socket_path)
        return cli_fetch_ledger(cmd, socket_path, s, history);
    int r = ledger_find_socket(path, sizeof path, err, sizeof err);
    if (r < 0) {
        fprintf(stderr, "vram %s: %s\n", cmd, err);
        return 1;
    }
    if (r == 0) {
        int got = cli_take_ledger(path, s, history, err, sizeof err);
        if (got >= 0)
            return 0;
        snprintf(src->note, sizeof src->note, "vramd does not answer: %.400s; NVML's view and "
                 "your vram run commands' budgets instead", err);
    } else {
        char none[512];
        cli_no_daemon(none, sizeof none);
        snprintf(src->note, sizeof src->note, "%.500s: NVML's view and your vram run commands' "
                 "budgets", none);
    }
    src->nvml = true;
    char nerr[512];
    if (nvml_view_open(nerr, sizeof nerr) != 0 || nvml_view_take(s, nerr, sizeof nerr) != 0) {
        char none[512];
        if (r == 0)
            snprintf(none, sizeof none, "vramd does not answer (%.400s)", err);
        else
            cli_no_daemon(none, sizeof none);
        fprintf(stderr, "vram %s: %s, and NVML cannot be read: %s\n", cmd, none, nerr);
        return 1;
    }
    return 0;
}

void source_close(struct source *src)
{
    if (src->nvml)
        nvml_view_close();
    src->nvml = false;
}
