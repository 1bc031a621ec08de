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

int write_whole(const char *path, write_fn *fn, void *arg, char *err, size_t n)
{
    if (strcmp(path, "-") == 0) {
        int rc = fn(stdout, arg);
        if (fflush(stdout) != 0 || ferror(stdout))
            rc = -1;
        if (rc != 0)
            snprintf(err, n, "standard output: %s", errno ? strerror(errno) : "write failed");
        return rc;
    }
    char *tmp = NULL;
    int fd = -1;
    FILE *fp = NULL;
    if (asprintf(&tmp, "%s.XXXXXX", path) >= 0 && (fd = mkstemp(tmp)) >= 0)
        fp = fdopen(fd, "w");
    if (!fp) {
        snprintf(err, n, "%s: cannot create it: %s", path, strerror(errno));
        if (fd >= 0) {
            close(fd);
            unlink(tmp);
        }
        free(tmp);
        return -1;
    }
    /* mkstemp made it 0600; the file is an ordinary one of its user's. */
    mode_t mask = umask(0);
    umask(mask);
    fchmod(fd, 0666 & ~mask);
    errno = 0;
    int rc = fn(fp, arg);
    if (fflush(fp) != 0 || ferror(fp))
        rc = -1;
    int saved = errno;
    if (fclose(fp) != 0 && rc == 0) {
        rc = -1;
        saved = errno;
    }
    if (rc == 0 && rename(tmp, path) != 0) {
        rc = -1;
        saved = errno;
    }
    if (rc != 0) {
        snprintf(err, n, "%s: %s", path, saved ? strerror(saved) : "write failed");
        unlink(tmp);
    }
    free(tmp);
    return rc;
}

struct conversion {
    const struct recording *r;
    enum recording_format f;
    int device;
};

static int write_conversion(FILE *out, void *arg)
{
    const struct conversion *c = arg;
    char why[256];
    return recording_write(c->r, c->f, c->device, out, why, sizeof why);
}

int recording_convert(const char *in, const char *out, enum recording_format f, int device,
                      char *notes, size_t notes_len, char *err, size_t n)
{
    struct recording r;
    if (recording_load(in, &r, err, n) != 0)
        return -1;
    if (notes)
        snprintf(notes, notes_len, "%s", r.notes);
    int rc = -1;
    if (device >= r.ndevices && r.ndevices) {
        snprintf(err, n, "--device %d: %s has events of devices 0 to %d only", device, in,
                 r.ndevices - 1);
    } else {
        struct conversion c = {&r, f, device};
        rc = write_whole(out, write_conversion, &c, err, n);
    }
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
