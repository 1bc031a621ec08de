/* screen: the vram top screen (screen.h). */
#include "screen.h"
#include "trend.h"

#include "../util/parse.h"

#include <stdlib.h>
#include <string.h>

const char top_sort_key[SORT_COUNT] = {'m', 'u', 'p', 't', 'g'};
const char *const top_sort_name[SORT_COUNT] = {"memory", "user", "pid", "time", "gpu"};

int top_sort_named(const char *name)
{
    int found = -1;
    size_t n = strlen(name);
    for (int k = 0; n && k < SORT_COUNT; k++) {
        if (strcmp(name, top_sort_name[k]) == 0)
            return k;
        if (strncmp(name, top_sort_name[k], n) == 0)
            found = found < 0 ? k : -2; /* -2: more than one begins so */
    }
    return found < 0 ? -1 : found;
}

struct ctx {
    const struct snapshot *s;
    const struct top_view *v;
    const int *leader; /* by entry: the index of its job's row, or its own */
};

/* Which view a column belongs to: both, vramd's ledger, or NVML's alone. */
enum { BOTH, LEDGER, NVML_VIEW };

/* ------------------------------------------------------------- tables */

#define MAX_COLUMNS 16
#define TREND_LEAVES 6 /* rows the trend leaves the users and processes at least */
#define CELL 512

struct column {
    const char *title;
    int width;    /* a fixed width; 0: flexible */
    int min, max; /* a flexible column's least and most (max 0: it takes the rest) */
    int drop;     /* 0: always shown; else left out when the width is short, highest first */
    bool right;
    void (*cell)(const struct ctx *c, const void *row, char *buf, size_t n);
    int view; /* BOTH, LEDGER, NVML_VIEW */
};

struct table {
    const struct column *col;
    int ncol;
    bool on[MAX_COLUMNS];
    int w[MAX_COLUMNS];
};

static int text_width(const char *s) { return (int)strlen(s); }

/* Which columns fit in `width`, and how wide each is. `on` comes in with
 * the columns the data asks for. */
static void plan(struct table *t, const struct ctx *c, const void *const *rows, int nrows, int width)
{
    for (;;) {
        int need = -1, worst = -1;
        for (int i = 0; i < t->ncol; i++) {
            if (!t->on[i])
                continue;
            need += 1 + (t->col[i].width ? t->col[i].width : t->col[i].min);
            if (t->col[i].drop && (worst < 0 || t->col[i].drop > t->col[worst].drop))
                worst = i;
        }
        if (need <= width || worst < 0) {
            int extra = width - need, last_flex = -1;
            for (int i = 0; i < t->ncol; i++) {
                t->w[i] = t->col[i].width ? t->col[i].width : t->col[i].min;
                if (t->on[i] && !t->col[i].width)
                    last_flex = i;
            }
            /* Flexible columns get what their widest cell needs, in order;
             * the last one whatever is left. */
            for (int i = 0; i < t->ncol && extra > 0; i++) {
                if (!t->on[i] || t->col[i].width)
                    continue;
                int natural = text_width(t->col[i].title);
                char buf[CELL];
                for (int r = 0; r < nrows; r++) {
                    t->col[i].cell(c, rows[r], buf, sizeof buf);
                    if (text_width(buf) > natural)
                        natural = text_width(buf);
                }
                if (t->col[i].max && natural > t->col[i].max)
                    natural = t->col[i].max;
                int give = natural > t->w[i] ? natural - t->w[i] : 0;
                if (i == last_flex && !t->col[i].max)
                    give = extra;
                if (give > extra)
                    give = extra;
                t->w[i] += give;
                extra -= give;
            }
            return;
        }
        t->on[worst] = false;
    }
}

/* The columns of the view the screen shows. */
static void view_columns(struct table *t, const struct ctx *c)
{
    for (int i = 0; i < t->ncol; i++)
        t->on[i] = t->col[i].view == BOTH || t->col[i].view == (c->v->nvml_view ? NVML_VIEW : LEDGER);
}

