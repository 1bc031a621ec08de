/* vram record: what to do with a recording of GPU memory events (made by
 * `vram run --record FILE`): convert it to another form, or summarize it. */
#include "../src/record/formats.h"
#include "../src/record/summary.h"
#include "cli.h"

#include <stdio.h>
#include <string.h>

static void record_usage(FILE *out)
{
    fprintf(out,
            "usage: vram record convert IN OUT [--format FORMAT] [--device N]\n"
            "       vram record info FILE [--json]\n"
            "\n"
            "A recording holds every GPU memory event of a command's processes: allocations\n"
            "and frees of each family (plain, pitched, managed, pool reservations, VMM,\n"
            "arrays, graph memory), budgets, refusals, contexts, exits and NVML's readings,\n"
            "each with its time, process, thread, device, stream, address and size.\n"
            "vram run --record FILE makes one; vram plot draws one.\n"
            "\n"
            "  convert IN OUT   writes the recording IN (a .vrec file, or the directory a run\n"
            "                   records into) as OUT, in the form OUT's extension names:\n"
            "                   .vrec  vram's own (what vram plot reads fastest)\n"
            "                   .csv   RMM's allocation log (Thread,Time,Action,Pointer,Size,\n"
            "                          Stream), for vram-replay and RMM's REPLAY_BENCHMARK\n"
            "                   .json  Chrome/Perfetto trace events: bytes in use per device\n"
            "                          and family, per process, the budget, NVML's\n"
            "                          figure, refusals\n"
            "                   (OUT \"-\": standard output; give --format)\n"
            "  info FILE        the recording's figures: processes, and per GPU the peak and\n"
            "                   when, the budget, NVML's peak (where NVML was read), each\n"
            "                   family's peak, refusals\n"
            "\n"
            "  --format FORMAT  vrec, csv or json, whatever OUT is called\n"
            "  --device N       only GPU N's events (RMM's log is one device's)\n"
            "  --json           info as one JSON object, for scripts\n");
}

static int convert(int argc, char **argv)
{
    const char *format = NULL, *device_s = NULL, *help = NULL;
    const struct cli_option table[] = {
        {"--format", CLI_VALUE, &format}, {"--device", CLI_VALUE, &device_s},
        {"--help", CLI_FLAG, &help},      {"-h", CLI_FLAG, &help},
        {NULL, 0, NULL},
    };
    char *ops[2];
    int n = cli_parse_operands("record", table, argc, argv, 3, ops, 2);
    if (n < 0)
        return 2;
    if (help) {
        record_usage(stdout);
        return 0;
    }
    if (n != 2)
        return cli_usage_error("record", "convert takes IN and OUT (given %d of them); vram "
                               "record --help says more", n);
    int device = -1;
    if (cli_parse_device("record", device_s, &device) != 0)
        return 2;
    if (strcmp(ops[1], "-") == 0 && !format)
        return cli_usage_error("record", "OUT \"-\" (standard output) has no extension: give "
                               "--format vrec, csv or json");
    enum recording_format f;
    char err[1024], notes[1024];
    if (recording_format_of(ops[1], format, &f, err, sizeof err) != 0)
        return cli_usage_error("record", "%s", err);
    if (recording_convert(ops[0], ops[1], f, device, notes, sizeof notes, err, sizeof err) != 0) {
        fprintf(stderr, "vram record: %s\n", err);
        return 1;
    }
    if (notes[0])
        fprintf(stderr, "vram record: note: %s\n", notes);
    return 0;
}

static int info(int argc, char **argv)
{
    const char *json = NULL, *help = NULL;
    const struct cli_option table[] = {
        {"--json", CLI_FLAG, &json}, {"--help", CLI_FLAG, &help},
        {"-h", CLI_FLAG, &help},     {NULL, 0, NULL},
    };
    char *ops[1];
    int n = cli_parse_operands("record", table, argc, argv, 3, ops, 1);
    if (n < 0)
        return 2;
    if (help) {
        record_usage(stdout);
        return 0;
    }
    if (n != 1)
        return cli_usage_error("record", "info takes one FILE; vram record --help says more");
    struct recording r;
    char err[1024];
    if (recording_load(ops[0], &r, err, sizeof err) != 0) {
        fprintf(stderr, "vram record: %s\n", err);
        return 1;
    }
    struct summary s;
    if (summary_build(&r, &s) != 0) {
        fprintf(stderr, "vram record: %s: out of memory\n", ops[0]);
        recording_free(&r);
        return 1;
    }
    if (json)
        summary_print_json(&r, &s, stdout);
    else
        summary_print(&r, &s, ops[0], stdout);
    summary_free(&s);
    recording_free(&r);
    return 0;
}

int cmd_record(int argc, char **argv)
{
    if (argc < 3) {
        record_usage(stderr);
        return 2;
    }
    const char *sub = argv[2];
    if (strcmp(sub, "--help") == 0 || strcmp(sub, "-h") == 0 || strcmp(sub, "help") == 0) {
        record_usage(stdout);
        return 0;
    }
    if (strcmp(sub, "convert") == 0)
        return convert(argc, argv);
    if (strcmp(sub, "info") == 0)
        return info(argc, argv);
    if (sub[0] == '-')
        return cli_usage_error("record", "unknown option \"%s\"; vram record --help lists the "
                               "options", sub);
    return cli_usage_error("record", "unknown command \"%s\"; expected convert or info (vram "
                           "record --help says more)", sub);
}
