/* vram run's grants from vramd (see grants.h). */
#include "grants.h"

#include "../src/client/client.h"
#include "../src/util/parse.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define DOWN_WAIT_MS 5000 /* how long vram run waits for a vramd that does not answer */
#define DOWN_RETRY_MS 250

static uint64_t now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

/* "20 s", "2.5 s", "10 min": how long, for a person. */
static const char *how_long(uint64_t ms, char *buf, size_t n)
{
    if (ms >= UINT64_MAX / 4)
        snprintf(buf, n, "as long as the policy allows");
    else if (ms >= 120000)
        snprintf(buf, n, "%.1f min", (double)ms / 60000);
    else
        snprintf(buf, n, "%.1f s", (double)ms / 1000);
    return buf;
}

/* What is asked for, in words. */
static const char *what(const struct job_device *d, size_text *buf)
{
    if (!d->ask)
        return "the policy's default budget";
    *buf = format_size(d->ask);
    return buf->text;
}

/* "2.00 GiB" after `key` in vramd's reason, in bytes; 0 if not there. */
static uint64_t amount_after(const char *why, const char *key)
{
    const char *at = strstr(why, key);
    double v;
    char unit[8], text[48];
    uint64_t bytes;
    parse_why pw;
    if (!at || sscanf(at + strlen(key), "%lf %7[A-Za-z]", &v, unit) != 2)
        return 0;
    snprintf(text, sizeof text, "%.6f%s", v, unit);
    return parse_size(text, &bytes, &pw) == 0 ? bytes : 0;
}

/* Whether waiting in vramd's queue can end in a grant, read from vramd's
 * reason (explain() and request() in src/ledger/ledger_admit.c): not when
 * nothing can be granted at all (no default budget, a default of 0) nor
 * when a cap is smaller than the request; when the GPU or a cap is full
 * for now, or earlier requests wait, it can. */
static bool waiting_helps(const char *why)
{
    if (strstr(why, "no default-budget") || strstr(why, "default budget is 0") ||
        strstr(why, "waiting cannot help")) /* vramd's word: a cap, a reservation */
        return false;
    uint64_t cap = amount_after(why, " may hold "), asked = amount_after(why, "; requested ");
    return !(cap && asked && cap < asked);
}

struct waiting_ctx {
    const struct grants_request *r;
    struct job *j;
    uint64_t since;
    bool waited;
};

static void waiting(void *arg, int i, uint64_t until_ms, const char *why)
{
    struct waiting_ctx *w = arg;
    const struct job_device *d = &w->j->dev[i];
    char t[48];
    size_text b;
    w->waited = true;
    if (w->r->report)
        fprintf(stderr, "vram run: waiting for %s on GPU %d (%s), %s%s: %s\n", what(d, &b),
                d->ordinal, d->uuid, until_ms >= UINT64_MAX / 4 ? "" : "for up to ",
                how_long(until_ms, t, sizeof t), why);
}

static void say(void *arg, bool error, const char *line)
{
    const struct grants_request *r = arg;
    if (r->report && (error || r->verbose))
        fprintf(stderr, "vram run: %s\n", line);
}

/* vramd does not answer (a restart takes a second or two): waited for a
 * little, then the command is held to what vramd's fallback file lets a
 * process take while it is down, and no more than its own budget; its
 * holder registers that when vramd is back. RUN_REFUSED when that is
 * nothing. */
