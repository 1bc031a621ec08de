/* vramd's history (src/ledger/history.h) on its own: what a REPORT costs
 * with it and without, the once-a-second sampling, and a page of the
 * answer, with 1,000 clients on one GPU. The daemon's clock is simulated,
 * the time is the CPU's (CLOCK_PROCESS_CPUTIME_ID), so other programs on
 * the machine do not count. Then (issue 26) 10,000 clients of four users,
 * more than the history keeps series for: its once-a-second sampling once
 * it is full, and the clients leaving.
 *
 *   vram-bench-history
 */
#include "../src/ledger/history.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define CLIENTS 1000
#define ROUNDS 2000 /* reports per client: 400 s at the agent's 5 Hz */

static double cpu_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static int count(struct proto_writer *w, void *arg)
{
    (void)w;
    ++*(int *)arg;
    return 0;
}

static struct ledger L;
static struct history H;
static struct ledger_client *c[CLIENTS];

/* Every client reports ROUNDS times, 200 ms apart; with `history`, as
 * vramd does. CPU ns per report. */
static double reports(bool history, uint64_t *t)
{
    double t0 = cpu_ns();
    for (int r = 0; r < ROUNDS; r++, *t += 200) {
        for (int i = 0; i < CLIENTS; i++) {
            uint64_t used = ((uint64_t)r * 7 + (uint64_t)i) % 64 << 20;
            ledger_report(&L, c[i], 0, used, used);
            if (history) {
                history_note_client(&H, c[i], 0, *t);
                history_note_device(&H, &L, 0, *t);
            }
        }
        if (history)
            history_tick(&H, &L, *t);
    }
    return (cpu_ns() - t0) / ((double)ROUNDS * CLIENTS);
}

/* 10,000 clients of four users (2,500 each, over the 2,048 series a user
 * may have), each holding 1 MiB: the CPU time of a sampling once the
 * history is full, and of all of them leaving (their series end, and the
 * oldest ended give way). */
static void many_clients(void)
{
    enum { MANY = 10000, USERS = 4 };
    static struct ledger_client *m[MANY];
    struct policy p;
    policy_default(&p);
    struct ledger l;
    struct history h;
    ledger_init(&l, &p);
    ledger_device(&l, "GPU-00000000-0000-4000-8000-000000000001", 80ull << 30);
    history_init(&h);
    uint64_t t = 1000000000;
    for (int i = 0; i < MANY; i++) {
        uid_t uid = 2000 + (uid_t)(i % USERS);
        m[i] = ledger_join(&l, ROLE_PROCESS, 100000 + i, uid, uid);
        uint64_t granted;
        char why[700];
        if (!m[i] || ledger_request(&l, m[i], 0, 1 << 20, false, 0, &granted, why,
                                    sizeof why) != VERDICT_GRANT)
            exit(1);
        history_note_client(&h, m[i], 0, t);
    }
    history_tick(&h, &l, t);
    enum { TICKS = 20 };
    double t0 = cpu_ns();
    for (int k = 0; k < TICKS; k++)
        history_tick(&h, &l, t += 1000);
    double tick_us = (cpu_ns() - t0) / TICKS / 1e3;
    int kept = h.n;
    t0 = cpu_ns();
    for (int i = 0; i < MANY; i++) {
        history_client_left(&h, m[i]->id, t);
        ledger_leave(&l, m[i]);
    }
    double leave_ms = (cpu_ns() - t0) / 1e6;
    printf("with %d clients of %d users (%d series kept, %lu not): a sampling %.0f us; all of "
           "them leaving %.1f ms (CPU time)\n", MANY, USERS, kept, h.not_kept, tick_us, leave_ms);
    history_destroy(&h);
    ledger_destroy(&l);
}

int main(void)
{
    struct policy p;
    policy_default(&p);
    ledger_init(&L, &p);
    ledger_device(&L, "GPU-00000000-0000-4000-8000-000000000001", 80ull << 30);
    history_init(&H);
    for (int i = 0; i < CLIENTS; i++) {
        c[i] = ledger_join(&L, ROLE_PROCESS, 1000 + i, 1000, 1000);
        uint64_t granted;
        char why[700];
        if (!c[i] || ledger_request(&L, c[i], 0, 64ull << 20, false, 0, &granted, why,
                                    sizeof why) != VERDICT_GRANT)
            return 1;
    }
    uint64_t t = 1000000000;
    double bare = reports(false, &t), with = reports(true, &t);
    bare = reports(false, &t); /* again, warm */
    /* For scale: reading the message itself, as the daemon does first. */
    static const char msg[] = "VRAM/1 REPORT dev=GPU-00000000-0000-4000-8000-000000000001 "
                              "used=67108864 peak=67108864";
    struct proto_msg m;
    char err[256];
    uint64_t v;
    double p0 = cpu_ns();
    for (int k = 0; k < 1000000; k++)
        if (proto_parse(msg, sizeof msg - 1, &m, err, sizeof err) != 0 ||
            proto_get_u64(&m, "used", UINT64_MAX, &v, err, sizeof err) != 0)
            return 1;
    double parse = (cpu_ns() - p0) / 1e6;
    printf("a REPORT in the ledger: %.0f ns; with the history: %.0f ns (+%.0f ns); parsing the "
           "message alone: %.0f ns (CPU time)\n", bare, with, with - bare, parse);
    double t0 = cpu_ns();
    for (int k = 0; k < 100; k++, t += 1000)
        history_tick(&H, &L, t);
    printf("the once-a-second sampling of %d clients: %.0f us\n", CLIENTS,
           (cpu_ns() - t0) / 100 / 1e3);
    struct history_query q = {.viewer = 0};
    int messages = 0, pages = 0;
    uint64_t next = 0;
    t0 = cpu_ns();
    do {
        int on_page = 0;
        history_page(&H, &q, t, 64, count, &on_page, &next);
        messages += on_page;
        pages++;
        q.after = next;
    } while (next);
    printf("the whole history in pages of 64 messages: %d pages, %d messages, %.1f ms\n", pages,
           messages, (cpu_ns() - t0) / 1e6);
    printf("memory: %d series of %zu bytes: %.1f MiB\n", H.n, HISTORY_SERIES_BYTES,
           (double)H.bytes / (1 << 20));
    history_destroy(&H);
    ledger_destroy(&L);
    many_clients();
    return 0;
}
