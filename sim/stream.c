/* stream: streams, events and host functions.
 *
 * Streams run host functions (cuLaunchHostFunc, cuStreamAddCallback) in
 * order on a worker thread; that is the only work that takes time here, and
 * it is enough to make events, stream waits and stream-ordered reuse
 * observable exactly as on a real GPU. Copies and memsets on a stream run
 * once the stream has drained (copy.c). Stream handles are checked against
 * the live streams before use.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "sim.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct host_task {
    void (*fn)(void *arg);
    void *arg;
    struct host_task *next;
};

struct CUstream_st {
    int dev;
    CUcontext ctx;
    unsigned flags;
    int priority;
    unsigned long long id;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint64_t enqueued, completed; /* work items, in order */
    struct host_task *head, *tail;
    bool has_worker, stopping;
    pthread_t worker;
    int refs; /* 1 for the handle, +1 per event recorded on it */
    struct CUstream_st *next_live;
};

struct CUevent_st {
    unsigned flags;
    bool recorded;
    struct CUstream_st *stream; /* NULL: complete */
    uint64_t seq;
    double ms; /* when it completed (ms on CLOCK_MONOTONIC) */
};

static struct CUstream_st default_stream = {
    .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER, .refs = 1};
static pthread_mutex_t live_mu = PTHREAD_MUTEX_INITIALIZER;
static struct CUstream_st *live; /* created streams */
static unsigned long long next_id = 1;

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

struct CUstream_st *sim_stream(CUstream h)
{
    if (h == NULL || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD)
        return &default_stream;
    pthread_mutex_lock(&live_mu);
    struct CUstream_st *s = live;
    while (s && s != h)
        s = s->next_live;
    pthread_mutex_unlock(&live_mu);
    return s;
}

static void *stream_worker(void *arg)
{
    struct CUstream_st *s = arg;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (!s->head && !s->stopping)
            pthread_cond_wait(&s->cv, &s->mu);
        if (!s->head)
            break;
        struct host_task *t = s->head;
        pthread_mutex_unlock(&s->mu);
        t->fn(t->arg);
        pthread_mutex_lock(&s->mu);
        s->head = t->next;
        if (!s->head)
            s->tail = NULL;
        free(t);
        s->completed++;
        pthread_cond_broadcast(&s->cv);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

static void stream_wait(struct CUstream_st *s, uint64_t seq)
{
    pthread_mutex_lock(&s->mu);
    while (s->completed < seq)
        pthread_cond_wait(&s->cv, &s->mu);
    pthread_mutex_unlock(&s->mu);
}

void sim_stream_drain(struct CUstream_st *s)
{
    pthread_mutex_lock(&s->mu);
    uint64_t seq = s->enqueued;
    pthread_mutex_unlock(&s->mu);
    stream_wait(s, seq);
}

static CUresult sync_all(void)
{
    sim_stream_drain(&default_stream);
    for (;;) {
        /* Drain each live stream; one may be destroyed meanwhile, so look
         * each up again rather than holding the list. */
        pthread_mutex_lock(&live_mu);
        struct CUstream_st *busy = NULL;
        for (struct CUstream_st *s = live; s && !busy; s = s->next_live) {
            pthread_mutex_lock(&s->mu);
            if (s->completed < s->enqueued) {
                busy = s;
                s->refs++;
            }
            pthread_mutex_unlock(&s->mu);
        }
        pthread_mutex_unlock(&live_mu);
        if (!busy)
            return CUDA_SUCCESS;
        sim_stream_drain(busy);
        pthread_mutex_lock(&busy->mu);
        int left = --busy->refs;
        pthread_mutex_unlock(&busy->mu);
        if (!left) {
            pthread_mutex_destroy(&busy->mu);
            pthread_cond_destroy(&busy->cv);
            free(busy);
        }
    }
}

static void stream_unref(struct CUstream_st *s)
{
    if (s == &default_stream)
        return;
    pthread_mutex_lock(&s->mu);
    int left = --s->refs;
    pthread_mutex_unlock(&s->mu);
    if (left)
        return;
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s);
}

static struct CUstream_st *event_stream(CUevent e, uint64_t *seq);

