/* One chart of one device as SVG: the stacked series, the axes, the
 * budget line, NVML's line, the refusals and the peak (see plot.h). */
#include "../src/util/parse.h"
#include "plot.h"

#include <math.h>
#include <string.h>

void xml_text(FILE *out, const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '&': fputs("&amp;", out); break;
        case '<': fputs("&lt;", out); break;
        case '>': fputs("&gt;", out); break;
        case '"': fputs("&quot;", out); break;
        case '\'': fputs("&#39;", out); break;
        default: fputc(*p >= 0x20 && *p < 0x7f ? *p : '?', out); break;
        }
    }
}

void plot_seconds(char *out, size_t n, double seconds, double resolution)
{
    int decimals = 0;
    while (decimals < 9 && resolution < 0.95 * pow(10, -decimals))
        decimals++;
    snprintf(out, n, "%.*f s", decimals, seconds);
}

const char *plot_colour(const struct timeline_chart *ch, int s)
{
    /* Families keep their colour in every chart; processes take turns. */
    static const char *const family[RECORD_FAMILIES] = {
        "#9c9c9c", "#4e79a7", "#f28e2b", "#59a14f", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7",
        "#9c755f", "#d7b5a6", /* context, module */
        "#e15759",            /* driver: what the driver holds beyond the charges */
        "#4e79a7",            /* reported (vramd's history) */
    };
    static const char *const process[] = {
        "#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2",
        "#edc948", "#b07aa1", "#ff9da7", "#9c755f",
    };
    if (ch->family[s] >= 0 && ch->family[s] < RECORD_FAMILIES)
        return family[ch->family[s]];
    if (ch->pid[s] == 0)
        return "#bab0ac"; /* other */
    return process[s % (int)(sizeof process / sizeof *process)];
}

/* A tick step of 1, 2, 2.5 or 5 times a power of ten. */
static double nice_step(double raw)
{
    double p = pow(10, floor(log10(raw)));
    double m = raw / p;
    return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 2.5 ? 2.5 : m <= 5 ? 5 : 10) * p;
}

void plot_scale_for(const struct timeline_device *td, struct plot_scale *s)
{
    uint64_t most = td->peak > td->budget_peak ? td->peak : td->budget_peak;
    if (td->nvml_peak > most)
        most = td->nvml_peak;
    double top = (double)most * 1.06;
    static const struct {
        double bytes;
        const char *name;
    } units[] = {{1024.0 * 1024 * 1024 * 1024, "TiB"}, {1024.0 * 1024 * 1024, "GiB"},
                 {1024.0 * 1024, "MiB"}, {1024.0, "KiB"}, {1, "B"}};
    if (top < 1)
        top = 1024.0 * 1024 * 1024;
    size_t u = 0;
    while (u + 1 < sizeof units / sizeof *units && top < units[u].bytes)
        u++;
    s->unit = units[u].bytes;
    s->unit_name = units[u].name;
    double step = nice_step(top / s->unit / 5);
    if (u == 4 && step < 1)
        step = 1;
    s->step = step * s->unit;
    s->top = ceil(top / s->step) * s->step;
}

static double y_of(const struct plot_scale *s, double bytes)
{
    return PLOT_TOP + PLOT_HEIGHT - bytes / s->top * PLOT_HEIGHT;
}

/* "2.5 GiB": a tick's label, in the axis's unit. */
static void tick_label(char *out, size_t n, double bytes, const struct plot_scale *s)
{
    double v = bytes / s->unit;
    snprintf(out, n, "%.2f", v);
    char *dot = strchr(out, '.');
    if (dot) {
        char *end = out + strlen(out) - 1;
        while (end > dot && *end == '0')
            *end-- = 0;
        if (end == dot)
            *end = 0;
    }
    size_t len = strlen(out);
    snprintf(out + len, n - len, " %s", s->unit_name);
}

