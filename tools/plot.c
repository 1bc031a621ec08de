/* vram plot: a recording's GPU memory over time, or a job's from vramd's
 * history, as a page or an SVG. */
#include "plot.h"

#include "../src/client/client.h"
#include "../src/client/fetch.h"
#include "../src/protocol/history_view.h"
#include "../src/record/formats.h"
#include "../src/util/parse.h"
#include "cli.h"

#include <string.h>
#include <unistd.h>

static void plot_usage(FILE *out)
{
    fprintf(out,
            "usage: vram plot FILE -o OUT [--format html|svg] [--width PIXELS] [--device N]\n"
            "                 [--title TEXT]\n"
            "       vram plot --job NAME -o OUT [--socket PATH] [the same options]\n"
            "\n"
            "Draws the GPU memory of a recording (vram run --record FILE) over time, per GPU:\n"
            "stacked by family and by process, the budget as a line, refusals marked, the\n"
            "peak annotated, and on the family chart NVML's figure for the processes as a\n"
            "dotted line where the recording has NVML's readings. OUT.html is a page that\n"
            "shows the time and the bytes under the pointer; OUT.svg a picture. Both are\n"
            "self-contained: nothing is fetched.\n"
            "\n"
            "With --job, the same for a job from vramd's history, without a recording: what\n"
            "each of its processes reported in use and its budget, the highest of every\n"
            "second of the last 2 minutes and of every 10 s of the last hour. A job that\n"
            "ended is kept for an hour. Your own jobs (root: anyone's).\n"
            "\n"
            "A recording of millions of events stays readable: each pixel column keeps the\n"
            "highest level each stacked series reached in it (and the lowest and last total),\n"
            "so no peak is lost between columns.\n"
            "\n"
            "  -o, --output OUT   the file to write (.html or .svg; \"-\": standard output,\n"
            "                     with --format)\n"
            "  --job NAME         the job's history from vramd: the processes that gave this\n"
            "                     job name (vram run --job, VRAM_JOB) and the job's grant;\n"
            "                     for a Slurm job ID, every step of it (ID.0, ID.1, ...)\n"
            "  --socket PATH      vramd's socket, with --job (default: VRAM_DAEMON,\n"
            "                     " LEDGER_SYSTEM_SOCKET ", then the user's own daemon's)\n"
            "  --format FORMAT    html or svg, whatever OUT is called\n"
            "  --width PIXELS     columns of a chart, %d to %d (default 1000)\n"
            "  --device N         only GPU N\n"
            "  --title TEXT       what the page calls the recording (default: FILE, or\n"
            "                     \"job NAME\")\n",
            200, 8000);
}

struct page {
    const struct recording *r;
    const struct timeline *t;
    const struct plot_options *o;
    bool svg;
};

static int write_page(FILE *out, void *arg)
{
    const struct page *p = arg;
    return p->svg ? plot_write_svg(out, p->r, p->t, p->o) : plot_write_html(out, p->r, p->t, p->o);
}

/* The job's history from vramd, made a recording. 0, or 1 after a message. */
static int job_recording(const char *job, const char *socket_path, struct recording *r)
{
    char path[256], err[512];
    if (cli_daemon_socket("plot", socket_path, path, sizeof path) != 0)
        return 1;
    struct history_view v;
    if (history_fetch(path, job, false, &v, err, sizeof err) != 0) {
        fprintf(stderr, "vram plot: %s\n", err);
        return 1;
    }
    int rc = 0;
    if (!v.n) {
        fprintf(stderr, "vram plot: vramd has no history of a job \"%s\" of yours: no process "
                "gave that job name (vram run --job, VRAM_JOB) in the last hour%s\n", job,
                geteuid() == 0 ? "" : " (another user's jobs are for root to see)");
        rc = 1;
    } else if (plot_job_recording(&v, job, r) != 0) {
        fprintf(stderr, "vram plot: job %s: out of memory\n", job);
        rc = 1;
    }
    history_view_free(&v);
    return rc;
}