/* One line of a table: the cells, or the titles when row is NULL; `mark`
 * in reverse video, across the whole width. */
static void line_marked(const struct table *t, const struct ctx *c, const void *row, bool mark,
                        FILE *out)
{
    char text[CELL * 2], buf[CELL];
    size_t len = 0;
    bool first = true;
    for (int i = 0; i < t->ncol; i++) {
        if (!t->on[i])
            continue;
        if (row)
            t->col[i].cell(c, row, buf, sizeof buf);
        else
            snprintf(buf, sizeof buf, "%s", t->col[i].title);
        int w = t->w[i], n = text_width(buf);
        if (n > w)
            n = w, buf[w] = 0;
        len += (size_t)snprintf(text + len, sizeof text - len, "%s%*s%s%*s", first ? "" : " ",
                                t->col[i].right ? w - n : 0, "", buf,
                                t->col[i].right ? 0 : w - n, "");
        if (len >= sizeof text)
            len = sizeof text - 1;
        first = false;
    }
    while (len > 0 && text[len - 1] == ' ')
        len--;
    text[len] = 0;
    if (mark)
        fprintf(out, "\033[7m%-*.*s\033[m\n", c->v->width, c->v->width, text);
    else
        fprintf(out, "%.*s\n", c->v->width, text);
}

static void line(const struct table *t, const struct ctx *c, const void *row, FILE *out)
{
    line_marked(t, c, row, false, out);
}

static void size_cell(uint64_t b, char *buf, size_t n) { snprintf(buf, n, "%s", format_size(b).text); }

/* ------------------------------------------------------------- header */

/* The header's parts, each whole: a part that does not fit on a line
 * begins the next, so that no version is cut. Returns the lines written. */
static int header(const struct ctx *c, FILE *out)
{
    const struct snap_node *node = &c->s->node;
    char when[32] = "", part[6][128];
    int n = 0;
    struct tm tm;
    if (localtime_r(&c->v->now, &tm))
        strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tm);
    snprintf(part[n++], sizeof part[0], "%s  %s  %s", c->v->title ? c->v->title : "vram top",
             node->host[0] ? node->host : "-", when);
    if (node->driver[0])
        snprintf(part[n++], sizeof part[0], "driver %s", node->driver);
    if (node->cuda[0])
        snprintf(part[n++], sizeof part[0], "CUDA %s", node->cuda);
    if (node->nvml[0])
        snprintf(part[n++], sizeof part[0], "NVML %s", node->nvml);
    if (!node->driver[0])
        snprintf(part[n++], sizeof part[0], c->v->nvml_view ? "(no NVML)" : "(vramd has no NVML)");
    if (c->v->nvml_view)
        snprintf(part[n++], sizeof part[0], "(no vramd: NVML's view)");
    int lines = 1, at = 0;
    for (int i = 0; i < n; i++) {
        int w = text_width(part[i]);
        if (at && at + 2 + w > c->v->width) {
            fputc('\n', out);
            lines++;
            at = 0;
        }
        fprintf(out, "%s%.*s", at ? "  " : "", c->v->width, part[i]);
        at += (at ? 2 : 0) + w;
    }
    fputc('\n', out);
    /* A problem is said whole, over up to three lines, broken between
     * words where it can be. */
    const char *p = c->v->problem;
    for (int k = 0; p && *p && k < 3; k++, lines++) {
        int len = text_width(p) > c->v->width ? c->v->width : text_width(p);
        int cut = len;
        if (p[len])
            while (cut > c->v->width / 2 && p[cut] != ' ')
                cut--;
        if (p[cut] != ' ' || !p[len])
            cut = len;
        fprintf(out, "%.*s\n", cut, p);
        p += cut;
        while (*p == ' ')
            p++;
    }
    return lines;
}

/* ------------------------------------------------------------ devices */