static int while_down(struct job *j, const struct grants_request *r, const char *down)
{
    char file[300];
    ledger_fallback_path(r->socket, file, sizeof file);
    for (int i = 0; i < j->ndev; i++) {
        struct job_device *d = &j->dev[i];
        uint64_t allowed = 0;
        char why[256] = "";
        int f = ledger_fallback(r->socket, d->uuid, &allowed, why, sizeof why);
        if (f < 0 && r->report)
            fprintf(stderr, "vram run: ignored vramd's fallback file beside %s: %s\n", r->socket,
                    why);
        if (f == 0) /* its own budget, and no more than the fallback */
            d->grant = d->ask && d->ask < allowed ? d->ask : allowed;
        else
            d->grant = d->ask;
        if (!d->grant) {
            if (f == 0)
                fprintf(stderr, "vram run: vramd at %s does not answer (%s), and its policy (no "
                        "default-budget) lets no command take memory of GPU %d (%s) while it "
                        "is down, as its fallback file %s says; the program was not started; "
                        LEDGER_DOWN_ADVICE " (held to its own --limit)\n",
                        r->socket, down, d->ordinal, d->uuid, file);
            else
                fprintf(stderr, "vram run: vramd at %s does not answer (%s), and no budget was "
                        "given and it left no fallback budget for GPU %d (%s); the program "
                        "was not started; --limit SIZE holds it to a budget of its own, and "
                        LEDGER_DOWN_ADVICE "\n", r->socket, down, d->ordinal, d->uuid);
            return RUN_REFUSED;
        }
        d->state = JOB_PENDING;
        if (r->report)
            fprintf(stderr, "vram run: vramd at %s does not answer (%s); the command is held "
                    "to %s on GPU %d until it is back, and then registers it (%s%s); "
                    LEDGER_DOWN_ADVICE "\n",
                    r->socket, down, format_size(d->grant).text, d->ordinal,
                    f == 0 && d->grant == allowed ? "what its fallback file allows: "
                                                  : "its own budget",
                    f == 0 && d->grant == allowed ? file : "");
    }
    return 0;
}

/* Nothing chose the GPUs (no --devices, no CUDA_VISIBLE_DEVICES): the
 * command holds a grant on every one for its whole life, whether it uses
 * them or not, and others may be kept waiting for what it never touches.
 * Said once, at the start, where the remedy is. */
static void said_every_gpu(const struct job *j, const struct grants_request *r)
{
    const char *chosen = getenv("CUDA_VISIBLE_DEVICES");
    int held = 0;
    bool same = true;
    for (int i = 0; i < j->ndev; i++)
        if (j->dev[i].grant) {
            same &= j->dev[i].grant == j->dev[0].grant;
            held++;
        }
    if (!r->report || (chosen && *chosen) || held < 2)
        return;
    if (same) {
        fprintf(stderr, "vram run: holding %s on each of the %d GPUs for the command's whole "
                "life, used or not; name --devices to hold only those it uses\n",
                format_size(j->dev[0].grant).text, held);
        return;
    }
    fprintf(stderr, "vram run: holding");
    for (int i = 0, n = 0; i < j->ndev; i++)
        if (j->dev[i].grant)
            fprintf(stderr, "%s %s on GPU %d", n++ ? "," : "", format_size(j->dev[i].grant).text,
                    j->dev[i].ordinal);
    fprintf(stderr, " for the command's whole life, used or not; name --devices to hold only "
            "those it uses\n");
}