static void axes(FILE *out, const struct timeline *t, const struct plot_scale *s, int width)
{
    fputs("<g class=\"axis y\">", out);
    for (double v = 0; v <= s->top + s->step / 2; v += s->step) {
        char label[32];
        tick_label(label, sizeof label, v, s);
        double y = y_of(s, v);
        fprintf(out, "<g class=\"ytick\" data-bytes=\"%.0f\"><line x1=\"%d\" x2=\"%d\" "
                     "y1=\"%.1f\" y2=\"%.1f\"/><text x=\"%d\" y=\"%.1f\">%s</text></g>",
                v, PLOT_LEFT, PLOT_LEFT + width, y, y, PLOT_LEFT - 6, y + 4, label);
    }
    fputs("</g><g class=\"axis x\">", out);
    double span = timeline_span_ns(t) / 1e9;
    double step = nice_step(span / 8);
    for (double sec = 0; sec <= span * 1.0000001; sec += step) {
        double x = PLOT_LEFT + sec / span * width;
        char label[32];
        plot_seconds(label, sizeof label, sec, step);
        fprintf(out, "<g class=\"xtick\" data-seconds=\"%.9g\"><line x1=\"%.1f\" x2=\"%.1f\" "
                     "y1=\"%d\" y2=\"%d\"/><text x=\"%.1f\" y=\"%d\">%s</text></g>",
                sec, x, x, PLOT_TOP + PLOT_HEIGHT, PLOT_TOP + PLOT_HEIGHT + 5, x,
                PLOT_TOP + PLOT_HEIGHT + 18, label);
    }
    fputs("</g>", out);
}

/* The area under a stack level, one step per column; runs of equal
 * height are one horizontal move. */
static void area(FILE *out, const struct timeline *t, const struct timeline_chart *ch, int s,
                 const struct plot_scale *sc)
{
    double base = PLOT_TOP + PLOT_HEIGHT;
    fprintf(out, "d=\"M%d %.1f", PLOT_LEFT, base);
    double last = base;
    int run = 0;
    for (int c = 0; c < t->ncols; c++) {
        double y = round(y_of(sc, (double)ch->level_max[(size_t)c * (size_t)ch->nseries +
                                                        (size_t)s]) * 10) / 10;
        if (y != last) {
            if (run)
                fprintf(out, "h%d", run);
            fprintf(out, "V%.1f", y);
            last = y;
            run = 0;
        }
        run++;
    }
    fprintf(out, "h%dV%.1fZ\"", run, base);
}

/* The budget line: a step path over the columns that have a budget. */
static void budget_line(FILE *out, const struct timeline *t, const struct timeline_device *td,
                        const struct plot_scale *s)
{
    if (!td->budget_peak)
        return;
    fprintf(out, "<path class=\"budget\" data-bytes=\"%llu\" d=\"",
            (unsigned long long)td->budget_peak);
    bool drawing = false;
    double last = 0;
    for (int c = 0; c < t->ncols; c++) {
        uint64_t b = td->budget[c];
        double y = round(y_of(s, (double)b) * 10) / 10;
        if (!b) {
            drawing = false;
            continue;
        }
        if (!drawing)
            fprintf(out, "M%d %.1f", PLOT_LEFT + c, y);
        else if (y != last)
            fprintf(out, "V%.1f", y);
        fprintf(out, "h1");
        drawing = true;
        last = y;
    }
    fputs("\"><title>", out);
    fprintf(out, "%s: %s", td->command_budget ? "the command's budget" : "the budget",
            format_size(td->budget_peak).text);
    fputs("</title></path>", out);
    /* Labelled where it is highest, at the end of its last stretch there. */
    int c = t->ncols - 1;
    while (c > 0 && td->budget[c] != td->budget_peak)
        c--;
    fprintf(out, "<text class=\"budget-label\" x=\"%d\" y=\"%.1f\">%s %s</text>",
            PLOT_LEFT + c - 2, y_of(s, (double)td->budget_peak) - 5,
            td->command_budget ? "command budget" : "budget", format_size(td->budget_peak).text);
}

/* NVML's line: a step path over the columns from the first reading, at
 * each column's highest figure (as the bands are at their highest). */