static void d_index(const struct ctx *c, const void *r, char *b, size_t n)
{
    (void)c;
    snprintf(b, n, "%d", ((const struct snap_device *)r)->index);
}
static void d_name(const struct ctx *c, const void *r, char *b, size_t n)
{
    (void)c;
    const struct snap_device *d = r;
    snprintf(b, n, "%s", d->name[0] ? d->name : d->uuid);
}
#define DEVICE_SIZE(f)                                                                             \
    static void d_##f(const struct ctx *c, const void *r, char *b, size_t n)                      \
    {                                                                                              \
        (void)c;                                                                                   \
        size_cell(((const struct snap_device *)r)->f, b, n);                                       \
    }
DEVICE_SIZE(total)
DEVICE_SIZE(reserved)
DEVICE_SIZE(granted)
DEVICE_SIZE(used)
DEVICE_SIZE(unseen)
DEVICE_SIZE(grantable)
#undef DEVICE_SIZE
static void d_free(const struct ctx *c, const void *r, char *b, size_t n)
{
    (void)c;
    const struct snap_device *d = r;
    size_cell(d->total > d->used ? d->total - d->used : 0, b, n);
}
static void d_waiting(const struct ctx *c, const void *r, char *b, size_t n)
{
    (void)c;
    snprintf(b, n, "%d", ((const struct snap_device *)r)->waiting);
}
/* NVML's figures: "-" where it cannot say. */
static void figure(char *b, size_t n, long v, long unit, const char *suffix)
{
    if (v < 0)
        snprintf(b, n, "-");
    else
        snprintf(b, n, "%ld%s", v / unit, suffix);
}
static void d_util(const struct ctx *c, const void *r, char *b, size_t n)
{
    (void)c;
    figure(b, n, ((const struct snap_device *)r)->gpu_percent, 1, "%");
}
static void d_temp(const struct ctx *c, const void *r, char *b, size_t n)
{
    (void)c;
    figure(b, n, ((const struct snap_device *)r)->celsius, 1, "C");
}
static void d_power(const struct ctx *c, const void *r, char *b, size_t n)
{
    (void)c;
    figure(b, n, ((const struct snap_device *)r)->milliwatts, 1000, "W");
}
static void d_limit(const struct ctx *c, const void *r, char *b, size_t n)
{
    (void)c;
    figure(b, n, ((const struct snap_device *)r)->limit_milliwatts, 1000, "W");
}

/* Drops, the highest first: NVML's figures before the memory, the ledger's
 * waiting and unseen before what is reserved, that before what is free,
 * and that before what vramd would grant: FREE (physical: total less used)
 * and GRANTABLE (what a request could have now, the figure a refusal
 * gives) stay side by side longest, so that neither is taken for the
 * other. */
enum { D_UTIL = 10 }; /* the first of NVML's figures */
static const struct column device_columns[] = {
    {"GPU", 3, 0, 0, 0, true, d_index, BOTH},
    {"NAME", 0, 8, 40, 0, false, d_name, BOTH},
    {"TOTAL", 11, 0, 0, 0, true, d_total, BOTH},
    {"RESERVED", 11, 0, 0, 3, true, d_reserved, LEDGER},
    {"GRANTED", 11, 0, 0, 0, true, d_granted, LEDGER},
    {"USED", 11, 0, 0, 0, true, d_used, BOTH},
    {"UNSEEN", 11, 0, 0, 5, true, d_unseen, LEDGER},
    {"FREE", 11, 0, 0, 2, true, d_free, BOTH},
    {"GRANTABLE", 11, 0, 0, 1, true, d_grantable, LEDGER},
    {"BUDGETS", 11, 0, 0, 2, true, d_granted, NVML_VIEW}, /* the commands' on it */
    {"UTIL", 4, 0, 0, 8, true, d_util, BOTH},             /* D_UTIL */
    {"TEMP", 4, 0, 0, 7, true, d_temp, BOTH},
    {"POWER", 5, 0, 0, 9, true, d_power, BOTH},
    {"LIMIT", 5, 0, 0, 10, true, d_limit, BOTH},
    {"WAIT", 4, 0, 0, 6, true, d_waiting, LEDGER},
};

