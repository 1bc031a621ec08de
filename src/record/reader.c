#include "reader.h"

#include "../util/addrmap.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

struct loader {
    struct recording *r;
    struct addrmap image_index; /* image id -> index + 1 */
    size_t cap_images;
};

/* The big arrays (a million events are 48 MB) come straight from mmap
 * with huge pages where the kernel allows: on a virtual machine a page
 * fault costs microseconds, and a 4 KiB page at a time they would be most
 * of the time spent loading. */
static void *big_alloc(size_t bytes)
{
    void *p = mmap(NULL, bytes ? bytes : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                   -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    madvise(p, bytes ? bytes : 1, MADV_HUGEPAGE);
    return p;
}

static void big_free(void *p, size_t bytes)
{
    if (p)
        munmap(p, bytes ? bytes : 1);
}

static void note(struct recording *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(struct recording *r, const char *fmt, ...)
{
    size_t len = strlen(r->notes);
    if (len + 2 >= sizeof r->notes)
        return;
    if (len)
        r->notes[len++] = '\n';
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->notes + len, sizeof r->notes - len, fmt, ap);
    va_end(ap);
}

static long image_for(struct loader *L, uint64_t id, uint32_t pid)
{
    uint64_t v;
    if (addrmap_get(&L->image_index, id, &v))
        return (long)v - 1;
    struct recording *r = L->r;
    if (r->nimages == L->cap_images) {
        size_t cap = L->cap_images ? L->cap_images * 2 : 16;
        struct recording_image *im = realloc(r->images, cap * sizeof *im);
        if (!im)
            return -1;
        r->images = im;
        L->cap_images = cap;
    }
    r->images[r->nimages] = (struct recording_image){.id = id, .info = {.pid = pid}};
    if (addrmap_put(&L->image_index, id, r->nimages + 1) != 0)
        return -1;
    return (long)r->nimages++;
}

static int add_events(struct loader *L, const struct record_event *e, size_t n, uint32_t image)
{
    struct recording *r = L->r;
    if (r->nevents + n > r->capacity) /* cannot be: the files' sizes bound it */
        return -1;
    memcpy(r->events + r->nevents, e, n * sizeof *e);
    for (size_t i = 0; i < n; i++)
        r->image_of[r->nevents + i] = image;
    r->nevents += n;
    r->images[image].events += n;
    return 0;
}

/* The file's bytes, mapped (and read ahead) rather than copied. */
static int map_file(const char *path, unsigned char **data, size_t *size, char *err, size_t n)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        snprintf(err, n, "%s: %s", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    *size = (size_t)st.st_size;
    *data = NULL;
    if (*size) {
        void *p = mmap(NULL, *size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
        if (p == MAP_FAILED) {
            snprintf(err, n, "%s: %s", path, strerror(errno));
            close(fd);
            return -1;
        }
        *data = p;
    }
    close(fd);
    return 0;
}

/* Reads one file's blocks. A damaged block ends the file (noted). */
static int load_file(struct loader *L, const char *path, char *err, size_t n)
{
    unsigned char *data;
    size_t size;
    if (map_file(path, &data, &size, err, n) != 0)
        return -1;
    const struct record_file_header *h = (const void *)data;
    int rc = -1;
    if (size < sizeof *h || memcmp(h->magic, RECORD_FILE_MAGIC, 8) != 0) {
        snprintf(err, n, "%s: not a vram recording (it does not begin with vram's header; "
                 "vram records and converts .vrec files and recording directories)", path);
        goto out;
    }
    if (h->byte_order != 0x01020304u || h->version < RECORD_VERSION_OLDEST ||
        h->version > RECORD_VERSION || h->event_size != sizeof(struct record_event)) {
        snprintf(err, n, "%s: a vram recording of version %u (events of %u bytes%s); this vram "
                 "reads versions %d to %d", path, h->version, h->event_size,
                 h->byte_order != 0x01020304u ? ", other byte order" : "", RECORD_VERSION_OLDEST,
                 RECORD_VERSION);
        goto out;
    }
    size_t off = sizeof *h;
    while (off < size) {
        struct record_block_header b;
        const char *bad = NULL;
        if (size - off < sizeof b) {
            bad = "cut short";
        } else {
            memcpy(&b, data + off, sizeof b);
            if (b.magic != RECORD_BLOCK_MAGIC || b.length > RECORD_MAX_BLOCK ||
                (b.kind != RECORD_BLOCK_PROCESS && b.kind != RECORD_BLOCK_EVENTS) || !b.image)
                bad = "damaged";
            else if (size - off - sizeof b < b.length)
                bad = "cut short";
            else if (record_checksum(data + off + sizeof b, b.length) != b.checksum ||
                     (b.kind == RECORD_BLOCK_EVENTS && b.length % sizeof(struct record_event)) ||
                     (b.kind == RECORD_BLOCK_PROCESS && b.length != sizeof(struct record_process)))
                bad = "damaged";
        }
        if (bad) {
            note(L->r, "%s: the last %zu bytes (from byte %zu) are a block %s, as a process killed "
                 "while writing or a full disk leaves; the events before them are read", path,
                 size - off, off, bad);
            break;
        }
        const unsigned char *payload = data + off + sizeof b;
        long im = image_for(L, b.image, b.pid);
        if (im < 0)
            goto oom;
        if (b.kind == RECORD_BLOCK_PROCESS) {
            memcpy(&L->r->images[im].info, payload, sizeof(struct record_process));
            L->r->images[im].info.command[sizeof L->r->images[im].info.command - 1] = 0;
            L->r->images[im].has_info = true;
        } else if (add_events(L, (const void *)payload, b.length / sizeof(struct record_event),
                              (uint32_t)im) != 0) {
            goto oom;
        }
        off += sizeof b + b.length;
    }
    rc = 0;
    goto out;
oom:
    snprintf(err, n, "%s: out of memory", path);
out:
    if (data)
        munmap(data, size);
    return rc;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The recording's files: `path` itself, or the .vrec files of the
 * directory by name (so the same directory always loads the same way). */
static int list_files(const char *path, bool directory, char ***names, size_t *count, char *err,
                      size_t n)
{
    *names = NULL;
    *count = 0;
    if (!directory) {
        *names = malloc(sizeof **names);
        if (!*names || !(**names = strdup(path)))
            goto oom;
        *count = 1;
        return 0;
    }
    DIR *d = opendir(path);
    if (!d) {
        snprintf(err, n, "%s: %s", path, strerror(errno));
        return -1;
    }
    size_t cap = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        size_t len = strlen(de->d_name);
        if (len < 6 || strcmp(de->d_name + len - 5, ".vrec") != 0)
            continue;
        if (*count == cap) {
            cap = cap ? cap * 2 : 16;
            char **more = realloc(*names, cap * sizeof *more);
            if (!more)
                break;
            *names = more;
        }
        if (asprintf(&(*names)[*count], "%s/%s", path, de->d_name) < 0)
            break;
        (*count)++;
    }
    bool stopped = de != NULL;
    closedir(d);
    if (stopped)
        goto oom;
    if (*count == 0) {
        snprintf(err, n, "%s: a directory without recordings (no .vrec files)", path);
        return -1;
    }
    qsort(*names, *count, sizeof **names, by_name);
    return 0;
oom:
    snprintf(err, n, "%s: out of memory", path);
    return -1;
}

/* Stable LSD radix sort of the events by time, 16 bits a pass, only over
 * the bits the times use. */
static int sort_by_time(struct recording *r)
{
    size_t n = r->nevents;
    bool sorted = true;
    for (size_t i = 1; i < n && sorted; i++)
        sorted = r->events[i - 1].time <= r->events[i].time;
    if (sorted)
        return 0;
    struct key {
        uint64_t t;
        uint32_t i;
    } *a = big_alloc(n * sizeof *a), *b = big_alloc(n * sizeof *b);
    size_t *counts = malloc(65536 * sizeof *counts);
    struct record_event *ev = big_alloc(r->capacity * sizeof *ev);
    uint32_t *im = big_alloc(r->capacity * sizeof *im);
    int rc = -1;
    if (!a || !b || !counts || !ev || !im)
        goto out;
    uint64_t span = 0;
    for (size_t i = 0; i < n; i++) {
        a[i] = (struct key){r->events[i].time - r->start, (uint32_t)i};
        if (a[i].t > span)
            span = a[i].t;
    }
    for (unsigned shift = 0; shift < 64 && (span >> shift); shift += 16) {
        memset(counts, 0, 65536 * sizeof *counts);
        for (size_t i = 0; i < n; i++)
            counts[(a[i].t >> shift) & 0xffff]++;
        size_t sum = 0;
        for (size_t d = 0; d < 65536; d++) {
            size_t c = counts[d];
            counts[d] = sum;
            sum += c;
        }
        for (size_t i = 0; i < n; i++)
            b[counts[(a[i].t >> shift) & 0xffff]++] = a[i];
        struct key *t = a;
        a = b;
        b = t;
    }
    for (size_t i = 0; i < n; i++) {
        ev[i] = r->events[a[i].i];
        im[i] = r->image_of[a[i].i];
    }
    big_free(r->events, r->capacity * sizeof *r->events);
    big_free(r->image_of, r->capacity * sizeof *r->image_of);
    r->events = ev;
    r->image_of = im;
    ev = NULL;
    im = NULL;
    rc = 0;
out:
    big_free(a, n * sizeof *a);
    big_free(b, n * sizeof *b);
    free(counts);
    big_free(ev, r->capacity * sizeof *ev);
    big_free(im, r->capacity * sizeof *im);
    return rc;
}

/* An image with no exit record that a later image of its pid follows
 * ended by then: it exec'd (the interposer does not see exec), or it died
 * and the pid was given again. Images in the order of their first event. */
static int by_pid_then_start(const void *a, const void *b)
{
    const uint64_t *x = a, *y = b; /* pid << 32 | image, first event */
    return x[0] >> 32 != y[0] >> 32 ? (x[0] >> 32 > y[0] >> 32 ? 1 : -1)
           : x[1] != y[1]           ? (x[1] > y[1] ? 1 : -1)
                                    : 0;
}

static int find_replaced(struct recording *r)
{
    for (size_t i = 0; i < r->nimages; i++) {
        r->images[i].replaces = RECORDING_NONE;
        r->images[i].replaced = false;
    }
    uint64_t (*order)[2] = malloc(r->nimages * sizeof *order + 1);
    if (!order)
        return -1;
    for (size_t i = 0; i < r->nimages; i++) {
        order[i][0] = (uint64_t)r->images[i].info.pid << 32 | i;
        order[i][1] = UINT64_MAX; /* images without events sort last */
    }
    for (size_t i = r->nevents; i-- > 0;)
        order[r->image_of[i]][1] = i;
    qsort(order, r->nimages, sizeof *order, by_pid_then_start);
    for (size_t k = 1; k < r->nimages; k++) {
        uint32_t was = (uint32_t)order[k - 1][0], now = (uint32_t)order[k][0];
        if (order[k - 1][0] >> 32 == order[k][0] >> 32 && order[k][1] != UINT64_MAX) {
            r->images[now].replaces = was;
            r->images[was].replaced = true;
        }
    }
    free(order);
    return 0;
}

void recording_image_name(const struct recording_image *im, char *out, size_t n)
{
    if (im->info.command[0])
        snprintf(out, n, "%u %s", im->info.pid, im->info.command);
    else
        snprintf(out, n, "%u", im->info.pid);
}

/* What every recording gets once its events are in, loaded or built:
 * its span, devices and exits, its wall clock, the events in time order
 * and the images that replaced others. 0, or -1 if memory ran out. */
static int settle(struct recording *r)
{
    r->start = UINT64_MAX;
    r->end = 0;
    for (size_t i = 0; i < r->nevents; i++) {
        const struct record_event *e = &r->events[i];
        if (e->time < r->start)
            r->start = e->time;
        if (e->time > r->end)
            r->end = e->time;
        if (e->device != RECORD_NO_DEVICE && e->device + 1 > r->ndevices)
            r->ndevices = e->device + 1;
        if (e->action == RECORD_EXIT)
            r->images[r->image_of[i]].exited = true;
    }
    if (!r->nevents)
        r->start = 0;
    for (size_t i = 0; i < r->nimages; i++)
        if (r->images[i].has_info) {
            r->realtime_offset = (int64_t)(r->images[i].info.start_realtime -
                                           r->images[i].info.start_monotonic);
            break;
        }
    return sort_by_time(r) == 0 && find_replaced(r) == 0 ? 0 : -1;
}

int recording_load(const char *path, struct recording *r, char *err, size_t n)
{
    memset(r, 0, sizeof *r);
    struct loader L = {.r = r};
    addrmap_init(&L.image_index);
    struct stat st;
    char **names = NULL;
    size_t count = 0;
    int rc = -1;
    if (stat(path, &st) != 0)
        snprintf(err, n, "%s: %s", path, strerror(errno));
    else
        rc = list_files(path, S_ISDIR(st.st_mode), &names, &count, err, n);
    /* The events cannot take more room than the files do. */
    size_t bytes = 0;
    for (size_t i = 0; rc == 0 && i < count; i++)
        if (stat(names[i], &st) == 0)
            bytes += (size_t)st.st_size;
    if (rc == 0) {
        r->capacity = bytes / sizeof(struct record_event) + 1;
        r->events = big_alloc(r->capacity * sizeof *r->events);
        r->image_of = big_alloc(r->capacity * sizeof *r->image_of);
        if (!r->events || !r->image_of) {
            snprintf(err, n, "%s: out of memory", path);
            rc = -1;
        }
    }
    for (size_t i = 0; i < count; i++) {
        if (rc == 0)
            rc = load_file(&L, names[i], err, n);
        free(names[i]);
    }
    free(names);
    addrmap_destroy(&L.image_index);
    if (rc != 0) {
        recording_free(r);
        return -1;
    }
    if (settle(r) != 0) {
        snprintf(err, n, "%s: out of memory", path);
        recording_free(r);
        return -1;
    }
    size_t unexited = 0, replaced = 0;
    for (size_t i = 0; i < r->nimages; i++)
        if (!r->images[i].exited && r->images[i].events) {
            unexited += !r->images[i].replaced;
            replaced += r->images[i].replaced;
        }
    if (replaced)
        note(r, "%zu process image%s left no exit record but %s followed by another of %s pid "
             "(exec): what %s held is shown freed when that one began, and the events %s "
             "recorded last, not yet written then, may be missing", replaced,
             replaced == 1 ? "" : "s", replaced == 1 ? "was" : "were",
             replaced == 1 ? "its" : "their", replaced == 1 ? "it" : "they",
             replaced == 1 ? "it" : "they");
    if (unexited)
        note(r, "%zu process%s left no exit record (killed, or still running): what %s held is "
             "shown held to the end, and the events %s recorded last, not yet written then, may "
             "be missing", unexited, unexited == 1 ? "" : "es", unexited == 1 ? "it" : "they",
             unexited == 1 ? "it" : "they");
    return 0;
}

/* ------------------------------------------------------- built in memory */

void recording_build_begin(struct recording *r) { memset(r, 0, sizeof *r); }

long recording_build_image(struct recording *r, const struct record_process *info)
{
    /* Few images: grown one at a time. */
    struct recording_image *im = realloc(r->images, (r->nimages + 1) * sizeof *im);
    if (!im)
        return -1;
    r->images = im;
    r->images[r->nimages] = (struct recording_image){.id = r->nimages + 1, .info = *info,
                                                     .has_info = true};
    return (long)r->nimages++;
}

int recording_build_event(struct recording *r, uint32_t image, const struct record_event *e)
{
    if (image >= r->nimages)
        return -1;
    if (r->nevents == r->capacity) {
        size_t cap = r->capacity ? r->capacity * 2 : 4096;
        struct record_event *ev = big_alloc(cap * sizeof *ev);
        uint32_t *im = big_alloc(cap * sizeof *im);
        if (!ev || !im) {
            big_free(ev, cap * sizeof *ev);
            big_free(im, cap * sizeof *im);
            return -1;
        }
        if (r->nevents) {
            memcpy(ev, r->events, r->nevents * sizeof *ev);
            memcpy(im, r->image_of, r->nevents * sizeof *im);
        }
        big_free(r->events, r->capacity * sizeof *r->events);
        big_free(r->image_of, r->capacity * sizeof *r->image_of);
        r->events = ev;
        r->image_of = im;
        r->capacity = cap;
    }
    r->events[r->nevents] = *e;
    r->image_of[r->nevents++] = image;
    r->images[image].events++;
    return 0;
}

int recording_build_end(struct recording *r, const char *notes)
{
    if (notes)
        note(r, "%s", notes);
    return settle(r);
}

void recording_free(struct recording *r)
{
    big_free(r->events, r->capacity * sizeof *r->events);
    big_free(r->image_of, r->capacity * sizeof *r->image_of);
    free(r->images);
    memset(r, 0, sizeof *r);
}