static void nvml_line(FILE *out, const struct timeline *t, const struct timeline_device *td,
                      const struct plot_scale *s)
{
    if (!td->nvml_max)
        return;
    fprintf(out, "<path class=\"nvml\" data-bytes=\"%llu\" d=\"",
            (unsigned long long)td->nvml_peak);
    double last = -1;
    int run = 0;
    for (int c = 0; c < t->ncols; c++) {
        if (td->nvml_max[c] == TIMELINE_NO_NVML)
            continue; /* before the first reading: only ever a run at the start */
        double y = round(y_of(s, (double)td->nvml_max[c]) * 10) / 10;
        if (last < 0)
            fprintf(out, "M%d %.1f", PLOT_LEFT + c, y);
        else if (y != last)
            fprintf(out, "h%dV%.1f", run, y), run = 0;
        run++;
        last = y;
    }
    if (run)
        fprintf(out, "h%d", run);
    fprintf(out, "\"><title>NVML's figure (as nvidia-smi lists it): peak %s</title></path>",
            format_size(td->nvml_peak).text);
}

static void refusals(FILE *out, const struct timeline *t, const struct timeline_device *td)
{
    if (!td->refusal_count)
        return;
    fputs("<g class=\"refusals\">", out);
    size_t listed = 0;
    double col = timeline_span_ns(t) / 1e9 / t->ncols;
    for (int c = 0; c < t->ncols; c++) {
        if (!td->refusals[c])
            continue;
        double at = (double)(timeline_column_time(t, c) - t->start) / 1e9;
        char when[40];
        plot_seconds(when, sizeof when, at, col);
        fprintf(out, "<path class=\"refusal\" data-count=\"%u\" data-seconds=\"%.9g\" "
                     "d=\"M%.1f %d l-4 -8h8z\"><title>%u refused at %s",
                td->refusals[c], at, PLOT_LEFT + c + 0.5, PLOT_TOP - 2, td->refusals[c], when);
        /* The first listed refusal of this column, in words. */
        while (listed < td->nlisted && timeline_column_of(t, td->listed[listed].time) < c)
            listed++;
        if (listed < td->nlisted && timeline_column_of(t, td->listed[listed].time) == c) {
            const struct timeline_refusal *f = &td->listed[listed];
            fprintf(out, ": %s asked by %u (%s), %s in use", format_size(f->bytes).text, f->pid,
                    record_family_name(f->family), format_size(f->in_use).text);
            if (f->budget)
                fprintf(out, " of %s", format_size(f->budget).text);
            fprintf(out, ": %s", record_reason_name(f->reason));
        }
        fputs("</title></path>", out);
    }
    fputs("</g>", out);
}

static void peak(FILE *out, const struct timeline *t, const struct timeline_device *td,
                 const struct plot_scale *s)
{
    if (!td->peak)
        return;
    int c = timeline_column_of(t, td->peak_time);
    double x = PLOT_LEFT + c + 0.5, y = y_of(s, (double)td->peak);
    double at = (double)(td->peak_time - t->start) / 1e9;
    char when[40];
    plot_seconds(when, sizeof when, at, timeline_span_ns(t) / 1e9 / t->ncols);
    bool left = c > t->ncols * 6 / 10;
    fprintf(out, "<g class=\"peak\" data-bytes=\"%llu\" data-seconds=\"%.9f\">"
                 "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\"/>"
                 "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\">peak %s at %s</text></g>",
            (unsigned long long)td->peak, at, x, y, left ? x - 8 : x + 8, y < PLOT_TOP + 12 ? y + 14 : y - 6,
            left ? "end" : "start", format_size(td->peak).text, when);
}