/* The device's bar and UUID: '#' used, '=' granted or reserved beyond it,
 * '.' the rest; OVERCOMMITTED when grants and usage outside them exceed it. */
static void device_bar(const struct ctx *c, const struct snap_device *d, FILE *out)
{
    int width = c->v->width;
    char tail[96];
    int tl = snprintf(tail, sizeof tail, " %s%s", d->uuid, d->overcommitted ? " OVERCOMMITTED" : "");
    int barw = width - 4 - 2 - tl;
    if (barw < 10) { /* narrow: the UUID goes before the bar does */
        tl = snprintf(tail, sizeof tail, "%s", d->overcommitted ? " OVERCOMMITTED" : "");
        barw = width - 4 - 2 - tl;
    }
    char bar[1024];
    if (barw > (int)sizeof bar - 1)
        barw = (int)sizeof bar - 1;
    for (int k = 0; k < barw; k++) {
        double at = d->total ? (double)(k + 1) / barw * (double)d->total : 0;
        bar[k] = at <= (double)d->used                        ? '#'
                 : at <= (double)(d->granted + d->reserved)   ? '='
                                                              : '.';
    }
    bar[barw > 0 ? barw : 0] = 0;
    fprintf(out, "    [%s]%s\n", bar, tail);
}

static int devices(const struct ctx *c, FILE *out)
{
    const struct snapshot *s = c->s;
    struct table t = {device_columns, (int)(sizeof device_columns / sizeof *device_columns), {0}, {0}};
    const void *rows[SNAP_MAX_DEVICES];
    bool sensors = false;
    for (int d = 0; d < s->ndev; d++) {
        rows[d] = &s->dev[d];
        sensors |= s->dev[d].sensors;
    }
    view_columns(&t, c);
    for (int i = D_UTIL; i < D_UTIL + 4; i++)
        t.on[i] = sensors;
    plan(&t, c, rows, s->ndev, c->v->width);
    line(&t, c, NULL, out);
    for (int d = 0; d < s->ndev; d++) {
        line(&t, c, rows[d], out);
        device_bar(c, &s->dev[d], out);
    }
    if (s->ndev == 0)
        fprintf(out, c->v->nvml_view ? "(NVML lists no GPU)\n" : "(vramd knows no GPU yet)\n");
    return 1 + (s->ndev ? 2 * s->ndev : 1);
}

/* -------------------------------------------------------------- users */

static const struct snap_entry *E(const void *r) { return r; }

static void u_user(const struct ctx *c, const void *r, char *b, size_t n)
{
    (void)c;
    snprintf(b, n, "%s", E(r)->user);
}
static void e_dev(const struct ctx *c, const void *r, char *b, size_t n)
{
    (void)c;
    snprintf(b, n, "%d", E(r)->dev);
}
static void u_procs(const struct ctx *c, const void *r, char *b, size_t n)
{
    (void)c;
    snprintf(b, n, "%d", E(r)->procs);
}
/* A process of a job that holds no grant of its own: it draws on its
 * job's, which the job's row shows. */
static bool in_job(const struct ctx *c, const struct snap_entry *e)
{
    ptrdiff_t i = e - c->s->e;
    return c->leader && i >= 0 && i < c->s->n && c->leader[i] != i;
}
static void e_grant(const struct ctx *c, const void *r, char *b, size_t n)
{
    if (E(r)->role == 'n' || (E(r)->role == 'p' && !E(r)->grant && !E(r)->waiting && in_job(c, E(r))) ||
        (E(r)->role == 'u' && c->v->nvml_view && !E(r)->grant))
        snprintf(b, n, "-");
    else
        size_cell(E(r)->waiting && E(r)->role != 'u' ? E(r)->want : E(r)->grant, b, n);
}
static void e_used(const struct ctx *c, const void *r, char *b, size_t n)
{
    (void)c;
    size_cell(E(r)->used, b, n);
}
static void e_peak(const struct ctx *c, const void *r, char *b, size_t n)
{
    if (c->v->nvml_view && !E(r)->peak) /* NVML keeps no peak: only a command's slots do */
        snprintf(b, n, "-");
    else
        size_cell(E(r)->peak, b, n);
}
static void u_unseen(const struct ctx *c, const void *r, char *b, size_t n)
{
    (void)c;
    size_cell(E(r)->unseen, b, n);
}
static void u_waiting(const struct ctx *c, const void *r, char *b, size_t n)
{
    (void)c;
    size_cell(E(r)->want, b, n);
}