int cmd_plot(int argc, char **argv)
{
    const char *output = NULL, *format = NULL, *width_s = NULL, *device_s = NULL, *title = NULL,
               *help = NULL, *job = NULL, *socket_path = NULL;
    const struct cli_option table[] = {
        {"-o", CLI_VALUE, &output},       {"--output", CLI_VALUE, &output},
        {"--format", CLI_VALUE, &format}, {"--width", CLI_VALUE, &width_s},
        {"--device", CLI_VALUE, &device_s}, {"--title", CLI_VALUE, &title},
        {"--job", CLI_VALUE, &job},       {"--socket", CLI_VALUE, &socket_path},
        {"--help", CLI_FLAG, &help},      {"-h", CLI_FLAG, &help},
        {NULL, 0, NULL},
    };
    char *input[1];
    int n = cli_parse_operands("plot", table, argc, argv, 2, input, 1);
    if (n < 0)
        return 2;
    if (help) {
        plot_usage(stdout);
        return 0;
    }
    if (job && n)
        return cli_usage_error("plot", "\"%s\" and --job %s: give a recording or a job, not both",
                               input[0], job);
    if (job && !proto_name_ok(job))
        return cli_usage_error("plot", "--job \"%s\": not a job name; accepted: 1 to 63 of "
                               "A-Z a-z 0-9 . _ : @ + / -", job);
    if (socket_path && !job)
        return cli_usage_error("plot", "--socket is for --job (a recording is read from its file)");
    if (n != 1 && !job)
        return cli_usage_error("plot", "which recording? vram plot FILE -o OUT, or vram plot --job "
                               "NAME -o OUT (vram plot --help says more)");
    if (!output)
        return cli_usage_error("plot", "where to? give -o OUT, a .html or .svg file");
    bool svg;
    const char *ext = strrchr(output, '.');
    if (format) {
        if (strcmp(format, "html") != 0 && strcmp(format, "svg") != 0)
            return cli_usage_error("plot", "--format \"%s\": expected html or svg", format);
        svg = strcmp(format, "svg") == 0;
    } else if (ext && (strcmp(ext, ".html") == 0 || strcmp(ext, ".htm") == 0)) {
        svg = false;
    } else if (ext && strcmp(ext, ".svg") == 0) {
        svg = true;
    } else {
        return cli_usage_error("plot", "-o \"%s\": the extension does not say the format; name it "
                               ".html (a page) or .svg (a picture), or give --format", output);
    }
    uint64_t width = 1000;
    int device = -1;
    parse_why why;
    if (width_s && (parse_uint(width_s, 8000, &width, &why) != 0 || width < 200))
        return cli_usage_error("plot", "--width \"%s\": %s; expected a number of pixels from 200 "
                               "to 8000", width_s, width < 200 ? "too narrow" : why.text);
    if (cli_parse_device("plot", device_s, &device) != 0)
        return 2;

    struct recording r;
    char err[1024], job_title[96];
    if (job) {
        if (job_recording(job, socket_path, &r) != 0)
            return 1;
        snprintf(job_title, sizeof job_title, "job %s", job);
        input[0] = job_title;
    } else if (recording_load(input[0], &r, err, sizeof err) != 0) {
        fprintf(stderr, "vram plot: %s\n", err);
        return 1;
    }
    if (device >= r.ndevices) {
        fprintf(stderr, "vram plot: --device %d: %s has no events of GPU %d\n", device,
                input[0], device);
        recording_free(&r);
        return 1;
    }
    struct timeline t;
    if (timeline_build(&r, (int)width, device, &t) != 0) {
        fprintf(stderr, "vram plot: %s: out of memory\n", input[0]);
        recording_free(&r);
        return 1;
    }
    struct plot_options o = {.title = title ? title : input[0], .width = (int)width};

    struct page page = {&r, &t, &o, svg};
    int rc = 0;
    if (write_whole(output, write_page, &page, err, sizeof err) != 0) {
        fprintf(stderr, "vram plot: %s\n", err);
        rc = 1;
    }
    if (r.notes[0] && !job) /* a job's note says how to read its page, not a problem */
        fprintf(stderr, "vram plot: note: %s\n", r.notes);
    timeline_free(&t);
    recording_free(&r);
    return rc;
}
