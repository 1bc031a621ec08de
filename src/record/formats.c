#include "formats.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const struct {
    const char *name, *extension;
    enum recording_format format;
} formats[] = {
    {"vrec", ".vrec", FORMAT_VREC},
    {"csv", ".csv", FORMAT_CSV},
    {"json", ".json", FORMAT_TRACE},
};

const char *recording_format_name(enum recording_format f)
{
    for (size_t i = 0; i < sizeof formats / sizeof *formats; i++)
        if (formats[i].format == f)
            return formats[i].name;
    return "?";
}

int recording_format_of(const char *path, const char *forced, enum recording_format *f,
                        char *err, size_t n)
{
    if (forced) {
        for (size_t i = 0; i < sizeof formats / sizeof *formats; i++)
            if (strcmp(forced, formats[i].name) == 0) {
                *f = formats[i].format;
                return 0;
            }
        snprintf(err, n, "--format \"%s\": unknown format; accepted: " RECORDING_FORMATS, forced);
        return -1;
    }
    const char *dot = strrchr(path, '.');
    if (dot && !strchr(dot, '/'))
        for (size_t i = 0; i < sizeof formats / sizeof *formats; i++)
            if (strcmp(dot, formats[i].extension) == 0) {
                *f = formats[i].format;
                return 0;
            }
    snprintf(err, n, "\"%s\": the extension does not say the format; name the file with one of "
             "the extensions or give --format: " RECORDING_FORMATS, path);
    return -1;
}

void json_string(FILE *out, const char *s)
{
    fputc('"', out);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(out, "\\%c", *p);
        else if (*p < 0x20 || *p == '<' || *p == '>' || *p == '&') /* also safe in HTML */
            fprintf(out, "\\u%04x", *p);
        else if (*p >= 0x7f) /* may not be UTF-8: never make the file invalid */
            fputc('?', out);
        else
            fputc(*p, out);
    }
    fputc('"', out);
}

/* Events of one image, in time order, in blocks of up to this many. */
#define VREC_BLOCK_EVENTS 4096

int write_vrec(const struct recording *r, int device, FILE *out)
{
    if (fflush(out) != 0)
        return -1;
    int fd = fileno(out);
    if (record_write_file_header(fd) != 0)
        return -1;
    struct record_event *block = malloc(VREC_BLOCK_EVENTS * sizeof *block);
    if (!block)
        return -1;
    int rc = 0;
    for (size_t im = 0; im < r->nimages && rc == 0; im++) {
        const struct recording_image *image = &r->images[im];
        if (image->has_info)
            rc = record_write_block(fd, RECORD_BLOCK_PROCESS, image->info.pid, image->id,
                                    &image->info, sizeof image->info);
        size_t k = 0;
        for (size_t i = 0; i <= r->nevents && rc == 0; i++) {
            if (i < r->nevents) {
                const struct record_event *e = &r->events[i];
                if (r->image_of[i] != im ||
                    (device >= 0 && e->device != RECORD_NO_DEVICE && e->device != device))
                    continue;
                block[k++] = *e;
            }
            if (k && (k == VREC_BLOCK_EVENTS || i == r->nevents)) {
                rc = record_write_block(fd, RECORD_BLOCK_EVENTS, image->info.pid, image->id,
                                        block, (uint32_t)(k * sizeof *block));
                k = 0;
            }
        }
    }
    free(block);
    return rc;
}

int recording_write(const struct recording *r, enum recording_format f, int device, FILE *out,
                    char *err, size_t n)
{
    int rc;
    switch (f) {
    case FORMAT_VREC: rc = write_vrec(r, device, out); break;
    case FORMAT_CSV: rc = write_rmm_csv(r, device, out); break;
    default: rc = write_trace_json(r, device, out); break;
    }
    if (fflush(out) != 0 || ferror(out))
        rc = -1;
    if (rc != 0)
        snprintf(err, n, "writing the %s form: %s", recording_format_name(f),
                 errno ? strerror(errno) : "failed");
    return rc;
}