static const struct column user_columns[] = {
    {"USER", 0, 6, 24, 0, false, u_user, BOTH},
    {"GPU", 3, 0, 0, 0, true, e_dev, BOTH},
    {"PROCS", 5, 0, 0, 3, true, u_procs, BOTH},
    {"BUDGET", 11, 0, 0, 0, true, e_grant, BOTH},
    {"USED", 11, 0, 0, 0, true, e_used, BOTH},
    {"PEAK", 11, 0, 0, 0, true, e_peak, LEDGER},
    {"UNSEEN", 11, 0, 0, 1, true, u_unseen, LEDGER},
    {"WAITING", 11, 0, 0, 2, true, u_waiting, LEDGER},
};

static int by_user(const void *a, const void *b)
{
    const struct snap_entry *x = *(const struct snap_entry *const *)a,
                            *y = *(const struct snap_entry *const *)b;
    int k = strcmp(x->user, y->user);
    return k ? k : (x->dev > y->dev) - (x->dev < y->dev);
}

/* ---------------------------------------------------------- processes */

static void p_pid(const struct ctx *c, const void *r, char *b, size_t n)
{
    (void)c;
    if (E(r)->role == 'j')
        snprintf(b, n, "job");
    else if (E(r)->pid)
        snprintf(b, n, "%d", E(r)->pid);
    else
        snprintf(b, n, "-");
}
static void p_job(const struct ctx *c, const void *r, char *b, size_t n)
{
    (void)c;
    snprintf(b, n, "%s", E(r)->job);
}
static void p_nvml(const struct ctx *c, const void *r, char *b, size_t n)
{
    (void)c;
    size_cell(E(r)->nvml, b, n);
}
static void p_state(const struct ctx *c, const void *r, char *b, size_t n)
{
    (void)c;
    const struct snap_entry *e = E(r);
    if (e->role == 'n')
        snprintf(b, n, "unseen");
    else if (e->waiting)
        snprintf(b, n, "wait %d", e->queue);
    else if (e->over)
        snprintf(b, n, "OVER");
    else if (e->role == 'j')
        snprintf(b, n, "job");
    else
        snprintf(b, n, "ok");
}
/* Seconds the process has run, or -1 unknown. */
static double age(const struct ctx *c, const struct snap_entry *e)
{
    if (!e->start || c->v->uptime <= 0 || c->v->ticks <= 0)
        return -1;
    double a = c->v->uptime - (double)e->start / (double)c->v->ticks;
    return a < 0 ? 0 : a;
}
static void p_time(const struct ctx *c, const void *r, char *b, size_t n)
{
    double a = age(c, E(r));
    if (a < 0) {
        snprintf(b, n, "-");
        return;
    }
    unsigned long t = (unsigned long)a;
    unsigned long d = t / 86400, h = t / 3600 % 24, m = t / 60 % 60, sec = t % 60;
    if (d)
        snprintf(b, n, "%lu-%02lu:%02lu:%02lu", d, h, m, sec);
    else if (h)
        snprintf(b, n, "%lu:%02lu:%02lu", h, m, sec);
    else
        snprintf(b, n, "%lu:%02lu", m, sec);
}
static void p_command(const struct ctx *c, const void *r, char *b, size_t n)
{
    const char *line = c->v->command_line ? c->v->command_line(E(r), c->v->arg) : NULL;
    snprintf(b, n, "%s", line ? line : E(r)->cmd);
    for (char *p = b; *p; p++)
        if ((unsigned char)*p < 32 || (unsigned char)*p >= 127)
            *p = '?';
}