/* Queues fn(arg) on the stream. */
static CUresult enqueue(struct CUstream_st *s, void (*fn)(void *), void *arg)
{
    struct host_task *t = calloc(1, sizeof *t);
    if (!t)
        return CUDA_ERROR_OUT_OF_MEMORY;
    t->fn = fn;
    t->arg = arg;
    pthread_mutex_lock(&s->mu);
    if (!s->has_worker) {
        if (pthread_create(&s->worker, NULL, stream_worker, s) != 0) {
            pthread_mutex_unlock(&s->mu);
            free(t);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        if (s == &default_stream)
            pthread_detach(s->worker);
        s->has_worker = true;
    }
    if (s->tail)
        s->tail->next = t;
    else
        s->head = t;
    s->tail = t;
    s->enqueued++;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return CUDA_SUCCESS;
}

/* A context's work is its streams' (every stream of the process: the
 * simulator's contexts share one device's worth of queues). */
EXPORT CUresult cuCtxSynchronize(void)
{
    CUcontext c;
    CUresult rc = sim_current_context(&c);
    return rc == CUDA_SUCCESS ? sync_all() : rc;
}

EXPORT CUresult cuCtxSynchronize_v2(CUcontext ctx)
{
    CUresult rc = sim_context_arg(&ctx);
    return rc == CUDA_SUCCESS ? sync_all() : rc;
}

/* --------------------------------------------------------------- streams */

EXPORT CUresult cuStreamCreateWithPriority(CUstream *phStream, unsigned int flags, int priority)
{
    CUcontext ctx;
    CUresult rc = sim_current_context(&ctx);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!phStream || flags > CU_STREAM_NON_BLOCKING)
        return CUDA_ERROR_INVALID_VALUE;
    struct CUstream_st *s = calloc(1, sizeof *s);
    if (!s)
        return CUDA_ERROR_OUT_OF_MEMORY;
    s->ctx = ctx;
    s->dev = sim_context_device(ctx);
    s->flags = flags;
    s->priority = priority > 0 ? 0 : priority < -5 ? -5 : priority; /* clamped, as documented */
    s->refs = 1;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    pthread_mutex_lock(&live_mu);
    s->id = ++next_id;
    s->next_live = live;
    live = s;
    pthread_mutex_unlock(&live_mu);
    *phStream = s;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamCreate(CUstream *phStream, unsigned int flags)
{
    return cuStreamCreateWithPriority(phStream, flags, 0);
}

/* The stream a call names, or the return code that says why not. */
#define STREAM(s, h)                                                                           \
    struct CUstream_st *s;                                                                     \
    do {                                                                                       \
        CUresult rc_ = sim_check_init();                                                       \
        if (rc_ != CUDA_SUCCESS)                                                               \
            return rc_;                                                                        \
        if (!(s = sim_stream(h)))                                                              \
            return CUDA_ERROR_INVALID_HANDLE;                                                  \
    } while (0)

EXPORT CUresult cuStreamSynchronize(CUstream h)
{
    STREAM(s, h);
    sim_stream_drain(s);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamQuery(CUstream h)
{
    STREAM(s, h);
    pthread_mutex_lock(&s->mu);
    bool done = s->completed == s->enqueued;
    pthread_mutex_unlock(&s->mu);
    return done ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

EXPORT CUresult cuStreamDestroy_v2(CUstream h)
{
    CUresult rc = sim_check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!h || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD)
        return CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&live_mu);
    struct CUstream_st **pp = &live;
    while (*pp && *pp != h)
        pp = &(*pp)->next_live;
    struct CUstream_st *s = *pp;
    if (s)
        *pp = s->next_live;
    pthread_mutex_unlock(&live_mu);
    if (!s)
        return CUDA_ERROR_INVALID_HANDLE;
    /* Like the driver, destroying a stream lets queued work finish. */
    sim_stream_drain(s);
    pthread_mutex_lock(&s->mu);
    s->stopping = true;
    bool joined = s->has_worker;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    if (joined)
        pthread_join(s->worker, NULL);
    stream_unref(s);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamDestroy(CUstream h) { return cuStreamDestroy_v2(h); }

EXPORT CUresult cuLaunchHostFunc(CUstream h, CUhostFn fn, void *userData)
{
    STREAM(s, h);
    if (!fn)
        return CUDA_ERROR_INVALID_VALUE;
    return enqueue(s, fn, userData);
}

struct callback {
    CUstreamCallback fn;
    CUstream stream;
    void *data;
};

static void run_callback(void *arg)
{
    struct callback *c = arg;
    c->fn(c->stream, CUDA_SUCCESS, c->data);
    free(c);
}

EXPORT CUresult cuStreamAddCallback(CUstream h, CUstreamCallback callback, void *userData,
                                    unsigned int flags)
{
    STREAM(s, h);
    if (!callback || flags)
        return CUDA_ERROR_INVALID_VALUE;
    struct callback *c = malloc(sizeof *c);
    if (!c)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *c = (struct callback){callback, h, userData};
    CUresult rc = enqueue(s, run_callback, c);
    if (rc != CUDA_SUCCESS)
        free(c);
    return rc;
}

struct wait {
    struct CUstream_st *on;
    uint64_t seq;
};

static void run_wait(void *arg)
{
    struct wait *w = arg;
    stream_wait(w->on, w->seq);
    stream_unref(w->on);
    free(w);
}

EXPORT CUresult cuStreamWaitEvent(CUstream h, CUevent e, unsigned int flags)
{
    STREAM(s, h);
    if (!e)
        return CUDA_ERROR_INVALID_HANDLE;
    if (flags > 1) /* CU_EVENT_WAIT_DEFAULT or _EXTERNAL */
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t seq;
    struct CUstream_st *on = event_stream(e, &seq);
    if (!on)
        return CUDA_SUCCESS; /* complete */
    if (on == s) {
        stream_unref(on); /* ordered already */
        return CUDA_SUCCESS;
    }
    struct wait *w = malloc(sizeof *w);
    if (!w) {
        stream_unref(on);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *w = (struct wait){on, seq};
    CUresult rc = enqueue(s, run_wait, w);
    if (rc != CUDA_SUCCESS) {
        stream_unref(on);
        free(w);
    }
    return rc;
}

EXPORT CUresult cuStreamGetPriority(CUstream h, int *priority)
{
    STREAM(s, h);
    if (!priority)
        return CUDA_ERROR_INVALID_VALUE;
    *priority = s->priority;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamGetFlags(CUstream h, unsigned int *flags)
{
    STREAM(s, h);
    if (!flags)
        return CUDA_ERROR_INVALID_VALUE;
    *flags = s->flags;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamGetId(CUstream h, unsigned long long *streamId)
{
    STREAM(s, h);
    if (!streamId)
        return CUDA_ERROR_INVALID_VALUE;
    *streamId = s->id;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamGetCtx(CUstream h, CUcontext *pctx)
{
    STREAM(s, h);
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    if (s == &default_stream)
        return sim_current_context(pctx);
    *pctx = s->ctx;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamGetDevice(CUstream h, CUdevice *device)
{
    STREAM(s, h);
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    if (s == &default_stream)
        return sim_current_device(device);
    *device = s->dev;
    return CUDA_SUCCESS;
}

/* ---------------------------------------------------------------- events */

EXPORT CUresult cuEventCreate(CUevent *phEvent, unsigned int flags)
{
    CUresult rc = sim_check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!phEvent || flags > (CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS) ||
        ((flags & CU_EVENT_INTERPROCESS) && !(flags & CU_EVENT_DISABLE_TIMING)))
        return CUDA_ERROR_INVALID_VALUE;
    CUevent e = calloc(1, sizeof *e);
    if (!e)
        return CUDA_ERROR_OUT_OF_MEMORY;
    e->flags = flags;
    *phEvent = e;
    return CUDA_SUCCESS;
}

/* Events may be queried from many threads: their fields change under this. */
static pthread_mutex_t event_mu = PTHREAD_MUTEX_INITIALIZER;

/* Caller has checked e; settles an event whose stream has reached it (its
 * time is when that was first seen). */
static bool event_done(CUevent e)
{
    pthread_mutex_lock(&event_mu);
    bool done = true;
    if (e->stream) {
        pthread_mutex_lock(&e->stream->mu);
        done = e->stream->completed >= e->seq;
        pthread_mutex_unlock(&e->stream->mu);
        if (done) {
            e->ms = now_ms();
            stream_unref(e->stream);
            e->stream = NULL;
        }
    }
    pthread_mutex_unlock(&event_mu);
    return done;
}

/* The stream and position an event waits for, with a reference held. */
static struct CUstream_st *event_stream(CUevent e, uint64_t *seq)
{
    pthread_mutex_lock(&event_mu);
    struct CUstream_st *s = e->stream;
    if (s) {
        pthread_mutex_lock(&s->mu);
        s->refs++;
        pthread_mutex_unlock(&s->mu);
        *seq = e->seq;
    }
    pthread_mutex_unlock(&event_mu);
    return s;
}

EXPORT CUresult cuEventRecord(CUevent e, CUstream h)
{
    STREAM(s, h);
    if (!e)
        return CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&event_mu);
    if (e->stream)
        stream_unref(e->stream);
    e->stream = NULL;
    e->recorded = true;
    e->ms = now_ms();
    pthread_mutex_lock(&s->mu);
    if (s->completed < s->enqueued) {
        e->seq = s->enqueued;
        e->stream = s;
        s->refs++;
    }
    pthread_mutex_unlock(&s->mu);
    pthread_mutex_unlock(&event_mu);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuEventRecordWithFlags(CUevent e, CUstream h, unsigned int flags)
{
    if (flags > 1) /* CU_EVENT_RECORD_DEFAULT or _EXTERNAL */
        return sim_ready() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
    return cuEventRecord(e, h);
}

EXPORT CUresult cuEventQuery(CUevent e)
{
    CUresult rc = sim_check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!e)
        return CUDA_ERROR_INVALID_HANDLE;
    return event_done(e) ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

EXPORT CUresult cuEventSynchronize(CUevent e)
{
    CUresult rc = sim_check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!e)
        return CUDA_ERROR_INVALID_HANDLE;
    uint64_t seq;
    struct CUstream_st *s = event_stream(e, &seq);
    if (s) {
        stream_wait(s, seq);
        stream_unref(s);
    }
    event_done(e);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuEventElapsedTime_v2(float *pMilliseconds, CUevent start, CUevent end)
{
    CUresult rc = sim_check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!pMilliseconds)
        return CUDA_ERROR_INVALID_VALUE;
    if (!start || !end || !start->recorded || !end->recorded ||
        (start->flags | end->flags) & CU_EVENT_DISABLE_TIMING)
        return CUDA_ERROR_INVALID_HANDLE;
    if (!event_done(start) || !event_done(end))
        return CUDA_ERROR_NOT_READY;
    *pMilliseconds = (float)(end->ms - start->ms);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuEventElapsedTime(float *pMilliseconds, CUevent start, CUevent end)
{
    return cuEventElapsedTime_v2(pMilliseconds, start, end);
}

EXPORT CUresult cuEventDestroy_v2(CUevent e)
{
    CUresult rc = sim_check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!e)
        return CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&event_mu);
    if (e->stream)
        stream_unref(e->stream);
    pthread_mutex_unlock(&event_mu);
    free(e);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuEventDestroy(CUevent e) { return cuEventDestroy_v2(e); }

SAME_TYPE(cuCtxSynchronize);
SAME_TYPE(cuCtxSynchronize_v2);
SAME_TYPE(cuStreamCreate);
SAME_TYPE(cuStreamCreateWithPriority);
SAME_TYPE(cuStreamSynchronize);
SAME_TYPE(cuStreamQuery);
SAME_TYPE(cuStreamDestroy);
SAME_TYPE(cuStreamDestroy_v2);
SAME_TYPE(cuLaunchHostFunc);
SAME_TYPE(cuStreamAddCallback);
SAME_TYPE(cuStreamWaitEvent);
SAME_TYPE(cuStreamGetPriority);
SAME_TYPE(cuStreamGetFlags);
SAME_TYPE(cuStreamGetId);
SAME_TYPE(cuStreamGetCtx);
SAME_TYPE(cuStreamGetDevice);
SAME_TYPE(cuEventCreate);
SAME_TYPE(cuEventRecord);
SAME_TYPE(cuEventRecordWithFlags);
SAME_TYPE(cuEventQuery);
SAME_TYPE(cuEventSynchronize);
SAME_TYPE(cuEventElapsedTime);
SAME_TYPE(cuEventElapsedTime_v2);
SAME_TYPE(cuEventDestroy);
SAME_TYPE(cuEventDestroy_v2);
