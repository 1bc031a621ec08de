/* plot: what the parts of `vram plot` share.
 *
 * plot.c reads the options and the recording, or vramd's history of a job
 * made into one (plot_job.c), and builds its timeline
 * (src/record/timeline.h); plot_svg.c draws one chart of one device as
 * SVG; plot_page.c puts the charts into a page (HTML, with the script that
 * shows the time and bytes under the pointer) or into one SVG document.
 */
#ifndef VRAM_PLOT_H
#define VRAM_PLOT_H

#include "../src/record/reader.h"
#include "../src/record/timeline.h"

#include <stdbool.h>
#include <stdio.h>

struct plot_options {
    const char *title;  /* what the recording is called on the page */
    int width;          /* pixel columns of a chart's plot area */
};

/* A chart's frame, in SVG pixels. The plot area is [left, left + width)
 * by [top, top + height); column c is the pixel column left + c. */
#define PLOT_LEFT 84
#define PLOT_TOP 40
#define PLOT_HEIGHT 240
#define PLOT_BOTTOM 34
#define PLOT_RIGHT 300
#define PLOT_CHART_HEIGHT (PLOT_TOP + PLOT_HEIGHT + PLOT_BOTTOM)

/* The byte axis of a device's charts: both charts of a device share it. */
struct plot_scale {
    double top;  /* bytes at the top of the plot area */
    double step; /* bytes between ticks */
    double unit; /* bytes of the unit the ticks are labelled in */
    const char *unit_name;
};
void plot_scale_for(const struct timeline_device *td, struct plot_scale *s);

/* Writes one chart (`kind`: "family" or "process") as an <svg> element at
 * (x, y) of its parent. `interactive`: the page's hover layer. */
void plot_chart(FILE *out, const struct timeline *t, const struct timeline_device *td,
                const struct timeline_chart *ch, const char *kind, int x, int y,
                bool interactive);

/* The colour of series s of a chart. */
const char *plot_colour(const struct timeline_chart *ch, int s);

/* Text for XML/HTML: & < > " ' escaped; bytes outside ASCII as '?'. */
void xml_text(FILE *out, const char *s);

/* Seconds with as many decimals as `resolution` (seconds) asks for. */
void plot_seconds(char *out, size_t n, double seconds, double resolution);

/* vramd's history of job `job` (every series of v) as a recording, for the
 * same timeline and pages (plot_job.c). 0, or -1 if memory ran out. */
struct history_view;
int plot_job_recording(const struct history_view *v, const char *job, struct recording *r);

int plot_write_html(FILE *out, const struct recording *r, const struct timeline *t,
                    const struct plot_options *o);
int plot_write_svg(FILE *out, const struct recording *r, const struct timeline *t,
                   const struct plot_options *o);

#endif