/* What holds the entry to its budget: the driver's per-cgroup limit
 * ("driver") or the interposer alone. */
static void p_backend(const struct ctx *c, const void *r, char *b, size_t n)
{
    (void)c;
    const char *name = snapshot_backend_name(E(r)->backend);
    snprintf(b, n, "%s", name ? name : "-");
}

/* Where there are jobs, their names tell two runs of one program apart:
 * NVML's figure, the running time and the peak go before the job does.
 * Where the driver holds some grant, which one does (P_LIMIT) goes before
 * them too; elsewhere every grant is the interposer's, and the column is
 * not shown. */
enum { P_JOB = 3, P_LIMIT = 9 };
static const struct column process_columns[] = {
    {"PID", 7, 0, 0, 0, true, p_pid, BOTH},
    {"USER", 0, 6, 16, 0, false, u_user, BOTH},
    {"GPU", 3, 0, 0, 0, true, e_dev, BOTH},
    {"JOB", 0, 10, 20, 1, false, p_job, BOTH}, /* P_JOB: where some entry has a job; run-PID */
    {"BUDGET", 11, 0, 0, 0, true, e_grant, BOTH},
    {"USED", 11, 0, 0, 0, true, e_used, BOTH},
    {"PEAK", 11, 0, 0, 2, true, e_peak, BOTH},
    {"NVML", 11, 0, 0, 4, true, p_nvml, LEDGER},
    {"STATE", 7, 0, 0, 0, false, p_state, LEDGER},
    {"LIMIT", 10, 0, 0, 1, false, p_backend, LEDGER}, /* P_LIMIT */
    {"TIME", 10, 0, 0, 3, true, p_time, BOTH},
    {"COMMAND", 0, 10, 0, 0, false, p_command, BOTH},
};

static uint64_t memory_of(const struct snap_entry *e)
{
    uint64_t m = e->used > e->nvml ? e->used : e->nvml;
    return m ? m : e->waiting ? e->want : e->grant;
}

static int sort_how; /* qsort has no argument: the sort of the screen being drawn */
static bool sort_reverse;
static const struct ctx *sort_ctx;

/* Two rows by the sort alone: <0 when x goes first. */
static int by_key(const struct snap_entry *x, const struct snap_entry *y)
{
    int k = 0;
    switch (sort_how) {
    case SORT_MEMORY: k = memory_of(x) > memory_of(y) ? -1 : memory_of(x) < memory_of(y); break;
    case SORT_USER: k = strcmp(x->user, y->user); break;
    case SORT_PID: k = (x->pid > y->pid) - (x->pid < y->pid); break;
    case SORT_TIME: { /* the longest running first; unknown last */
        double ax = age(sort_ctx, x), ay = age(sort_ctx, y);
        k = ax > ay ? -1 : ax < ay;
        break;
    }
    case SORT_GPU: k = (x->dev > y->dev) - (x->dev < y->dev); break;
    }
    if (!k) /* ties: by memory, then a fixed order, so rows do not jump */
        k = memory_of(x) > memory_of(y) ? -1 : memory_of(x) < memory_of(y);
    if (!k)
        k = x->pid != y->pid ? (x->pid > y->pid) - (x->pid < y->pid)
                             : x->dev != y->dev ? (x->dev > y->dev) - (x->dev < y->dev)
                                                : (x->id > y->id) - (x->id < y->id);
    return sort_reverse ? -k : k;
}

/* A job's processes stay under its row: jobs and lone processes are
 * sorted among themselves, a job's processes among themselves. */
static int by_sort(const void *a, const void *b)
{
    const struct snap_entry *x = *(const struct snap_entry *const *)a,
                            *y = *(const struct snap_entry *const *)b;
    const struct snap_entry *e = sort_ctx->s->e;
    const struct snap_entry *lx = &e[sort_ctx->leader[x - e]], *ly = &e[sort_ctx->leader[y - e]];
    if (lx != ly)
        return by_key(lx, ly);
    if (x == lx || y == ly)
        return (y == ly) - (x == lx);
    return by_key(x, y);
}