static void legend(FILE *out, const struct timeline_device *td, const struct timeline_chart *ch,
                   bool nvml, int width)
{
    int x = PLOT_LEFT + width + 16, row = 0;
    fputs("<g class=\"legend\">", out);
    if (nvml) {
        int y = PLOT_TOP;
        fprintf(out, "<g class=\"legend-nvml\"><line class=\"nvml\" x1=\"%d\" x2=\"%d\" "
                     "y1=\"%d\" y2=\"%d\"/><text x=\"%d\" y=\"%d\">NVML<tspan "
                     "class=\"legend-peak\"> %s</tspan><title>NVML's figure for the processes "
                     "(what nvidia-smi lists), read by vram as they ran: peak %s</title></text>"
                     "</g>",
                x, x + 12, y + 6, y + 6, x + 18, y + 10, format_size(td->nvml_peak).text,
                format_size(td->nvml_peak).text);
        row++;
    }
    for (int s = ch->nseries - 1; s >= 0; s--, row++) {
        int y = PLOT_TOP + row * 20;
        fprintf(out, "<rect x=\"%d\" y=\"%d\" width=\"12\" height=\"12\" fill=\"%s\"/>"
                     "<text x=\"%d\" y=\"%d\">",
                x, y, plot_colour(ch, s), x + 18, y + 10);
        char name[40];
        snprintf(name, sizeof name, "%s", ch->names[s]);
        if (strlen(ch->names[s]) > 34)
            snprintf(name + 31, sizeof name - 31, "...");
        xml_text(out, name);
        fprintf(out, "<tspan class=\"legend-peak\"> %s</tspan><title>",
                format_size(ch->series_peak[s]).text);
        xml_text(out, ch->names[s]);
        fprintf(out, ": peak %s</title></text>", format_size(ch->series_peak[s]).text);
    }
    fputs("</g>", out);
}

void plot_chart(FILE *out, const struct timeline *t, const struct timeline_device *td,
                const struct timeline_chart *ch, const char *kind, int x, int y,
                bool interactive)
{
    int width = t->ncols, total = PLOT_LEFT + width + PLOT_RIGHT;
    struct plot_scale s;
    plot_scale_for(td, &s);
    fprintf(out, "<svg class=\"chart\" data-chart=\"%s\" data-device=\"%d\" data-left=\"%d\" "
                 "data-top=\"%d\" data-height=\"%d\" data-columns=\"%d\" x=\"%d\" y=\"%d\" "
                 "width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\">",
            kind, td->dev, PLOT_LEFT, PLOT_TOP, PLOT_HEIGHT, width, x, y, total,
            PLOT_CHART_HEIGHT, total, PLOT_CHART_HEIGHT);
    fprintf(out, "<text class=\"chart-title\" x=\"%d\" y=\"16\">GPU %d by %s</text>", PLOT_LEFT,
            td->dev, kind);
    axes(out, t, &s, width);
    for (int k = ch->nseries - 1; k >= 0; k--) {
        /* Top level first: each lower one is painted over it, so each band
         * shows between its level and the one below. */
        fprintf(out, "<path class=\"series\" data-series=\"");
        xml_text(out, ch->names[k]);
        fprintf(out, "\" data-peak=\"%llu\" fill=\"%s\" ",
                (unsigned long long)ch->series_peak[k], plot_colour(ch, k));
        area(out, t, ch, k, &s);
        fputs("><title>", out);
        xml_text(out, ch->names[k]);
        fprintf(out, ": peak %s</title></path>", format_size(ch->series_peak[k]).text);
    }
    fprintf(out, "<rect class=\"frame\" x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\"/>",
            PLOT_LEFT, PLOT_TOP, width, PLOT_HEIGHT);
    /* NVML's line beside the families', whose sum is vram's figure. */
    bool nvml = td->nvml_max && strcmp(kind, "family") == 0;
    budget_line(out, t, td, &s);
    if (nvml)
        nvml_line(out, t, td, &s);
    refusals(out, t, td);
    peak(out, t, td, &s);
    legend(out, td, ch, nvml, width);
    if (interactive)
        fprintf(out, "<line class=\"cursor\" x1=\"0\" x2=\"0\" y1=\"%d\" y2=\"%d\" "
                     "visibility=\"hidden\"/>",
                PLOT_TOP, PLOT_TOP + PLOT_HEIGHT);
    fputs("</svg>\n", out);
}