int grants_ask(struct job *j, const struct grants_request *r)
{
    job_init(j);
    snprintf(j->socket, sizeof j->socket, "%s", r->socket);
    if (r->job)
        snprintf(j->name, sizeof j->name, "%s", r->job);
    const char *base = strrchr(r->program, '/');
    proto_name_clean(base ? base + 1 : r->program, j->cmd, sizeof j->cmd);
    j->say = say;
    j->say_arg = (void *)r;
    struct options none;
    options_clear(&none);
    for (int d = 0; d < r->gpus->n && d < JOB_MAX_DEVICES; d++) {
        const struct visible_gpu *g = &r->gpus->gpu[d];
        const struct limit_setting *l = options_limit(&none, r->budget, d);
        struct job_device *jd = &j->dev[j->ndev++];
        snprintf(jd->uuid, sizeof jd->uuid, "%s", g->uuid);
        jd->index = -1;
        jd->ordinal = d;
        jd->total = g->total;
        jd->ask = l->kind == LIMIT_BYTES      ? l->bytes /* at most the GPU: check_budgets */
                  : l->kind == LIMIT_FRACTION ? (uint64_t)((double)g->total * l->fraction)
                                              : 0; /* the policy's default */
    }
    if (r->gpus->n > JOB_MAX_DEVICES && r->report)
        fprintf(stderr, "vram run: the program sees %d GPUs; vramd is asked for the first %d, "
                "and the rest have no memory for it (--devices chooses them)\n",
                r->gpus->n, JOB_MAX_DEVICES);

    /* A daemon restarting is back within a second or two: wait for it a
     * little, and say so, rather than run on its fallback at once. */
    char why[1024];
    uint64_t until = now_ms() + DOWN_WAIT_MS;
    int c;
    bool said = false;
    while ((c = job_connect(j, why, sizeof why)) == 1 && now_ms() < until) {
        if (!said && r->report)
            fprintf(stderr, "vram run: vramd at %s does not answer (%s); waiting up to %d s for "
                    "it (" LEDGER_DOWN_ADVICE ")\n", r->socket, why, DOWN_WAIT_MS / 1000);
        said = true;
        struct timespec t = {0, DOWN_RETRY_MS * 1000000L};
        nanosleep(&t, NULL);
    }
    if (c < 0) {
        fprintf(stderr, "vram run: vramd at %s refused the command: %s; the program was not "
                "started\n", r->socket, why);
        return RUN_REFUSED;
    }
    if (c > 0)
        return while_down(j, r, why);

    for (int i = 0; i < j->ndev; i++) {
        struct job_device *d = &j->dev[i];
        struct waiting_ctx w = {r, j, now_ms(), false};
        char t[48];
        size_text b;
        int got = job_ask(j, i, r->wait_ms, waiting, &w, why, sizeof why);
        uint64_t waited = now_ms() - w.since;
        if (got > 0) {
            if (w.waited && r->report)
                fprintf(stderr, "vram run: granted %s on GPU %d (%s) after waiting %s\n",
                        format_size(d->grant).text, d->ordinal, d->uuid,
                        how_long(waited, t, sizeof t));
            continue;
        }
        if (got < 0) { /* gone, or not answering: as if it had not answered at all */
            close(j->fd);
            j->fd = -1;
            for (int k = 0; k < j->ndev; k++)
                j->dev[k].state = JOB_UNASKED;
            return while_down(j, r, why);
        }
        if (w.waited)
            fprintf(stderr, "vram run: gave up waiting for %s on GPU %d (%s) after %s: %s",
                    what(d, &b), d->ordinal, d->uuid, how_long(waited, t, sizeof t), why);
        else
            fprintf(stderr, "vram run: vramd refused %s on GPU %d (%s): %s", what(d, &b),
                    d->ordinal, d->uuid, why);
        if (!r->start_anyway) {
            fprintf(stderr, "; the program was not started%s\n",
                    r->wait_ms             ? ""
                    : waiting_helps(why) ? " (--wait waits for the memory, --start-anyway "
                                             "starts it without)"
                    : strstr(why, "waiting cannot help") ? " (--start-anyway starts it without)"
                                           : " (waiting cannot help; --start-anyway starts it "
                                             "without)");
            return RUN_REFUSED;
        }
        fprintf(stderr, "; starting the program anyway (--start-anyway): it has no GPU memory "
                "there\n");
    }
    said_every_gpu(j, r);
    return 0;
}

void grants_apply(struct job *j, struct command_owner *owner)
{
    command_set_granted(owner);
    for (int i = 0; i < j->ndev; i++)
        command_grant(owner, j->dev[i].uuid, j->dev[i].ordinal,
                      j->dev[i].state == JOB_REFUSED ? 0 : j->dev[i].grant);
    job_watch(j, owner->shared, owner->fd);
}