/* Each entry's job row: the 'j' entry of its job (same name, user and
 * device), or itself. */
static void find_leaders(const struct snapshot *s, int *leader)
{
    for (int i = 0; i < s->n; i++) {
        const struct snap_entry *e = &s->e[i];
        leader[i] = i;
        if (e->role != 'p' && e->role != 'n')
            continue;
        if (!strcmp(e->job, "-") || !e->job[0])
            continue;
        for (int k = 0; k < s->n; k++) {
            const struct snap_entry *j = &s->e[k];
            if (j->role == 'j' && j->dev == e->dev && j->uid == e->uid && !strcmp(j->job, e->job)) {
                leader[i] = k;
                break;
            }
        }
    }
}

static bool picked(const struct top_pick *p, const struct snap_entry *e)
{
    return p->on && p->pid == e->pid && p->dev == e->dev && p->id == e->id && p->role == e->role;
}

/* The live screen's last line: the keys (the sort in brackets, and r's
 * state), or the prompt; and which rows are shown. */
static void footer(const struct top_view *v, int first, int last, int np, FILE *out)
{
    char keys[512], where[64] = "";
    if (v->prompt) {
        snprintf(keys, sizeof keys, "%s", v->prompt);
    } else {
        int len = snprintf(keys, sizeof keys, "q quit  sort:");
        for (int k = 0; k < SORT_COUNT; k++)
            len += snprintf(keys + len, sizeof keys - (size_t)len, " %c%s%s%s", top_sort_key[k],
                            (int)v->sort == k ? "[" : " ", top_sort_name[k],
                            (int)v->sort == k ? "]" : "");
        snprintf(keys + len, sizeof keys - (size_t)len, "  %s  k kill",
                 v->reverse ? "r[reversed]" : "r reverse");
    }
    if (np)
        snprintf(where, sizeof where, "%d-%d of %d", first, last, np);
    int room = v->width - text_width(where) - 1;
    if (room < 0)
        room = 0;
    if (text_width(keys) > room)
        keys[room] = 0;
    fprintf(out, "%-*s %s\n", room, keys, where);
}

/* --------------------------------------------------------------- all */

