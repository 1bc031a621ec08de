/* The page and the SVG document of `vram plot` (see plot.h). Everything
 * the page needs is in it: the style and the script are plot.css and
 * plot.js, built into vram, and no font, script or image is fetched. */
#include "../src/record/formats.h"
#include "../src/util/json.h"
#include "../src/util/parse.h"
#include "plot.h"

#include <string.h>
#include <time.h>

/* plot.css and plot.js, as NUL-terminated strings. */
#define ASSET(name, file)                                                                      \
    ".globl " name "\n.hidden " name "\n" name ":\n.incbin \"" VRAM_PLOT_ASSETS "/" file       \
    "\"\n.byte 0\n"
__asm__(".pushsection .rodata\n" ASSET("vram_plot_style", "plot.css")
            ASSET("vram_plot_script", "plot.js") ".popsection\n");
extern const char vram_plot_style[], vram_plot_script[];

static void u64_array(FILE *out, const uint64_t *v, size_t stride, size_t offset, int n)
{
    fputc('[', out);
    for (int c = 0; c < n; c++)
        fprintf(out, c ? ",%llu" : "%llu",
                (unsigned long long)v[(size_t)c * stride + offset]);
    fputc(']', out);
}

static void chart_data(FILE *out, const struct timeline *t, const struct timeline_chart *ch)
{
    fputs("{\"names\":[", out);
    for (int s = 0; s < ch->nseries; s++) {
        if (s)
            fputc(',', out);
        json_string(out, ch->names[s]);
    }
    fputs("],\"last\":[", out);
    for (int s = 0; s < ch->nseries; s++) {
        if (s)
            fputc(',', out);
        u64_array(out, ch->series_last, (size_t)ch->nseries, (size_t)s, t->ncols);
    }
    fputs("]}", out);
}

/* What the page's script reads: the device's columns. */
static void device_data(FILE *out, const struct timeline *t, const struct timeline_device *td)
{
    fprintf(out, "<script type=\"application/json\" class=\"data\">{\"device\":%d,\"ncols\":%d,"
                 "\"span_ns\":%.0f,\"total_min\":",
            td->dev, t->ncols, timeline_span_ns(t));
    u64_array(out, td->total_min, 1, 0, t->ncols);
    fputs(",\"total_max\":", out);
    u64_array(out, td->total_max, 1, 0, t->ncols);
    fputs(",\"budget\":", out);
    u64_array(out, td->budget, 1, 0, t->ncols);
    if (td->nvml_max) { /* NVML's figure at each column's end; null before its first reading */
        fputs(",\"nvml\":[", out);
        for (int c = 0; c < t->ncols; c++) {
            if (c)
                fputc(',', out);
            if (td->nvml_last[c] == TIMELINE_NO_NVML)
                fputs("null", out);
            else
                fprintf(out, "%llu", (unsigned long long)td->nvml_last[c]);
        }
        fputc(']', out);
    }
    fputs(",\"refusals\":[", out);
    for (int c = 0; c < t->ncols; c++)
        fprintf(out, c ? ",%u" : "%u", td->refusals[c]);
    fputs("],\"charts\":{\"family\":", out);
    chart_data(out, t, &td->by_family);
    fputs(",\"process\":", out);
    chart_data(out, t, &td->by_process);
    fputs("}}</script>\n", out);
}

static double column_seconds(const struct timeline *t)
{
    return timeline_span_ns(t) / 1e9 / t->ncols;
}