int recording_convert(const char *in, const char *out, enum recording_format f, int device,
                      char *notes, size_t notes_len, char *err, size_t n)
{
    struct recording r;
    if (recording_load(in, &r, err, n) != 0)
        return -1;
    if (notes)
        snprintf(notes, notes_len, "%s", r.notes);
    if (device >= r.ndevices && r.ndevices) {
        snprintf(err, n, "--device %d: %s has events of devices 0 to %d only", device, in,
                 r.ndevices - 1);
        recording_free(&r);
        return -1;
    }
    if (strcmp(out, "-") == 0) {
        char why[256];
        int rc = recording_write(&r, f, device, stdout, why, sizeof why);
        if (rc != 0)
            snprintf(err, n, "standard output: %s", why);
        recording_free(&r);
        return rc;
    }
    /* Whole or not at all: a temporary file beside OUT, renamed over it. */
    char *tmp = NULL;
    if (asprintf(&tmp, "%s.XXXXXX", out) < 0) {
        recording_free(&r);
        snprintf(err, n, "out of memory");
        return -1;
    }
    int fd = mkstemp(tmp);
    FILE *fp = fd >= 0 ? fdopen(fd, "w") : NULL;
    int rc = -1;
    if (!fp) {
        snprintf(err, n, "%s: cannot create it: %s", out, strerror(errno));
        if (fd >= 0) {
            close(fd);
            unlink(tmp);
        }
    } else {
        char why[256];
        fchmod(fd, 0644 & ~umask(umask(0)));
        rc = recording_write(&r, f, device, fp, why, sizeof why);
        if (fclose(fp) != 0 && rc == 0) {
            rc = -1;
            snprintf(why, sizeof why, "%s", strerror(errno));
        }
        if (rc == 0 && rename(tmp, out) != 0) {
            rc = -1;
            snprintf(why, sizeof why, "%s", strerror(errno));
        }
        if (rc != 0) {
            snprintf(err, n, "%s: %s", out, why);
            unlink(tmp);
        }
    }
    free(tmp);
    recording_free(&r);
    return rc;
}

int recording_prepare(const char *out, char *dir, size_t dir_len, char *err, size_t n)
{
    if ((size_t)snprintf(dir, dir_len, "%s.recording-XXXXXX", out) >= dir_len) {
        snprintf(err, n, "\"%s\": the path is too long", out);
        return -1;
    }
    if (!mkdtemp(dir)) { /* mkdtemp makes it 0700: no other user's files in it */
        snprintf(err, n, "cannot make a directory beside \"%s\" for the recording: %s", out,
                 strerror(errno));
        return -1;
    }
    return 0;
}

/* Removes the recorder's directory: its .vrec files, then itself. */
static int remove_directory(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    struct dirent *de;
    int rc = 0;
    while ((de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        char *p;
        if (asprintf(&p, "%s/%s", dir, de->d_name) < 0)
            return -1;
        if (unlink(p) != 0)
            rc = -1;
        free(p);
    }
    closedir(d);
    return rmdir(dir) == 0 ? rc : -1;
}

int recording_finish(const char *dir, const char *out, enum recording_format f, char *notes,
                     size_t notes_len, char *err, size_t n)
{
    /* No recorder wrote anything (the command touched no GPU): say so with
     * a recording of no events, in the format asked for. */
    bool empty = true;
    DIR *d = opendir(dir);
    if (!d) {
        snprintf(err, n, "%s: %s", dir, strerror(errno));
        return -1;
    }
    struct dirent *de;
    while (empty && (de = readdir(d)) != NULL) {
        size_t len = strlen(de->d_name);
        empty = !(len > 5 && strcmp(de->d_name + len - 5, ".vrec") == 0);
    }
    closedir(d);
    int rc;
    if (empty) {
        char *path = NULL;
        FILE *fp = NULL;
        rc = -1;
        if (asprintf(&path, "%s/empty.vrec", dir) >= 0 && (fp = fopen(path, "w")) != NULL &&
            record_write_file_header(fileno(fp)) == 0)
            rc = 0;
        if (fp)
            fclose(fp);
        free(path);
        if (rc != 0) {
            snprintf(err, n, "%s: %s", dir, strerror(errno));
            return -1;
        }
    }
    char why[1024];
    rc = recording_convert(dir, out, f, -1, notes, notes_len, why, sizeof why);
    if (rc != 0) {
        snprintf(err, n, "%s; the events are kept in %s (vram record convert %s FILE writes them "
                 "out)", why, dir, dir);
        return -1;
    }
    if (remove_directory(dir) != 0) {
        snprintf(err, n, "%s is written, but %s could not be removed: %s", out, dir,
                 strerror(errno));
        return -1;
    }
    return 0;
}
