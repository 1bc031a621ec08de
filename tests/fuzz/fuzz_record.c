/* libFuzzer: any bytes as a .vrec file, read as vram record and vram plot
 * read one (issue 22, item 16): the recording is loaded or refused with a
 * reason; its summary and its timeline are built at a few widths, and every
 * event falls in a column. Nothing else may happen (vram plot died of a
 * division by zero on events at 0 and at 2^64 - 1).
 *
 * Each input is read twice: as it is, and with the checksums of its blocks
 * made right, so that the fuzzer reaches what lies behind them. */
#include "../../src/record/reader.h"
#include "../../src/record/summary.h"
#include "../../src/record/timeline.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void read_back(int fd, const char *path, const uint8_t *data, size_t size)
{
    if (ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != (ssize_t)size)
        abort();
    struct recording r;
    char err[512];
    if (recording_load(path, &r, err, sizeof err) != 0) {
        if (!err[0])
            abort(); /* a refusal says why */
        return;
    }
    struct summary s;
    if (summary_build(&r, &s) == 0) {
        FILE *null = fopen("/dev/null", "w");
        if (null) {
            summary_print(&r, &s, "fuzz.vrec", null);
            summary_print_json(&r, &s, null);
            fclose(null);
        }
        summary_free(&s);
    }
    static const int widths[] = {1, 7, 640};
    for (size_t w = 0; w < sizeof widths / sizeof *widths; w++) {
        struct timeline t;
        if (timeline_build(&r, widths[w], -1, &t) != 0)
            continue;
        for (int c = 0; c < t.ncols; c++)
            if (timeline_column_time(&t, c) < t.start || timeline_column_time(&t, c) > t.end)
                abort();
        for (size_t i = 0; i < r.nevents; i++) {
            int c = timeline_column_of(&t, r.events[i].time);
            if (c < 0 || c >= t.ncols)
                abort();
        }
        timeline_free(&t);
    }
    recording_free(&r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int fd = -1;
    static char path[64];
    if (fd < 0) {
        fd = memfd_create("fuzz.vrec", MFD_CLOEXEC);
        if (fd < 0)
            abort();
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    }
    read_back(fd, path, data, size);
    uint8_t *fixed = malloc(size + 1);
    if (!fixed)
        abort();
    memcpy(fixed, data, size);
    size_t off = sizeof(struct record_file_header);
    while (off + sizeof(struct record_block_header) <= size) {
        struct record_block_header b;
        memcpy(&b, fixed + off, sizeof b);
        if (b.magic != RECORD_BLOCK_MAGIC || b.length > size - off - sizeof b)
            break;
        b.checksum = record_checksum(fixed + off + sizeof b, b.length);
        memcpy(fixed + off, &b, sizeof b);
        off += sizeof b + b.length;
    }
    if (memcmp(fixed, data, size) != 0)
        read_back(fd, path, fixed, size);
    free(fixed);
    return 0;
}
