#include "recorder.h"

#include "../util/report.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

atomic_bool recorder_on;

/* A thread's buffer. The owner writes events[count] and then publishes it
 * (a release store of count); a write round reads only published events,
 * and `flushed` (under R.mu) says how many are in the file. */
struct buffer {
    struct buffer *next;
    _Atomic uint32_t count;
    uint32_t flushed;
    struct record_event events[RECORDER_BUFFER_EVENTS];
};

/* A recording thread. `current` changes only under R.mu. */
struct thread_state {
    struct thread_state *next;
    struct buffer *current;
    uint32_t tid;
};

/* A range of a buffer a write round is about to write. */
struct pending {
    struct buffer *b;
    uint32_t from, to;
    bool recycle; /* a full (or abandoned) buffer: back to the spares after */
};

#define SPARES 4

/* Fork. A forked child is one thread, and a lock another thread of the
 * parent held at the fork stays held in it for ever: malloc's in a
 * sanitizer's allocator, a sanitizer's thread registry. So the recorder's
 * memory comes from mmap (a system call, no lock), never malloc; its own
 * locks are held across fork() (pthread_atfork, registered before any
 * other handler of the interposer so that they are taken last: hooks
 * record while holding their own locks); and an image forked from a
 * recording process starts no thread and joins none. Its recording
 * threads write for it (`forked`): a full buffer at once, everything
 * buffered when a flush period has passed since the last write (checked at
 * each event), and at its end; a child killed while idle loses what it
 * recorded in its last flush period. */
static struct {
    pthread_mutex_t round; /* one write round at a time: the file, `pending`; before mu */
    pthread_mutex_t mu;    /* everything below but the file's figures */
    pthread_cond_t work, room;
    pthread_once_t once;
    pthread_key_t key;
    char dir[PATH_MAX - 64];
    char path[PATH_MAX];
    int fd;
    bool started, opened, failed, closing, writer_running, forked;
    pthread_t writer;
    uint64_t image;
    struct thread_state *threads;
    unsigned nthreads;
    struct buffer *queue, *queue_tail, *spares;
    unsigned queued, writing, nspares; /* writing: taken from the queue, not yet back */
    struct pending *pending;           /* under round */
    size_t pending_cap;
    uint64_t buffers, buffers_peak, written, blocks, waits;
    _Atomic uint64_t dropped;
    /* forked: when the recording threads next write what they buffered
     * (CLOCK_MONOTONIC ns); never, where the writer does. */
    _Atomic uint64_t flush_due;
} R = {.round = PTHREAD_MUTEX_INITIALIZER,
       .mu = PTHREAD_MUTEX_INITIALIZER,
       .once = PTHREAD_ONCE_INIT,
       .fd = -1,
       .flush_due = UINT64_MAX};

/* The default TLS model, not initial-exec: vram run dlopen()s the
 * interposer to check that it loads, and a dlopen()ed library whose
 * thread-locals are initial-exec must fit all of them (report.c's message
 * too) in glibc's small static TLS surplus, which they do not. */
static __thread struct thread_state *self;

