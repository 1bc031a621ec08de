/* vramd's history (src/ledger/history.h), without a daemon: the rings keep
 * the highest value of each step and carry values over quiet steps; the
 * memory is fixed per series and bounded at 1,000 clients reporting for an
 * hour and under churn; a client that left keeps its history for an hour;
 * a reader sees only their own clients and the devices; the answer comes
 * in pages of bounded size that read back exactly; the protocol's lists
 * and the history messages are read strictly; vram top's trend marks. */
#include "check.h"
#include "../src/ledger/history.h"
#include "../src/protocol/history_view.h"
#include "../src/view/trend.h"

#include <stdint.h>

#define UUID "GPU-00000000-0000-4000-8000-000000000001"
#define T0 1000000000ull /* ms: the daemon's clock at the start of each test */
#define PAGE 64

static struct ledger L;
static struct history H;

static void fresh(int ndev)
{
    struct policy p;
    policy_default(&p);
    ledger_init(&L, &p);
    for (int d = 0; d < ndev; d++) {
        char uuid[64];
        snprintf(uuid, sizeof uuid, "GPU-00000000-0000-4000-8000-%012d", d + 1);
        CHECK(ledger_device(&L, uuid, 80 * GiB) == d);
    }
    history_init(&H);
}

static void done(void)
{
    char err[256];
    if (history_check(&H, err, sizeof err) != 0) {
        fprintf(stderr, "history_check: %s\n", err);
        CHECK(0);
    }
    history_destroy(&H);
    ledger_destroy(&L);
}

static struct ledger_client *client(pid_t pid, uid_t uid, const char *job, uint64_t grant,
                                    int dev)
{
    struct ledger_client *c = ledger_join(&L, ROLE_PROCESS, pid, uid, uid);
    CHECK(c);
    snprintf(c->user, sizeof c->user, "u%u", (unsigned)uid);
    snprintf(c->cmd, sizeof c->cmd, "train");
    snprintf(c->job, sizeof c->job, "%s", job);
    uint64_t granted;
    char why[700];
    CHECK(ledger_request(&L, c, dev, grant, false, 0, &granted, why, sizeof why) ==
          VERDICT_GRANT);
    return c;
}

/* A REPORT as the daemon takes it. */
static void report(struct ledger_client *c, int dev, uint64_t used, uint64_t now)
{
    ledger_report(&L, c, dev, used, used);
    history_note_client(&H, c, dev, now);
    history_note_device(&H, &L, dev, now);
}

static void leave(struct ledger_client *c, uint64_t now)
{
    history_client_left(&H, c->id, now);
    ledger_leave(&L, c);
}

/* ------------------------------------------------- the answer, read back */

struct page {
    int n;
    char msg[PAGE + 8][PROTO_MAX + 1];
};

static int collect(struct proto_writer *w, void *arg)
{
    struct page *p = arg;
    int len = proto_end(w);
    CHECK(len > 0 && len <= PROTO_MAX); /* every message fits the protocol */
    CHECK(p->n < PAGE + 8);
    memcpy(p->msg[p->n], w->buf, (size_t)len + 1);
    p->n++;
    return 0;
}

/* Every page of the answer to `q` at `now`, read into v as vram reads it. */
static int fetch(struct history_query q, uint64_t now, struct history_view *v)
{
    history_view_init(v);
    int pages = 0;
    for (;;) {
        static struct page p;
        p.n = 0;
        uint64_t next;
        CHECK(history_page(&H, &q, now, PAGE, collect, &p, &next) == 0);
        struct proto_writer w;
        proto_begin(&w, VERB_END);
        if (next)
            proto_add_u64(&w, "next", next);
        proto_add_u64(&w, "now", now);
        proto_add_u64(&w, "wall", now + 5000);
        collect(&w, &p);
        CHECK(p.n <= PAGE); /* a page is bounded, END included */
        pages++;
        uint64_t got = 0;
        for (int i = 0; i < p.n; i++) {
            struct proto_msg m;
            char err[256];
            CHECK(proto_parse(p.msg[i], strlen(p.msg[i]), &m, err, sizeof err) == 0);
            int r = history_view_take(v, &m, &got, err, sizeof err);
            if (r < 0)
                fprintf(stderr, "%s: %s\n", p.msg[i], err);
            CHECK(r == (i == p.n - 1));
        }
        CHECK(got == next);
        if (!next)
            break;
        CHECK(next > q.after);
        q.after = next;
    }
    CHECK(v->wall_offset_ms == 5000);
    return pages;
}