int snapshot_top(const struct snapshot *s, struct top_view *v, FILE *out)
{
    if (v->width < 40)
        v->width = 40;
    const struct snap_entry **users = malloc((size_t)(s->n + 1) * sizeof *users);
    const struct snap_entry **procs = malloc((size_t)(s->n + 1) * sizeof *procs);
    int *leader = malloc((size_t)(s->n + 1) * sizeof *leader);
    if (!users || !procs || !leader) {
        free(users);
        free(procs);
        free(leader);
        fprintf(out, "out of memory\n");
        return 0;
    }
    find_leaders(s, leader);
    struct ctx c = {s, v, leader};
    int nu = 0, np = 0;
    bool jobs = false, by_driver = false;
    for (int i = 0; i < s->n; i++) {
        if (s->e[i].role == 'u') {
            users[nu++] = &s->e[i];
        } else {
            procs[np++] = &s->e[i];
            jobs |= strcmp(s->e[i].job, "-") != 0;
            by_driver |= s->e[i].backend == SNAP_BY_DRIVER;
        }
    }
    qsort(users, (size_t)nu, sizeof *users, by_user);
    sort_how = v->sort;
    sort_reverse = v->reverse;
    sort_ctx = &c;
    qsort(procs, (size_t)np, sizeof *procs, by_sort);

    int used_lines = header(&c, out);
    used_lines += devices(&c, out);

    /* What is left below the devices: the users take up to a third (at
     * least a row), the processes the rest, less the two title rows and
     * the footer. */
    int left = v->height ? v->height - used_lines - 2 - (v->live ? 1 : 0) : 0;
    /* The trend of each GPU and job (vramd's history) goes below the
     * processes where it leaves them room for a few rows, else it waits
     * for a taller terminal (and for 80 columns: its marks need them). */
    char *trend = NULL;
    size_t trend_len = 0;
    FILE *tf = s->history && v->width >= 80 ? open_memstream(&trend, &trend_len) : NULL;
    if (tf) {
        trend_section(s, tf, v->width, trend_utf8());
        fclose(tf);
    }
    int trend_rows = 0;
    for (size_t k = 0; k < trend_len; k++)
        trend_rows += trend[k] == '\n';
    if (v->height && trend_rows && left - trend_rows < TREND_LEAVES)
        trend_rows = 0;
    left -= v->height ? trend_rows : 0;
    int show_users = nu, show_procs = np;
    if (v->height) {
        if (left < 2)
            left = 2;
        int most = left / 3 > 1 ? left / 3 : 1;
        if (nu > most)
            show_users = most; /* the last row says how many more */
        show_procs = left - (show_users ? show_users : 1);
        if (show_procs < 0)
            show_procs = 0;
    }
    struct table ut = {user_columns, (int)(sizeof user_columns / sizeof *user_columns), {0}, {0}};
    view_columns(&ut, &c);
    plan(&ut, &c, (const void *const *)users, nu, v->width);
    line(&ut, &c, NULL, out);
    for (int i = 0; i < show_users; i++) {
        if (i == show_users - 1 && show_users < nu)
            fprintf(out, "... %d more user rows (vram status shows them all)\n", nu - i);
        else
            line(&ut, &c, users[i], out);
    }
    if (nu == 0)
        fprintf(out, "(no user holds or waits for memory)\n");

    struct table pt = {process_columns, (int)(sizeof process_columns / sizeof *process_columns),
                       {0}, {0}};
    view_columns(&pt, &c);
    pt.on[P_JOB] = jobs;
    pt.on[P_LIMIT] &= by_driver;
    plan(&pt, &c, (const void *const *)procs, np, v->width);
    line(&pt, &c, NULL, out);

    /* The selection: on the entry it was on, where that is still shown;
     * else on the same row. The rows scroll to keep it on screen. */
    bool selecting = v->live && v->cursor >= 0 && np > 0;
    if (selecting) {
        for (int i = 0; i < np; i++)
            if (picked(&v->pick, procs[i]))
                v->cursor = i;
        if (v->cursor >= np)
            v->cursor = np - 1;
        if (v->height && show_procs > 0) {
            if (v->cursor < v->scroll)
                v->scroll = v->cursor;
            if (v->cursor >= v->scroll + show_procs)
                v->scroll = v->cursor - show_procs + 1;
        }
        const struct snap_entry *e = procs[v->cursor];
        v->pick = (struct top_pick){true, e->pid, e->dev, e->id, e->role};
        v->selected = *e;
    } else {
        v->pick.on = false;
    }
    if (v->scroll > np - show_procs)
        v->scroll = np - show_procs;
    if (v->scroll < 0 || !v->height)
        v->scroll = 0;
    int last = v->height ? v->scroll + show_procs : np;
    if (last > np)
        last = np;
    for (int i = v->scroll; i < last; i++)
        line_marked(&pt, &c, procs[i], selecting && i == v->cursor, out);
    if (np == 0 && (!v->height || show_procs > 0))
        fprintf(out, v->nvml_view ? "(NVML lists no process holding GPU memory)\n"
                                  : "(no process holds, waits for or uses memory that you may see)\n");

    if (v->live) {
        /* Blank rows down to the footer, so that it stays at the bottom. */
        int drawn = last - v->scroll + (np == 0 && show_procs > 0);
        for (int i = drawn; i < show_procs; i++)
            fputc('\n', out);
    }
    if (trend_rows)
        fwrite(trend, 1, trend_len, out);
    free(trend);
    if (v->live)
        footer(v, np ? v->scroll + 1 : 0, last, np, out);
    free(users);
    free(procs);
    free(leader);
    return np;
}
