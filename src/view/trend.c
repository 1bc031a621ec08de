/* trend.c: vram top's trends (trend.h), from vramd's history. */
#include "trend.h"

#include "../util/parse.h"
#include "../protocol/history_view.h"

#include <stdlib.h>
#include <string.h>

bool trend_utf8(void)
{
    const char *names[] = {"LC_ALL", "LC_CTYPE", "LANG"};
    for (int i = 0; i < 3; i++) {
        const char *v = getenv(names[i]);
        if (v && *v)
            return strcasestr(v, "UTF-8") || strcasestr(v, "utf8");
    }
    return false;
}

void trend_draw(char *out, size_t size, const uint64_t *values, int n, int marks, uint64_t top,
                bool utf8)
{
    static const char ascii[] = "_.-:=+*#";
    size_t len = 0;
    if (size)
        out[0] = 0;
    if (marks <= 0 || n <= 0)
        return;
    int per = (n + marks - 1) / marks;
    if (!top)
        for (int i = 0; i < n; i++)
            if (values[i] != TREND_NONE && values[i] > top)
                top = values[i];
    /* The marks end with the last value: the first takes what is left over. */
    for (int from = n - (n + per - 1) / per * per; from < n; from += per) {
        uint64_t v = TREND_NONE;
        for (int i = from < 0 ? 0 : from; i < from + per; i++)
            if (values[i] != TREND_NONE && (v == TREND_NONE || values[i] > v))
                v = values[i];
        char mark[4] = " ";
        if (v != TREND_NONE) {
            int level = top ? (int)((double)v / (double)top * 8.0 - 1e-9) : 0;
            level = level < 0 ? 0 : level > 7 ? 7 : level;
            if (utf8)
                snprintf(mark, sizeof mark, "\xe2\x96%c", (char)(0x81 + level));
            else
                mark[0] = ascii[level];
        }
        size_t m = strlen(mark);
        if (len + m + 1 > size)
            break;
        memcpy(out + len, mark, m + 1);
        len += m;
    }
}

/* A row's values over the window: the sum of the lines' recent samples
 * at each step (TREND_NONE where none has one). */
static void add_line(uint64_t *values, int steps, uint64_t last_step,
                     const struct history_line *l)
{
    const struct history_ring *r = &l->recent;
    for (int i = 0; r->step_ms && i < r->n; i++) {
        uint64_t step = r->first_ms / r->step_ms + (uint64_t)i;
        if (step > last_step || last_step - step >= (uint64_t)steps)
            continue;
        uint64_t *v = &values[steps - 1 - (int)(last_step - step)];
        *v = (*v == TREND_NONE ? 0 : *v) + r->used[i];
    }
}

static uint64_t last_known(const uint64_t *values, int n)
{
    for (int i = n - 1; i >= 0; i--)
        if (values[i] != TREND_NONE)
            return values[i];
    return 0;
}

struct row_style {
    int steps, marks;
    uint64_t last_step;
    bool utf8;
};

static void row(FILE *out, const struct row_style *st, const char *name, int dev,
                const uint64_t *values, uint64_t of)
{
    char marks[3 * 256 + 1];
    trend_draw(marks, sizeof marks, values, st->steps, st->marks, of, st->utf8);
    fprintf(out, "%-16.16s %-3d %s %11s", name, dev, marks,
            format_size(last_known(values, st->steps)).text);
    fprintf(out, of ? " of %s\n" : "\n", format_size(of).text);
}

void trend_section(const struct snapshot *s, FILE *out, int width, bool utf8)
{
    const struct history_view *v = s->history;
    uint64_t step_ms = 0;
    for (int i = 0; v && i < v->n && !step_ms; i++)
        step_ms = v->line[i].recent.step_ms;
    if (!step_ms)
        return;
    struct row_style st = {.steps = (int)(TREND_WINDOW_MS / step_ms), .utf8 = utf8};
    if (st.steps < 1 || st.steps > 4096)
        return;
    st.last_step = v->now_ms / step_ms;
    /* name, GPU, the marks, now and "of" its budget ("141.00 GiB"): 48
     * columns and the marks. */
    int room = (width < 80 ? 80 : width) - 48;
    room = room > 256 ? 256 : room;
    int per = (st.steps + room - 1) / room;
    st.marks = (st.steps + per - 1) / per;
    uint64_t *values = malloc((size_t)st.steps * sizeof *values);
    if (!values)
        return;
    fprintf(out, "\nTREND, the last %llu s: a mark is the highest in %llu s\n",
            (unsigned long long)(TREND_WINDOW_MS / 1000),
            (unsigned long long)(per * step_ms / 1000));
    for (int d = 0; d < s->ndev; d++) {
        const struct history_line *l = history_view_device(v, s->dev[d].index);
        if (!l)
            continue;
        for (int k = 0; k < st.steps; k++)
            values[k] = TREND_NONE;
        add_line(values, st.steps, st.last_step, l);
        row(out, &st, "device", s->dev[d].index, values, s->dev[d].total);
    }
    /* Jobs: every entry of the reader's own with a job name, summed per
     * job and GPU; the budget is the job's grant, else its processes'. */
    for (int i = 0; i < s->n; i++) {
        const struct snap_entry *e = &s->e[i];
        if (e->role == 'u' || strcmp(e->job, "-") == 0)
            continue;
        bool first = true;
        for (int j = 0; j < i && first; j++)
            first = !(s->e[j].role != 'u' && s->e[j].dev == e->dev &&
                      strcmp(s->e[j].job, e->job) == 0);
        if (!first)
            continue;
        uint64_t job_grant = 0, grants = 0;
        for (int k = 0; k < st.steps; k++)
            values[k] = TREND_NONE;
        /* A job's own figure is its processes' sum (vram run's command, a
         * Slurm step): where they are listed, they are counted instead. */
        bool processes = false;
        for (int j = i; j < s->n && !processes; j++)
            processes = s->e[j].role == 'p' && s->e[j].dev == e->dev &&
                        strcmp(s->e[j].job, e->job) == 0;
        for (int j = i; j < s->n; j++) {
            const struct snap_entry *x = &s->e[j];
            if (x->role == 'u' || x->dev != e->dev || strcmp(x->job, e->job) != 0)
                continue;
            if (x->role == 'j')
                job_grant += x->grant;
            else
                grants += x->grant;
            const struct history_line *l = history_view_client(v, x->id, x->dev);
            if (l && !(x->role == 'j' && processes))
                add_line(values, st.steps, st.last_step, l);
        }
        char name[80];
        snprintf(name, sizeof name, "job %s", e->job);
        row(out, &st, name, e->dev, values, job_grant ? job_grant : grants);
    }
    free(values);
}