static const struct history_line *line_of(const struct history_view *v,
                                          const struct ledger_client *c, int dev)
{
    return history_view_client(v, c->id, dev);
}

/* --------------------------------------------------------------- tests */

/* A list of numbers in runs: read back exactly, refused item by item. */
static void test_runs(void)
{
    uint64_t v[16];
    int n;
    char err[256];
    struct proto_msg m;
    const char *good = "VRAM/1 SAMPLES used=5,7*3,0 budget=4294967296*2";
    CHECK(proto_parse(good, strlen(good), &m, err, sizeof err) == 0);
    CHECK(proto_get_runs(&m, "used", UINT64_MAX, v, 16, &n, err, sizeof err) == 0);
    CHECK(n == 5 && v[0] == 5 && v[1] == 7 && v[3] == 7 && v[4] == 0);
    CHECK(proto_get_runs(&m, "budget", UINT64_MAX, v, 16, &n, err, sizeof err) == 0);
    CHECK(n == 2 && v[1] == 4294967296ull);
    CHECK(proto_get_runs(&m, "peak", UINT64_MAX, v, 16, &n, err, sizeof err) == 1);
    static const struct {
        const char *list, *says;
    } bad[] = {
        {"", "item 1 (\"\"): an empty item"},
        {"1,", "item 2 (\"\"): an empty item"},
        {"1,,2", "item 2"},
        {",1", "item 1"},
        {"*3", "item 1 (\"*3\"): empty"},
        {"5*0", "a count of 0"},
        {"5*", "item 1 (\"5*\"): empty"},
        {"5*x", "not a whole number"},
        {"5*2*3", "not a whole number"},
        {"x", "not a whole number"},
        {"-1", "not a whole number"},
        {"18446744073709551616", "larger than"},
        {"1*16,2", "more than the 16 numbers accepted"},
        {"1*2000", "larger than 1024"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char text[128];
        snprintf(text, sizeof text, "VRAM/1 SAMPLES used=%s", bad[i].list);
        CHECK(proto_parse(text, strlen(text), &m, err, sizeof err) == 0);
        err[0] = 0;
        CHECK(proto_get_runs(&m, "used", UINT64_MAX, v, 16, &n, err, sizeof err) == -1);
        CHECK_CONTAINS(err, "used=");
        CHECK_CONTAINS(err, bad[i].says);
    }
    /* Written and read back: every list, runs or not, and its length. */
    uint64_t seed = 42, in[300], out[300];
    for (int round = 0; round < 200; round++) {
        int len = 1 + (int)(seed % 300);
        for (int i = 0; i < len; i++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            in[i] = i && seed >> 62 ? in[i - 1] : (seed >> 20) % (round % 2 ? 3 : 1ull << 40);
        }
        struct proto_writer w;
        proto_begin(&w, VERB_SAMPLES);
        size_t before = w.len;
        proto_add_runs(&w, "used", in, len);
        if (proto_end(&w) < 0)
            continue; /* longer than a message: never sent so (history.c cuts first) */
        CHECK(w.len - before == strlen(" used=") + proto_runs_length(in, len));
        CHECK(proto_parse(w.buf, w.len, &m, err, sizeof err) == 0);
        CHECK(proto_get_runs(&m, "used", UINT64_MAX, out, 300, &n, err, sizeof err) == 0);
        CHECK(n == len && memcmp(in, out, (size_t)len * sizeof *in) == 0);
    }
    printf("ok: lists in runs: read back, and refused item by item\n");
}

/* Each step keeps its highest report; quiet steps carry the last value;
 * the hour ring keeps the highest of its ten; the budget is the grant. */
static void test_rings(void)
{
    fresh(1);
    struct ledger_client *c = client(100, 1000, "j", 8 * GiB, 0);
    report(c, 0, 1 * GiB, T0 + 100);
    report(c, 0, 3 * GiB, T0 + 500);
    report(c, 0, 2 * GiB, T0 + 900); /* step 0: 3 GiB at most, 2 GiB last */
    report(c, 0, 5 * GiB, T0 + 6100); /* steps 1-5 heard nothing: 2 GiB */
    report(c, 0, 0, T0 + 6200);
    struct history_view v;
    fetch((struct history_query){.viewer = 0}, T0 + 8500, &v);
    const struct history_line *l = line_of(&v, c, 0);
    CHECK(l && l->kind == 'p' && l->pid == 100 && l->uid == 1000 && !strcmp(l->job, "j"));
    CHECK(l->begin_ms == T0 + 100 && l->end_ms == 0);
    const struct history_ring *r = &l->recent;
    static const uint64_t want[] = {3, 2, 2, 2, 2, 2, 5, 0, 0};
    CHECK(r->step_ms == 1000 && r->first_ms == T0 && r->n == 9);
    for (int i = 0; i < 9; i++) {
        CHECK(r->used[i] == want[i] * GiB);
        CHECK(r->budget[i] == 8 * GiB);
    }
    CHECK(l->hour.step_ms == 10000 && l->hour.n == 1 && l->hour.used[0] == 5 * GiB);
    /* The device: what its clients use, and what it granted. */
    const struct history_line *d = history_view_device(&v, 0);
    CHECK(d && d->kind == 'd' && d->recent.n == 9 && d->recent.used[0] == 3 * GiB &&
          d->recent.budget[6] == 8 * GiB);
    history_view_free(&v);

    /* Two hours on: the recent ring is the last 2 minutes, the hour ring
     * the last hour, and the step where the peak was is gone. */
    uint64_t t = T0 + 6200;
    for (; t < T0 + 2 * 3600 * 1000; t += 200)
        report(c, 0, (t / 1000 % 7) * GiB, t);
    fetch((struct history_query){.viewer = 0}, t, &v);
    l = line_of(&v, c, 0);
    CHECK(l->recent.n == HISTORY_RECENT && l->hour.n == HISTORY_HOUR);
    CHECK(l->recent.first_ms == (t / 1000 - HISTORY_RECENT + 1) * 1000);
    CHECK(l->hour.first_ms == (t / 10000 - HISTORY_HOUR + 1) * 10000);
    /* A step holds what was reported in it and what was held into it. */
    for (int i = 0; i + 1 < l->recent.n; i++) { /* the last: the open step, carried */
        uint64_t step = l->recent.first_ms / 1000 + (uint64_t)i;
        uint64_t high = step % 7 > (step - 1) % 7 ? step % 7 : (step - 1) % 7;
        CHECK(l->recent.used[i] == high * GiB);
    }
    CHECK(l->recent.used[l->recent.n - 1] == l->recent.used[l->recent.n - 2]);
    for (int i = 0; i + 1 < l->hour.n; i++)
        CHECK(l->hour.used[i] == 6 * GiB); /* ten steps hold every value: the highest */
    history_view_free(&v);
    done();
    printf("ok: a step keeps its highest report, quiet steps the last, an hour the highest\n");
}

/* 1,000 clients reporting five times a second for an hour: one series
 * each and per device, and not a byte more, then or an hour later. */
static void test_memory_bounded(void)
{
    fresh(1);
    enum { N = 1000 };
    static struct ledger_client *c[N];
    for (int i = 0; i < N; i++)
        c[i] = client(1000 + i, 1000, "-", 64 * MiB, 0);
    history_tick(&H, &L, T0);
    size_t bytes = H.bytes;
    CHECK(H.n == N + 1 && bytes == (N + 1) * HISTORY_SERIES_BYTES);
    uint64_t reports = 0;
    for (uint64_t t = T0; t < T0 + 3600 * 1000; t += 200) {
        for (int i = 0; i < N; i += (t / 200) % 2 ? 1 : 7, reports++)
            report(c[i], 0, (t + (uint64_t)i) % 64 * MiB, t);
        history_tick(&H, &L, t);
        CHECK(H.bytes == bytes);
    }
    CHECK(H.n == N + 1 && H.bytes == bytes && H.nended == 0);
    printf("ok: 1,000 clients, %llu reports over an hour: %zu series, %zu bytes (%zu a series)\n",
           (unsigned long long)reports, (size_t)H.n, H.bytes, HISTORY_SERIES_BYTES);
    done();
}

/* A client that left keeps its history for an hour (a job can be plotted
 * after it ended), at most HISTORY_ENDED_MAX of them, the oldest going
 * first; a live reader sees only those still connected. */
static void test_ended(void)
{
    fresh(1);
    struct ledger_client *a = client(100, 1000, "train", 4 * GiB, 0);
    struct ledger_client *b = client(101, 1000, "train", 2 * GiB, 0);
    report(a, 0, 3 * GiB, T0 + 100);
    report(b, 0, 1 * GiB, T0 + 100);
    int a_id = a->id;
    leave(a, T0 + 2500);
    history_tick(&H, &L, T0 + 3000);
    struct history_view v;
    fetch((struct history_query){.viewer = 1000, .job = "train"}, T0 + 4000, &v);
    CHECK(v.n == 2);
    const struct history_line *la = history_view_client(&v, a_id, 0);
    CHECK(la && la->end_ms == T0 + 2500 && la->recent.n == 3 && la->recent.used[2] == 3 * GiB);
    CHECK(line_of(&v, b, 0)->end_ms == 0 && line_of(&v, b, 0)->recent.n == 5);
    history_view_free(&v);
    fetch((struct history_query){.viewer = 1000}, T0 + 4000, &v);
    CHECK(v.n == 2 && !history_view_client(&v, a_id, 0)); /* the device and b */
    history_view_free(&v);
    /* A grant held across a restart that expired: the client is gone from
     * the ledger without a goodbye; the next tick ends its series. */
    int b_id = b->id;
    ledger_leave(&L, b);
    history_tick(&H, &L, T0 + 5000);
    fetch((struct history_query){.viewer = 0, .job = "train"}, T0 + 5000, &v);
    CHECK(v.n == 2 && history_view_client(&v, b_id, 0)->end_ms == T0 + 5000);
    history_view_free(&v);
    /* An hour after its end a series goes. */
    history_tick(&H, &L, T0 + 2500 + HISTORY_KEEP_MS + 1000);
    fetch((struct history_query){.viewer = 0, .job = "train"}, T0 + 2500 + HISTORY_KEEP_MS + 1000,
          &v);
    CHECK(v.n == 1 && !history_view_client(&v, a_id, 0));
    history_view_free(&v);

    /* Churn: 3,000 short jobs; the newest HISTORY_ENDED_MAX ended ones stay. */
    uint64_t t = T0 + 2 * HISTORY_KEEP_MS;
    history_tick(&H, &L, t);
    int first = 0, last = 0;
    for (int i = 0; i < 3000; i++, t += 100) {
        char job[16];
        snprintf(job, sizeof job, "churn%d", i);
        struct ledger_client *c = client(2000 + i, 1000, job, 1 * GiB, 0);
        report(c, 0, 512 * MiB, t);
        first = i ? first : c->id;
        last = c->id;
        leave(c, t + 50);
        CHECK(H.nended <= HISTORY_ENDED_MAX);
    }
    CHECK(H.nended == HISTORY_ENDED_MAX);
    CHECK(H.bytes == (size_t)(1 + HISTORY_ENDED_MAX) * HISTORY_SERIES_BYTES); /* and the device */
    fetch((struct history_query){.viewer = 0, .job = "churn2999"}, t, &v);
    CHECK(v.n == 1 && v.line[0].id == last);
    history_view_free(&v);
    fetch((struct history_query){.viewer = 0, .job = "churn0"}, t, &v);
    CHECK(v.n == 0 && first != last);
    history_view_free(&v);
    done();
    printf("ok: a client's history outlives it by an hour; at most %d ended series\n",
           HISTORY_ENDED_MAX);
}

/* Whatever clients do, the store stays within its bounds: a user other
 * than root at most HISTORY_USER_SERIES_MAX series (their own ended ones
 * giving way first), everyone HISTORY_SERIES_MAX; a client refused is
 * counted once and remembered (not tried again at every sampling, issue
 * 26 item 4), and tried again once room comes; another user still gets a
 * history. */
static void test_bounds(void)
{
    fresh(1);
    enum { MANY = HISTORY_USER_SERIES_MAX + 476 };
    static struct ledger_client *c[MANY];
    for (int i = 0; i < MANY; i++)
        c[i] = client(10000 + i, 2000, "flood", 1 * MiB, 0);
    history_tick(&H, &L, T0);
    CHECK(H.n == 1 + HISTORY_USER_SERIES_MAX && H.not_kept == 476);
    /* Samplings in which no room comes do not try them again. */
    for (int k = 1; k <= 3; k++) {
        history_tick(&H, &L, T0 + 1000 * (uint64_t)k);
        CHECK(H.not_kept == 476 && H.nrefused == 476);
    }
    struct ledger_client *other = client(99, 2001, "mine", 1 * MiB, 0);
    report(other, 0, 1 * MiB, T0 + 3010);
    CHECK(H.n == 2 + HISTORY_USER_SERIES_MAX);
    /* One of the flood leaves: its ended series gives way to the next of theirs. */
    int gone = c[0]->id, next = c[HISTORY_USER_SERIES_MAX]->id;
    leave(c[0], T0 + 3200);
    history_tick(&H, &L, T0 + 4000);
    CHECK(H.n == 2 + HISTORY_USER_SERIES_MAX && H.nended == 0 && H.not_kept == 476 &&
          H.nrefused == 475);
    struct history_view v;
    fetch((struct history_query){.viewer = 0, .job = "flood"}, T0 + 4000, &v);
    CHECK(v.n == HISTORY_USER_SERIES_MAX && !history_view_client(&v, gone, 0) &&
          history_view_client(&v, next, 0));
    history_view_free(&v);
    done();

    /* Every user's together: HISTORY_SERIES_MAX, 62 MiB at most. */
    fresh(1);
    int users = HISTORY_SERIES_MAX / HISTORY_USER_SERIES_MAX + 1;
    for (int u = 0; u < users; u++)
        for (int i = 0; i < HISTORY_USER_SERIES_MAX; i++)
            client(20000 + u * 2000 + i, 3000 + (uid_t)u, "-", 1 * MiB, 0);
    history_tick(&H, &L, T0);
    CHECK(H.n == HISTORY_SERIES_MAX && H.bytes == HISTORY_SERIES_MAX * HISTORY_SERIES_BYTES);
    CHECK(H.not_kept == (unsigned long)(users * HISTORY_USER_SERIES_MAX + 1 - HISTORY_SERIES_MAX));
    done();
    printf("ok: at most %d series of a user, %d in all (%.0f MiB)\n", HISTORY_USER_SERIES_MAX,
           HISTORY_SERIES_MAX, HISTORY_SERIES_MAX * (double)HISTORY_SERIES_BYTES / (1 << 20));
}

/* A reader sees the devices and their own clients, never another user's,
 * with or without job=; root sees everyone's. */
static void test_privacy(void)
{
    fresh(2);
    struct ledger_client *mine = client(100, 1000, "a", 1 * GiB, 0);
    struct ledger_client *theirs = client(200, 1001, "a", 1 * GiB, 1);
    struct ledger_client *job = ledger_join(&L, ROLE_JOB, 1, 1001, 1001);
    snprintf(job->job, sizeof job->job, "a");
    uint64_t granted;
    char why[700];
    CHECK(ledger_request(&L, job, 0, 4 * GiB, false, 0, &granted, why, sizeof why) ==
          VERDICT_GRANT);
    history_tick(&H, &L, T0);
    struct history_view v;
    fetch((struct history_query){.viewer = 1000}, T0 + 10, &v);
    CHECK(v.n == 3 && line_of(&v, mine, 0) && history_view_device(&v, 0) &&
          history_view_device(&v, 1));
    history_view_free(&v);
    fetch((struct history_query){.viewer = 1000, .job = "a"}, T0 + 10, &v);
    CHECK(v.n == 1 && line_of(&v, mine, 0));
    history_view_free(&v);
    fetch((struct history_query){.viewer = 1001, .job = "a"}, T0 + 10, &v);
    CHECK(v.n == 2 && line_of(&v, theirs, 1) && line_of(&v, job, 0)->kind == 'j');
    history_view_free(&v);
    fetch((struct history_query){.viewer = 0, .job = "a"}, T0 + 10, &v);
    CHECK(v.n == 3);
    history_view_free(&v);
    fetch((struct history_query){.viewer = LEDGER_VIEW_ANYONE}, T0 + 10, &v);
    CHECK(v.n == 2 && v.line[0].kind == 'd' && v.line[1].kind == 'd');
    history_view_free(&v);
    /* Once gone, still only theirs to see. */
    int mine_id = mine->id;
    leave(mine, T0 + 20);
    fetch((struct history_query){.viewer = 1001, .job = "a"}, T0 + 30, &v);
    CHECK(v.n == 2 && !history_view_client(&v, mine_id, 0));
    history_view_free(&v);
    fetch((struct history_query){.viewer = 1000, .job = "a"}, T0 + 30, &v);
    CHECK(v.n == 1 && history_view_client(&v, mine_id, 0)->end_ms == T0 + 20);
    history_view_free(&v);
    done();
    printf("ok: a reader sees their own clients' history and the devices', not others'\n");
}

/* 300 clients on two GPUs: the answer in pages of at most 64 messages,
 * every series once, in order, and every sample as it was fed; a Slurm
 * job's steps under its id. */
static void test_pages(void)
{
    fresh(2);
    enum { N = 300 };
    static struct ledger_client *c[N];
    for (int i = 0; i < N; i++) {
        char job[16];
        snprintf(job, sizeof job, i % 3 == 0 ? "1234.%d" : i % 3 == 1 ? "12345" : "x%d", i);
        c[i] = client(1000 + i, 1000, job, 256 * MiB, i % 2);
    }
    uint64_t t = T0;
    for (; t < T0 + 200 * 1000; t += 500)
        for (int i = 0; i < N; i++)
            report(c[i], i % 2, (t * 7919 + (uint64_t)i * 104729) % (256 * MiB), t);
    struct history_view v;
    int pages = fetch((struct history_query){.viewer = 0}, t, &v);
    CHECK(v.n == N + 2 && pages >= 3 * N / (PAGE - 1)); /* 3 messages a series at least */
    for (int i = 0; i < N; i++) {
        const struct history_line *l = line_of(&v, c[i], i % 2);
        CHECK(l && l->recent.n == HISTORY_RECENT && l->hour.n == 21);
        for (int k = 0; k < l->recent.n; k++) {
            uint64_t step = l->recent.first_ms + (uint64_t)k * 1000, high = 0;
            /* What was reported in the step, and what was held into it. */
            for (uint64_t at = step - 500; at < step + 1000 && at < t; at += 500) {
                uint64_t u = (at * 7919 + (uint64_t)i * 104729) % (256 * MiB);
                high = u > high ? u : high;
            }
            if (step + 1000 > t) /* the open step: brought up to now with its last report */
                continue;
            CHECK(l->recent.used[k] == high);
        }
    }
    history_view_free(&v);
    fetch((struct history_query){.viewer = 0, .job = "1234"}, t, &v);
    CHECK(v.n == N / 3);
    for (int i = 0; i < v.n; i++)
        CHECK(strncmp(v.line[i].job, "1234.", 5) == 0);
    history_view_free(&v);
    fetch((struct history_query){.viewer = 0, .job = "1234", .recent_only = true}, t, &v);
    CHECK(v.n == N / 3 && v.line[0].hour.n == 0 && v.line[0].recent.n == HISTORY_RECENT);
    history_view_free(&v);
    done();
    printf("ok: %d series in pages of at most %d messages, read back exactly\n", N + 2, PAGE);
}

/* What a reader refuses of the history messages. */
static void test_view_strict(void)
{
    static const struct {
        const char *msgs[3], *says;
    } bad[] = {
        {{"VRAM/1 SAMPLES key=33 tier=recent first=0 step=1000 used=1 budget=1"},
         "not the series just begun"},
        {{"VRAM/1 SERIES key=7 dev=0 kind=device begin=1"}, "is not device 0's"},
        {{"VRAM/1 SERIES key=34 dev=1 kind=process id=1 pid=1 uid=1 user=a cmd=b job=c begin=1"},
         "is not client 1's on device 1"},
        {{"VRAM/1 SERIES key=33 dev=1 kind=wizard begin=1"}, "kind= must be"},
        {{"VRAM/1 SERIES key=33 dev=1 kind=process id=1 pid=1 uid=1 user=a job=c begin=1"},
         "missing or malformed cmd"},
        {{"VRAM/1 SERIES key=1 dev=16 kind=device begin=1"}, "dev="},
        {{"VRAM/1 SERIES key=2 dev=1 kind=device begin=1",
          "VRAM/1 SERIES key=1 dev=0 kind=device begin=1"}, "out of order"},
        {{"VRAM/1 SERIES key=1 dev=0 kind=device begin=1",
          "VRAM/1 SAMPLES key=1 tier=week first=0 step=1000 used=1 budget=1"}, "tier= must be"},
        {{"VRAM/1 SERIES key=1 dev=0 kind=device begin=1",
          "VRAM/1 SAMPLES key=1 tier=recent first=0 step=1000 used=1,2 budget=1"},
         "2 used and 1 budget"},
        {{"VRAM/1 SERIES key=1 dev=0 kind=device begin=1",
          "VRAM/1 SAMPLES key=1 tier=recent first=0 step=1000 used=1 budget=1",
          "VRAM/1 SAMPLES key=1 tier=recent first=5000 step=1000 used=1 budget=1"},
         "does not follow"},
        {{"VRAM/1 SERIES key=1 dev=0 kind=device begin=1",
          "VRAM/1 SAMPLES key=1 tier=recent first=0 step=0 used=1 budget=1"}, "step=0"},
        {{"VRAM/1 SERIES key=1 dev=0 kind=device begin=1",
          "VRAM/1 SAMPLES key=1 tier=recent first=0 step=1000 used=1*1000,2*1000 budget=1"},
         "more than the 1024 numbers accepted"},
        {{"VRAM/1 END now=5"}, "wall= is missing"},
        {{"VRAM/1 PROC dev=0"}, "unexpected PROC"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        struct history_view v;
        history_view_init(&v);
        int r = 0;
        char err[256] = "";
        for (int k = 0; k < 3 && bad[i].msgs[k] && r >= 0; k++) {
            struct proto_msg m;
            uint64_t next;
            CHECK(proto_parse(bad[i].msgs[k], strlen(bad[i].msgs[k]), &m, err, sizeof err) == 0);
            r = history_view_take(&v, &m, &next, err, sizeof err);
        }
        if (r != -1)
            fprintf(stderr, "accepted: %s\n", bad[i].msgs[0]);
        CHECK(r == -1);
        CHECK_CONTAINS(err, bad[i].says);
        history_view_free(&v);
    }
    printf("ok: history messages that do not read or do not follow are refused\n");
}

/* Count of characters as a terminal shows them (UTF-8 sequences as one). */
static size_t columns(const char *s)
{
    size_t n = 0;
    for (; *s; s++)
        n += ((unsigned char)*s & 0xc0) != 0x80;
    return n;
}

/* vram top's marks: eight heights, the highest of each mark's values, a
 * space where nothing is known; Unicode blocks only in a UTF-8 locale. */
static void test_trend(void)
{
    uint64_t v[16];
    for (int i = 0; i < 8; i++)
        v[i] = (uint64_t)(i + 1) * 100;
    char out[64];
    trend_draw(out, sizeof out, v, 8, 8, 800, false);
    CHECK(strcmp(out, "_.-:=+*#") == 0);
    trend_draw(out, sizeof out, v, 8, 8, 800, true);
    CHECK(strcmp(out, "\u2581\u2582\u2583\u2584\u2585\u2586\u2587\u2588") == 0);
    trend_draw(out, sizeof out, v, 8, 4, 800, false); /* two values a mark: the higher */
    CHECK(strcmp(out, ".:+#") == 0);
    v[0] = v[1] = v[2] = TREND_NONE;
    v[3] = 0;
    trend_draw(out, sizeof out, v, 8, 3, 0, false); /* 3 a mark, the first takes 2 */
    CHECK(strcmp(out, " =#") == 0); /* 500 of 800: the fifth height */
    setenv("LANG", "en_GB.UTF-8", 1);
    unsetenv("LC_ALL");
    unsetenv("LC_CTYPE");
    CHECK(trend_utf8());
    setenv("LC_ALL", "C", 1); /* LC_ALL wins, as with setlocale */
    CHECK(!trend_utf8());
    setenv("LC_ALL", "", 1);
    setenv("LC_CTYPE", "de_DE.utf8", 1);
    CHECK(trend_utf8());
    unsetenv("LC_CTYPE");
    unsetenv("LC_ALL");
    setenv("LANG", "C", 1);
    CHECK(!trend_utf8());

    /* The section: a device and a job (its processes summed, against the
     * job's grant), 80 columns wide at most. */
    fresh(1);
    struct ledger_client *a = client(100, 1000, "7.0", 2 * GiB, 0);
    struct ledger_client *b = client(101, 1000, "7.0", 2 * GiB, 0);
    for (uint64_t t = T0; t <= T0 + 60000; t += 1000) {
        report(a, 0, (uint64_t)((double)(t - T0) / 60000.0 * 2 * GiB), t);
        report(b, 0, 1 * GiB, t);
    }
    struct history_view *view = malloc(sizeof *view);
    fetch((struct history_query){.viewer = 1000, .recent_only = true}, T0 + 60000, view);
    struct snapshot s;
    snapshot_init(&s);
    ledger_snapshot(&L, 1000, &s);
    s.history = view;
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    CHECK(f);
    trend_section(&s, f, 80, true);
    fclose(f);
    CHECK_CONTAINS(text, "TREND, the last 120 s: a mark is the highest in 4 s");
    CHECK_CONTAINS(text, "device           0   ");
    CHECK_CONTAINS(text, "job 7.0          0   ");
    CHECK_CONTAINS(text, "\u2586 "); /* 3 of 4 GiB: the sixth height of eight */
    CHECK_CONTAINS(text, "3.00 GiB of 4.00 GiB");
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n"))
        CHECK(columns(line) <= 80);
    free(text);
    snapshot_free(&s);
    done();
    printf("ok: trend marks (Unicode or ASCII by the locale) and vram top's trend section\n");
}

int main(void)
{
    test_runs();
    test_rings();
    test_memory_bounded();
    test_ended();
    test_bounds();
    test_privacy();
    test_pages();
    test_view_strict();
    test_trend();
    return 0;
}