static uint64_t now_ns(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Memory of the recorder's own: whole pages from the kernel (see Fork). */
static void *pages(size_t bytes)
{
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static void unpages(void *p, size_t bytes)
{
    if (p)
        munmap(p, bytes);
}

/* ------------------------------------------------------------ the file */

static void process_info(struct record_process *p)
{
    memset(p, 0, sizeof *p);
    p->pid = (uint32_t)getpid();
    p->ppid = (uint32_t)getppid();
    p->uid = (uint32_t)getuid();
    p->start_monotonic = now_ns(CLOCK_MONOTONIC);
    p->start_realtime = now_ns(CLOCK_REALTIME);
    int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t n = read(fd, p->command, sizeof p->command - 1);
        close(fd);
        for (ssize_t i = 0; i < n; i++)
            if (p->command[i] == 0)
                p->command[i] = ' ';
        while (n > 0 && p->command[n - 1] == ' ')
            p->command[--n] = 0;
    }
}

static void *writer_main(void *arg);

/* Creates this image's file and, unless it was forked, starts the writer;
 * under R.mu. */
static bool open_file(void)
{
    if (R.opened)
        return true;
    if (R.failed || R.closing)
        return false;
    struct record_process info;
    process_info(&info);
    if (getrandom(&R.image, sizeof R.image, GRND_NONBLOCK) != sizeof R.image || !R.image)
        R.image = info.start_monotonic ^ ((uint64_t)info.pid << 40) ^ 0x5bd1e995u;
    snprintf(R.path, sizeof R.path, "%s/%u-%016llx.vrec", R.dir, info.pid,
             (unsigned long long)R.image);
    R.fd = open(R.path, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0600);
    int saved = errno;
    if (R.fd < 0 || record_write_file_header(R.fd) != 0 ||
        record_write_block(R.fd, RECORD_BLOCK_PROCESS, info.pid, R.image, &info,
                           sizeof info) != 0) {
        saved = errno;
        goto fail;
    }
    if (R.forked) {
        atomic_store(&R.flush_due, now_ns(CLOCK_MONOTONIC) + RECORDER_FLUSH_MS * 1000000ull);
    } else {
        /* The writer takes no signals: they are the program's. */
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        int rc = pthread_create(&R.writer, NULL, writer_main, NULL);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (rc != 0) {
            saved = rc;
            goto fail;
        }
        R.writer_running = true;
    }
    R.opened = true;
    return true;
fail:
    if (R.fd >= 0)
        close(R.fd);
    R.fd = -1;
    R.failed = true;
    atomic_store(&recorder_on, false);
    vlog(LOG_ERROR, "cannot record GPU memory events into %s: %s; this process's events are "
                    "not recorded", R.path, strerror(saved));
    return false;
}

/* Writes the ranges; under R.round. */
static void write_pending(struct pending *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t count = p[i].to - p[i].from;
        if (!count)
            continue;
        if (R.fd >= 0 &&
            record_write_block(R.fd, RECORD_BLOCK_EVENTS, (uint32_t)getpid(), R.image,
                               &p[i].b->events[p[i].from],
                               count * (uint32_t)sizeof(struct record_event)) == 0) {
            R.written += count;
            R.blocks++;
        } else {
            atomic_fetch_add(&R.dropped, count);
        }
    }
}

/* Room in R.pending for n ranges; under R.round and R.mu. */
static bool pending_room(size_t n)
{
    if (n <= R.pending_cap)
        return true;
    size_t cap = R.pending_cap ? R.pending_cap : 4096 / sizeof *R.pending;
    while (cap < n)
        cap *= 2;
    struct pending *p = pages(cap * sizeof *p);
    if (!p)
        return false;
    unpages(R.pending, R.pending_cap * sizeof *R.pending);
    R.pending = p;
    R.pending_cap = cap;
    return true;
}

/* Into R.pending, what is to be written: queued buffers whole, and what
 * live threads published since the last write. Under R.round and R.mu;
 * the number of ranges. */
static size_t collect(void)
{
    if (!pending_room(R.queued + R.nthreads))
        return 0; /* no memory for the list now: the next round */
    struct pending *p = R.pending;
    size_t k = 0;
    for (struct buffer *b = R.queue; b; b = b->next) {
        uint32_t c = atomic_load_explicit(&b->count, memory_order_acquire);
        p[k++] = (struct pending){b, b->flushed, c, true};
        b->flushed = c;
    }
    R.queue = R.queue_tail = NULL;
    R.writing += R.queued;
    R.queued = 0;
    for (struct thread_state *t = R.threads; t; t = t->next) {
        struct buffer *b = t->current;
        if (!b)
            continue;
        uint32_t c = atomic_load_explicit(&b->count, memory_order_acquire);
        if (c > b->flushed) {
            p[k++] = (struct pending){b, b->flushed, c, false};
            b->flushed = c;
        }
    }
    return k;
}

static void drop_buffer(struct buffer *b)
{
    unpages(b, sizeof *b);
    R.buffers--;
}

/* A buffer no thread holds any more: a spare (SPARES at most), or back to
 * the kernel. */
static void retire(struct buffer *b)
{
    if (R.nspares < SPARES) {
        atomic_store_explicit(&b->count, 0, memory_order_relaxed);
        b->flushed = 0;
        b->next = R.spares;
        R.spares = b;
        R.nspares++;
    } else {
        drop_buffer(b);
    }
}

static void recycle(struct pending *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (p[i].recycle) {
            R.writing--;
            retire(p[i].b);
        }
    }
}