/* "1234 events of 3 processes over 12.500 s, from 2024-05-01 10:00:00 CEST". */
static void facts(FILE *out, const struct recording *r, const struct timeline *t)
{
    fprintf(out, "%zu event%s of %zu process%s over %.3f s", t->nevents,
            t->nevents == 1 ? "" : "s", t->nimages,
            t->nimages == 1 ? "" : "es", (double)(t->end - t->start) / 1e9);
    if (r->realtime_offset) {
        time_t secs = (time_t)((t->start + (uint64_t)r->realtime_offset) / 1000000000ull);
        struct tm tm;
        char when[64];
        if (localtime_r(&secs, &tm) && strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S %Z", &tm))
            fprintf(out, ", from %s", when);
    }
}

static void device_facts(FILE *out, const struct timeline *t, const struct timeline_device *td)
{
    char when[40];
    plot_seconds(when, sizeof when, (double)(td->peak_time - t->start) / 1e9, column_seconds(t));
    fprintf(out, "peak %s at %s", format_size(td->peak).text, when);
    if (td->budget_peak)
        fprintf(out, "; %s %s", td->command_budget ? "the command's budget" : "budget",
                format_size(td->budget_peak).text);
    if (td->nvml_max)
        fprintf(out, "; NVML's peak %s", format_size(td->nvml_peak).text);
    fprintf(out, "; %llu refused", (unsigned long long)td->refusal_count);
}

static const char how[] =
    "Each pixel column covers %s. A band is the highest level its stack reached within "
    "the column, so no peak between two columns is lost, however many events fall into one; "
    "hover a chart for a column's times, its highest and lowest total, the budget and each "
    "series at the column's end. Stacked by process: the processes with the highest peaks, "
    "the rest as \"other\". The budget line is the command's budget where one was recorded, "
    "else the sum of the budgets of the processes running then. The dotted line by family, where the "
    "recording has it, is what NVML said the processes held (what nvidia-smi lists), read "
    "every 100 ms and near the budget: where it is above the bands, the driver held "
    "memory vram had not charged yet.";

int plot_write_html(FILE *out, const struct recording *r, const struct timeline *t,
                    const struct plot_options *o)
{
    fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>GPU memory "
          "over time: ",
          out);
    xml_text(out, o->title);
    fprintf(out, "</title>\n<style>\n%s</style></head>\n<body>\n<header><h1>GPU memory over "
                 "time</h1>\n<p class=\"source\">",
            vram_plot_style);
    xml_text(out, o->title);
    fputs("</p>\n<p class=\"facts\">", out);
    facts(out, r, t);
    fputs("</p>\n", out);
    if (r->notes[0]) {
        fputs("<p class=\"note\">", out);
        xml_text(out, r->notes);
        fputs("</p>\n", out);
    }
    char col[40];
    plot_seconds(col, sizeof col, column_seconds(t), column_seconds(t) / 100);
    fputs("<p class=\"how\">", out);
    fprintf(out, how, col);
    fputs("</p></header>\n", out);
    if (!t->ndevices)
        fputs("<p>This recording holds no GPU memory events.</p>\n", out);
    for (int i = 0; i < t->ndevices; i++) {
        const struct timeline_device *td = &t->devices[i];
        fprintf(out, "<section class=\"device\" id=\"gpu-%d\" data-device=\"%d\">\n<h2>GPU %d</h2>"
                     "<p class=\"facts\">",
                td->dev, td->dev, td->dev);
        device_facts(out, t, td);
        fputs("</p>\n", out);
        plot_chart(out, t, td, &td->by_family, "family", 0, 0, true);
        plot_chart(out, t, td, &td->by_process, "process", 0, 0, true);
        device_data(out, t, td);
        fputs("</section>\n", out);
    }
    fprintf(out, "<div id=\"tip\" class=\"tip\" hidden></div>\n<script>\n%s</script>\n"
                 "</body></html>\n",
            vram_plot_script);
    return ferror(out) ? -1 : 0;
}

int plot_write_svg(FILE *out, const struct recording *r, const struct timeline *t,
                   const struct plot_options *o)
{
    int width = PLOT_LEFT + t->ncols + PLOT_RIGHT;
    int head = 62, per_device = 26 + 2 * PLOT_CHART_HEIGHT;
    int height = head + (t->ndevices ? t->ndevices : 1) * per_device;
    fprintf(out, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                 "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
                 "viewBox=\"0 0 %d %d\">\n<style>\n%s</style>\n"
                 "<rect width=\"100%%\" height=\"100%%\" fill=\"#fff\"/>\n"
                 "<text class=\"title\" x=\"16\" y=\"26\">GPU memory over time: ",
            width, height, width, height, vram_plot_style);
    xml_text(out, o->title);
    fputs("</text>\n<text class=\"facts\" x=\"16\" y=\"46\">", out);
    facts(out, r, t);
    fputs("</text>\n", out);
    if (!t->ndevices)
        fprintf(out, "<text x=\"16\" y=\"%d\">This recording holds no GPU memory events.</text>\n",
                head + 20);
    for (int i = 0; i < t->ndevices; i++) {
        const struct timeline_device *td = &t->devices[i];
        int y = head + i * per_device;
        fprintf(out, "<text class=\"chart-title\" x=\"16\" y=\"%d\">GPU %d: ", y + 16, td->dev);
        device_facts(out, t, td);
        fputs("</text>\n", out);
        plot_chart(out, t, td, &td->by_family, "family", 0, y + 26, false);
        plot_chart(out, t, td, &td->by_process, "process", 0, y + 26 + PLOT_CHART_HEIGHT, false);
    }
    fputs("</svg>\n", out);
    return ferror(out) ? -1 : 0;
}