/* Writes what is pending, then `last` (if any). The caller holds R.round
 * (so that no round can come between recorder_stop()'s last one and the
 * end of the file), not R.mu; after the last round (`last`), none writes. */
static void write_round(void (*last)(void))
{
    pthread_mutex_lock(&R.mu);
    if (!R.opened || (R.closing && !last)) {
        pthread_mutex_unlock(&R.mu);
        return;
    }
    size_t n = collect();
    pthread_mutex_unlock(&R.mu);
    write_pending(R.pending, n);
    if (last)
        last();
    pthread_mutex_lock(&R.mu);
    recycle(R.pending, n);
    pthread_cond_broadcast(&R.room);
    if (R.forked && !R.closing)
        atomic_store(&R.flush_due, now_ns(CLOCK_MONOTONIC) + RECORDER_FLUSH_MS * 1000000ull);
    pthread_mutex_unlock(&R.mu);
}

/* A round by whoever calls, waiting for one under way. */
static void write_now(void)
{
    pthread_mutex_lock(&R.round);
    write_round(NULL);
    pthread_mutex_unlock(&R.round);
}

static void *writer_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&R.mu);
    while (!R.closing) {
        if (!R.queued) {
            struct timespec until;
            clock_gettime(CLOCK_MONOTONIC, &until);
            until.tv_nsec += RECORDER_FLUSH_MS * 1000000L;
            if (until.tv_nsec >= 1000000000L) {
                until.tv_sec++;
                until.tv_nsec -= 1000000000L;
            }
            pthread_cond_timedwait(&R.work, &R.mu, &until);
            if (R.closing)
                break;
        }
        pthread_mutex_unlock(&R.mu);
        write_now();
        pthread_mutex_lock(&R.mu);
    }
    pthread_mutex_unlock(&R.mu);
    return NULL;
}

/* ------------------------------------------------------------- buffers */

static struct buffer *new_buffer(void)
{
    struct buffer *b = R.spares;
    if (b) {
        R.spares = b->next;
        R.nspares--;
    } else {
        b = pages(sizeof *b);
        if (!b)
            return NULL;
        atomic_init(&b->count, 0);
        b->flushed = 0;
        if (++R.buffers > R.buffers_peak)
            R.buffers_peak = R.buffers;
    }
    b->next = NULL;
    return b;
}

static void enqueue(struct buffer *b)
{
    b->next = NULL;
    if (R.queue_tail)
        R.queue_tail->next = b;
    else
        R.queue = b;
    R.queue_tail = b;
    R.queued++;
    pthread_cond_signal(&R.work);
}

/* A recording thread's end: what it buffered goes to the writer (in a
 * forked image, to the file at once). */
static void thread_leave(void *arg)
{
    struct thread_state *t = arg;
    pthread_mutex_lock(&R.mu);
    for (struct thread_state **pp = &R.threads; *pp; pp = &(*pp)->next)
        if (*pp == t) {
            *pp = t->next;
            R.nthreads--;
            break;
        }
    bool handed = t->current && !R.closing;
    if (handed)
        enqueue(t->current);
    pthread_mutex_unlock(&R.mu);
    if (self == t)
        self = NULL;
    unpages(t, sizeof *t);
    if (handed && R.forked)
        write_now();
}

/* The first event of a thread, or one after its buffer could not be had:
 * registers the thread (and opens the file) and gives it a buffer. */
static struct buffer *slow_buffer(void)
{
    struct buffer *b = NULL;
    pthread_mutex_lock(&R.mu);
    if (open_file() && !R.closing) {
        struct thread_state *t = self;
        if (!t && (t = pages(sizeof *t)) != NULL) {
            t->tid = (uint32_t)gettid();
            t->next = R.threads;
            R.threads = t;
            R.nthreads++;
            self = t;
            pthread_setspecific(R.key, t);
        }
        if (t && !t->current)
            t->current = new_buffer();
        b = t ? t->current : NULL;
    }
    pthread_mutex_unlock(&R.mu);
    return b;
}

/* The thread's buffer is full: to the writer (in a forked image, to the
 * file at once), and a fresh one. */
static void hand_off(struct thread_state *t)
{
    pthread_mutex_lock(&R.mu);
    while (R.queued + R.writing >= RECORDER_QUEUE && !R.closing) {
        R.waits++;
        pthread_cond_wait(&R.room, &R.mu);
    }
    bool handed = !R.closing;
    if (handed) {
        enqueue(t->current);
        t->current = new_buffer();
    } else {
        /* The final flush may be reading it: leave it be. */
        t->current = NULL;
    }
    pthread_mutex_unlock(&R.mu);
    if (handed && R.forked)
        write_now();
}

/* A forked image's flush period is over: the thread writes, unless
 * another is writing already. */
static void flush_due(void)
{
    if (pthread_mutex_trylock(&R.round) != 0)
        return;
    write_round(NULL);
    pthread_mutex_unlock(&R.round);
}

void recorder_event(enum record_action action, enum record_family family, int dev,
                    uint64_t address, uint64_t bytes, uint64_t aux, uint64_t stream,
                    unsigned reason)
{
    struct thread_state *t = self;
    struct buffer *b = t ? t->current : NULL;
    if (!b) {
        if (!atomic_load(&recorder_on) || !(b = slow_buffer())) {
            atomic_fetch_add_explicit(&R.dropped, 1, memory_order_relaxed);
            return;
        }
        t = self;
    }
    uint32_t i = atomic_load_explicit(&b->count, memory_order_relaxed);
    struct record_event *e = &b->events[i];
    /* The next slot is most likely in another cache line, fetched ahead. */
    __builtin_prefetch(e + 1, 1);
    e->time = now_ns(CLOCK_MONOTONIC);
    e->address = address;
    e->bytes = bytes;
    e->aux = aux;
    e->stream = stream;
    e->thread = t->tid;
    e->device = dev >= 0 && dev < RECORD_NO_DEVICE ? (uint8_t)dev : RECORD_NO_DEVICE;
    e->family = (uint8_t)family;
    e->action = (uint8_t)action;
    e->reason = (uint8_t)reason;
    atomic_store_explicit(&b->count, i + 1, memory_order_release);
    if (i + 1 == RECORDER_BUFFER_EVENTS)
        hand_off(t);
    else if (e->time >= atomic_load_explicit(&R.flush_due, memory_order_relaxed))
        flush_due();
}

/* ---------------------------------------------------- process lifetime */

/* The writer waits on `work` with a deadline on the monotonic clock. */
static void init_conditions(void)
{
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(&R.work, &a);
    pthread_condattr_destroy(&a);
    pthread_cond_init(&R.room, NULL);
}

static void before_fork(void)
{
    pthread_mutex_lock(&R.round);
    pthread_mutex_lock(&R.mu);
}

static void after_fork_parent(void)
{
    pthread_mutex_unlock(&R.mu);
    pthread_mutex_unlock(&R.round);
}

/* The child is this one thread; what the others buffered, and what this
 * one had not yet written, are the parent's to write (no round was under
 * way: the fork waited for R.round, so every buffer is a thread's, queued
 * or spare). What was the parent's goes back to the kernel, all but a few
 * spares; a child that records starts a file of its own at its first
 * event, and writes it itself (R.forked). No allocator, no thread. */
static void after_fork_child(void)
{
    if (R.started)
        R.forked = true;
    struct buffer *all = R.queue;
    if (R.queue_tail)
        R.queue_tail->next = R.spares;
    else
        all = R.spares;
    for (struct thread_state *t = R.threads, *next; t; t = next) {
        next = t->next;
        if (t->current) {
            t->current->next = all;
            all = t->current;
            t->current = NULL;
        }
        if (t != self)
            unpages(t, sizeof *t);
    }
    R.threads = self;
    R.nthreads = self ? 1 : 0;
    if (self) {
        /* Its next event opens the child's file (slow_buffer). */
        self->next = NULL;
        self->tid = (uint32_t)gettid();
    }
    R.queue = R.queue_tail = R.spares = NULL;
    R.queued = R.writing = R.nspares = 0;
    for (struct buffer *b = all, *next; b; b = next) {
        next = b->next;
        retire(b);
    }
    R.buffers = R.buffers_peak = R.nspares;
    R.written = R.blocks = R.waits = 0;
    atomic_store(&R.dropped, 0);
    if (R.fd >= 0)
        close(R.fd);
    R.fd = -1;
    R.opened = R.writer_running = false;
    R.path[0] = 0;
    atomic_store(&R.flush_due, UINT64_MAX);
    init_conditions();
    pthread_mutex_unlock(&R.mu);
    pthread_mutex_unlock(&R.round);
}

/* Registered before the interposer's own handlers (whose constructors run
 * later), so that the recorder's locks, taken inside theirs by the hooks,
 * are the last taken before a fork. */
__attribute__((constructor(101))) static void recorder_load(void)
{
    pthread_atfork(before_fork, after_fork_parent, after_fork_child);
}

static void setup_once(void)
{
    init_conditions();
    pthread_key_create(&R.key, thread_leave);
}

int recorder_start(const char *dir, char *err, size_t n)
{
    struct stat st;
    if (!dir || !*dir || strlen(dir) >= sizeof R.dir) {
        snprintf(err, n, "\"%s\": expected the path of a directory (at most %zu characters)",
                 dir ? dir : "", sizeof R.dir - 1);
        return -1;
    }
    if (stat(dir, &st) != 0) {
        snprintf(err, n, "\"%s\": %s; expected an existing directory", dir, strerror(errno));
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        snprintf(err, n, "\"%s\": not a directory; expected an existing directory", dir);
        return -1;
    }
    if (access(dir, W_OK | X_OK) != 0) {
        snprintf(err, n, "\"%s\": %s; expected a directory this user can write", dir,
                 strerror(errno));
        return -1;
    }
    pthread_once(&R.once, setup_once);
    pthread_mutex_lock(&R.mu);
    if (R.opened) {
        pthread_mutex_unlock(&R.mu);
        snprintf(err, n, "\"%s\": this process already recorded into %s", dir, R.path);
        return -1;
    }
    snprintf(R.dir, sizeof R.dir, "%s", dir);
    R.failed = R.closing = false;
    R.started = true;
    pthread_mutex_unlock(&R.mu);
    atomic_store(&recorder_on, true);
    return 0;
}

int recorder_start_from_environment(char *err, size_t n)
{
    const char *dir = getenv("VRAM_RECORD");
    if (!dir)
        return 0;
    char why[PATH_MAX + 128];
    if (recorder_start(dir, why, sizeof why) == 0)
        return 0;
    snprintf(err, n, "VRAM_RECORD=%s", why);
    return -1;
}

void recorder_flush(void) { write_now(); }

/* The last record of a process image; under R.round. */
static void write_exit_record(void)
{
    struct record_event exit_event = {.time = now_ns(CLOCK_MONOTONIC),
                                      .thread = (uint32_t)gettid(),
                                      .device = RECORD_NO_DEVICE,
                                      .action = RECORD_EXIT};
    if (R.fd >= 0 && record_write_block(R.fd, RECORD_BLOCK_EVENTS, (uint32_t)getpid(), R.image,
                                        &exit_event, sizeof exit_event) == 0) {
        R.written++;
        R.blocks++;
    }
}

void recorder_stop(void)
{
    atomic_store(&recorder_on, false);
    pthread_mutex_lock(&R.round);
    pthread_mutex_lock(&R.mu);
    bool last = R.opened && !R.closing;
    R.closing = true;
    atomic_store(&R.flush_due, UINT64_MAX);
    pthread_cond_broadcast(&R.work);
    pthread_cond_broadcast(&R.room);
    pthread_mutex_unlock(&R.mu);
    if (last)
        write_round(write_exit_record);
    pthread_mutex_unlock(&R.round);
    /* The writer (only an image that was not forked has one) ends at
     * `closing`; it writes nothing more after the last round. */
    if (last && R.writer_running && !pthread_equal(pthread_self(), R.writer)) {
        pthread_join(R.writer, NULL);
        R.writer_running = false;
    }
}

__attribute__((destructor)) static void stop_at_exit(void) { recorder_stop(); }

const char *recorder_path(void)
{
    pthread_mutex_lock(&R.mu);
    const char *p = R.opened ? R.path : NULL;
    pthread_mutex_unlock(&R.mu);
    return p;
}

void recorder_get_stats(struct recorder_stats *s)
{
    pthread_mutex_lock(&R.round);
    pthread_mutex_lock(&R.mu);
    *s = (struct recorder_stats){.written = R.written,
                                 .dropped = atomic_load(&R.dropped),
                                 .blocks = R.blocks,
                                 .buffers = R.buffers,
                                 .buffers_peak = R.buffers_peak,
                                 .waits = R.waits};
    pthread_mutex_unlock(&R.mu);
    pthread_mutex_unlock(&R.round);
}
