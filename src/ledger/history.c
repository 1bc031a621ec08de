/* history.c: vramd's rings of the last hour (history.h), and its answer
 * to HISTORY in pages. */
#include "history.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STEPS_PER_HOUR_STEP (HISTORY_HOUR_MS / HISTORY_RECENT_MS)
_Static_assert(HISTORY_HOUR_MS % HISTORY_RECENT_MS == 0, "an hour step is whole recent steps");

void history_init(struct history *h) { memset(h, 0, sizeof *h); }

void history_destroy(struct history *h)
{
    for (int i = 0; i < h->n; i++)
        free(h->series[i]);
    for (int i = 0; i < h->nusers; i++)
        free(h->users[i]);
    free(h->series);
    free(h->users);
    free(h->refused);
    memset(h, 0, sizeof *h);
}

static uint64_t device_key(int dev) { return (uint64_t)dev + 1; }
static uint64_t client_key(int id, int dev) { return (uint64_t)id << 5 | (unsigned)dev; }
_Static_assert(LEDGER_MAX_DEVICES <= 16, "a device's key is below every client's");

/* The index of the first series whose key is >= key. */
static int lower_bound(const struct history *h, uint64_t key)
{
    int lo = 0, hi = h->n;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (h->series[mid]->key < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static struct history_series *find(const struct history *h, uint64_t key)
{
    int i = lower_bound(h, key);
    return i < h->n && h->series[i]->key == key ? h->series[i] : NULL;
}

/* ------------------------------------------------------------- users */

/* The index of uid's record, or where it would go (as ~index). */
static int user_index(const struct history *h, uid_t uid)
{
    int lo = 0, hi = h->nusers;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (h->users[mid]->uid == uid)
            return mid;
        if (h->users[mid]->uid < uid)
            lo = mid + 1;
        else
            hi = mid;
    }
    return ~lo;
}

/* uid's record, added if new and `add`; NULL if none (or out of memory). */
static struct history_user *user_of(struct history *h, uid_t uid, bool add)
{
    int i = user_index(h, uid);
    if (i >= 0 || !add)
        return i >= 0 ? h->users[i] : NULL;
    i = ~i;
    if (h->nusers == h->users_cap) {
        int cap = h->users_cap ? h->users_cap * 2 : 16;
        struct history_user **u = realloc(h->users, (size_t)cap * sizeof *u);
        if (!u)
            return NULL;
        h->users = u;
        h->users_cap = cap;
    }
    struct history_user *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    w->uid = uid;
    memmove(&h->users[i + 1], &h->users[i], (size_t)(h->nusers - i) * sizeof *h->users);
    h->users[i] = w;
    h->nusers++;
    return w;
}

/* A user with no series left is forgotten. */
static void user_forget_if_none(struct history *h, struct history_user *w)
{
    if (w->series)
        return;
    int i = user_index(h, w->uid);
    if (i < 0)
        return;
    free(w);
    memmove(&h->users[i], &h->users[i + 1], (size_t)(h->nusers - i - 1) * sizeof *h->users);
    h->nusers--;
}

/* ------------------------------------------------- adding and dropping */

static void drop(struct history *h, struct history_series *s)
{
    int i = lower_bound(h, s->key);
    if (i >= h->n || h->series[i] != s)
        return;
    if (s->end_ms) {
        if (s->ended_prev)
            s->ended_prev->ended_next = s->ended_next;
        else
            h->ended_head = s->ended_next;
        if (s->ended_next)
            s->ended_next->ended_prev = s->ended_prev;
        else
            h->ended_tail = s->ended_prev;
        h->nended--;
    }
    struct history_user *w = s->owner;
    if (w) {
        if (s->end_ms) {
            if (s->mine_prev)
                s->mine_prev->mine_next = s->mine_next;
            else
                w->ended_head = s->mine_next;
            if (s->mine_next)
                s->mine_next->mine_prev = s->mine_prev;
            else
                w->ended_tail = s->mine_prev;
        }
        w->series--;
        user_forget_if_none(h, w);
    }
    h->bytes -= sizeof *s;
    free(s);
    memmove(&h->series[i], &h->series[i + 1], (size_t)(h->n - i - 1) * sizeof *h->series);
    h->n--;
    h->room++;
}

/* Room for a new series of user w (devices: NULL) within the bounds: an
 * ended series gives way if need be, the oldest first. False if none can. */
static bool room_for(struct history *h, struct history_user *w)
{
    if (w && w->uid != 0 && w->series >= HISTORY_USER_SERIES_MAX) {
        if (!w->ended_head)
            return false;
        drop(h, w->ended_head);
    }
    if (h->n >= HISTORY_SERIES_MAX) {
        if (!h->ended_head)
            return false;
        drop(h, h->ended_head);
    }
    return true;
}

static struct history_series *add(struct history *h, uint64_t key, struct history_user *w,
                                  uint64_t now_ms)
{
    if (!room_for(h, w))
        return NULL;
    if (h->n == h->cap) {
        int cap = h->cap ? h->cap * 2 : 64;
        struct history_series **s = realloc(h->series, (size_t)cap * sizeof *s);
        if (!s)
            return NULL;
        h->series = s;
        h->cap = cap;
    }
    struct history_series *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->key = key;
    s->owner = w;
    s->uid = w ? w->uid : (uid_t)-1;
    s->begin_ms = now_ms;
    s->step = now_ms / HISTORY_RECENT_MS;
    int i = lower_bound(h, key);
    memmove(&h->series[i + 1], &h->series[i], (size_t)(h->n - i) * sizeof *h->series);
    h->series[i] = s;
    h->n++;
    h->bytes += sizeof *s;
    if (w)
        w->series++;
    return s;
}

/* --------------------------------------------- clients not kept, remembered */

/* Where key is among the refused, or where it would go. */
static int refused_slot(const struct history *h, uint64_t key, bool *found)
{
    int lo = 0, hi = h->nrefused;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (h->refused[mid].key < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    *found = lo < h->nrefused && h->refused[lo].key == key;
    return lo;
}

/* Remembers key as refused now; false if it was already (counted once). */
static bool refuse(struct history *h, uint64_t key)
{
    bool found;
    int i = refused_slot(h, key, &found);
    if (found) {
        h->refused[i].room = h->room;
        return false;
    }
    if (h->nrefused == h->refused_cap) {
        int cap = h->refused_cap ? h->refused_cap * 2 : 64;
        struct history_refused *r = realloc(h->refused, (size_t)cap * sizeof *r);
        if (!r)
            return true; /* not remembered: tried again at the next sampling */
        h->refused = r;
        h->refused_cap = cap;
    }
    memmove(&h->refused[i + 1], &h->refused[i], (size_t)(h->nrefused - i) * sizeof *h->refused);
    h->refused[i] = (struct history_refused){key, h->room};
    h->nrefused++;
    return true;
}

/* Forgets the refused keys in [lo, hi]. */
static void unrefuse(struct history *h, uint64_t lo, uint64_t hi)
{
    bool found;
    int a = refused_slot(h, lo, &found), b = a;
    while (b < h->nrefused && h->refused[b].key <= hi)
        b++;
    memmove(&h->refused[a], &h->refused[b], (size_t)(h->nrefused - b) * sizeof *h->refused);
    h->nrefused -= b - a;
}

/* ---------------------------------------------------------- the rings */

static void max_into(struct history_sample *s, uint64_t used, uint64_t budget)
{
    if (used > s->used)
        s->used = used;
    if (budget > s->budget)
        s->budget = budget;
}

/* Opens the step of `now_ms`: the steps passed since the last note take
 * the values carried from then (nothing was reported in them). */
static void advance(struct history_series *s, uint64_t now_ms)
{
    uint64_t step = now_ms / HISTORY_RECENT_MS;
    if (step <= s->step)
        return;
    uint64_t n = step - s->step < HISTORY_RECENT ? step - s->step : HISTORY_RECENT;
    for (uint64_t k = 0; k < n; k++)
        s->recent[(step - k) % HISTORY_RECENT] = s->last;
    uint64_t hour = step / STEPS_PER_HOUR_STEP, was = s->step / STEPS_PER_HOUR_STEP;
    n = hour - was < HISTORY_HOUR ? hour - was : HISTORY_HOUR;
    for (uint64_t k = 0; k < n; k++)
        s->hour[(hour - k) % HISTORY_HOUR] = s->last;
    s->step = step;
}

static void note(struct history_series *s, uint64_t used, uint64_t budget, uint64_t now_ms)
{
    if (s->end_ms)
        return;
    if (now_ms / HISTORY_RECENT_MS < s->step) /* a clock that went back: the open step */
        now_ms = s->step * HISTORY_RECENT_MS;
    advance(s, now_ms);
    s->last = (struct history_sample){used, budget};
    max_into(&s->recent[s->step % HISTORY_RECENT], used, budget);
    max_into(&s->hour[s->step / STEPS_PER_HOUR_STEP % HISTORY_HOUR], used, budget);
}

static bool has_standing(const struct ledger_client *c, int dev)
{
    const struct ledger_use *u = &c->use[dev];
    return u->grant || u->used || u->waiting;
}

void history_note_client(struct history *h, const struct ledger_client *c, int dev,
                         uint64_t now_ms)
{
    if (c->role == ROLE_MONITOR)
        return;
    uint64_t key = client_key(c->id, dev);
    struct history_series *s = find(h, key);
    if (!s) {
        if (!has_standing(c, dev))
            return;
        bool found;
        int r = h->nrefused ? refused_slot(h, key, &found) : (found = false, 0);
        if (found && h->refused[r].room == h->room)
            return; /* refused, and no room has come since */
        struct history_user *w = user_of(h, c->uid, true);
        if (!w || !(s = add(h, key, w, now_ms))) {
            if (w)
                user_forget_if_none(h, w);
            if (refuse(h, key))
                h->not_kept++;
            return;
        }
        if (found)
            unrefuse(h, key, key);
        s->kind = c->role == ROLE_JOB ? 'j' : 'p';
        s->dev = dev;
        s->id = c->id;
        s->pid = c->pid;
        /* Names as messages carry them (an unknown user is "-"). */
        proto_name_clean(c->user, s->user, sizeof s->user);
        proto_name_clean(c->cmd, s->cmd, sizeof s->cmd);
        proto_name_clean(c->job, s->job, sizeof s->job);
    }
    note(s, c->use[dev].used, c->use[dev].grant, now_ms);
}

void history_note_device(struct history *h, const struct ledger *l, int dev, uint64_t now_ms)
{
    uint64_t key = device_key(dev);
    struct history_series *s = find(h, key);
    if (!s) {
        if (!(s = add(h, key, NULL, now_ms)))
            return;
        s->kind = 'd';
        s->dev = dev;
        snprintf(s->user, sizeof s->user, "-");
        snprintf(s->cmd, sizeof s->cmd, "-");
        snprintf(s->job, sizeof s->job, "-");
    }
    note(s, l->dev[dev].used, l->dev[dev].granted, now_ms);
}

/* Keeps at most HISTORY_ENDED_MAX ended series: the oldest end goes. */
static void bound_ended(struct history *h)
{
    while (h->nended > HISTORY_ENDED_MAX)
        drop(h, h->ended_head);
}

static void end(struct history *h, struct history_series *s, uint64_t now_ms)
{
    if (s->end_ms)
        return;
    note(s, s->last.used, s->last.budget, now_ms); /* the steps up to now */
    s->end_ms = now_ms ? now_ms : 1;
    s->ended_prev = h->ended_tail;
    s->ended_next = NULL;
    if (h->ended_tail)
        h->ended_tail->ended_next = s;
    else
        h->ended_head = s;
    h->ended_tail = s;
    h->nended++;
    struct history_user *w = s->owner;
    if (w) {
        s->mine_prev = w->ended_tail;
        s->mine_next = NULL;
        if (w->ended_tail)
            w->ended_tail->mine_next = s;
        else
            w->ended_head = s;
        w->ended_tail = s;
    }
    h->room++;
}

void history_client_left(struct history *h, int id, uint64_t now_ms)
{
    uint64_t first = client_key(id, 0), last = client_key(id, LEDGER_MAX_DEVICES - 1);
    for (int i = lower_bound(h, first); i < h->n && h->series[i]->key <= last; i++)
        end(h, h->series[i], now_ms);
    if (h->nrefused)
        unrefuse(h, first, last);
    bound_ended(h);
}

void history_tick(struct history *h, const struct ledger *l, uint64_t now_ms)
{
    if (now_ms < h->next_tick_ms)
        return;
    h->next_tick_ms = (now_ms / HISTORY_RECENT_MS + 1) * HISTORY_RECENT_MS;
    for (int d = 0; d < l->ndev; d++)
        history_note_device(h, l, d, now_ms);
    /* The clients by id, the series by key (id, then device): one walk
     * through both, a lookup only for a client without a series. */
    for (int i = 0, j = 0; i < l->nclients; i++) {
        const struct ledger_client *c = l->clients[i];
        for (int d = 0; c->role != ROLE_MONITOR && d < l->ndev; d++) {
            uint64_t key = client_key(c->id, d);
            while (j < h->n && h->series[j]->key < key)
                j++;
            if (j < h->n && h->series[j]->key == key) {
                note(h->series[j], c->use[d].used, c->use[d].grant, now_ms);
            } else if (has_standing(c, d)) {
                history_note_client(h, c, d, now_ms); /* may add, or drop an ended one */
                j = lower_bound(h, key);
            }
        }
    }
    for (int i = 0, k = 0; i < h->n; i++) { /* again one walk through both */
        struct history_series *s = h->series[i];
        while (k < l->nclients && l->clients[k]->id < s->id)
            k++;
        bool there = k < l->nclients && l->clients[k]->id == s->id;
        if (s->kind != 'd' && !s->end_ms && !there)
            end(h, s, now_ms); /* gone without a goodbye: a held grant that expired */
    }
    /* The refused of clients gone without a goodbye are forgotten too. */
    for (int i = 0; i < h->nrefused;) {
        if (ledger_find_client(l, (int)(h->refused[i].key >> 5)))
            i++;
        else
            unrefuse(h, h->refused[i].key, h->refused[i].key);
    }
    /* Ended in order: the expired are at the head. */
    while (h->ended_head && now_ms > h->ended_head->end_ms &&
           now_ms - h->ended_head->end_ms > HISTORY_KEEP_MS)
        drop(h, h->ended_head);
    bound_ended(h);
}

int history_check(const struct history *h, char *err, size_t errlen)
{
    int ended = 0;
    for (int i = 0; i < h->n; i++) {
        const struct history_series *s = h->series[i];
        if (i && h->series[i - 1]->key >= s->key) {
            snprintf(err, errlen, "series out of order at %d", i);
            return -1;
        }
        ended += s->end_ms != 0;
        if ((s->kind == 'd') != !s->owner || (s->owner && user_of((struct history *)h, s->owner->uid,
                                                                  false) != s->owner)) {
            snprintf(err, errlen, "series %llu: its user's record is wrong",
                     (unsigned long long)s->key);
            return -1;
        }
    }
    int listed = 0;
    for (const struct history_series *s = h->ended_head, *prev = NULL; s;
         prev = s, s = s->ended_next, listed++)
        if (!s->end_ms || s->ended_prev != prev || find(h, s->key) != s ||
            (!s->ended_next && s != h->ended_tail)) {
            snprintf(err, errlen, "the ended list is broken at %d", listed);
            return -1;
        }
    if (ended != h->nended || listed != ended) {
        snprintf(err, errlen, "%d series ended, %d counted, %d listed", ended, h->nended, listed);
        return -1;
    }
    for (int k = 0; k < h->nusers; k++) {
        const struct history_user *w = h->users[k];
        int series = 0, mine = 0, mine_listed = 0;
        for (int i = 0; i < h->n; i++) {
            series += h->series[i]->owner == w;
            mine += h->series[i]->owner == w && h->series[i]->end_ms;
        }
        for (const struct history_series *s = w->ended_head, *prev = NULL; s;
             prev = s, s = s->mine_next, mine_listed++)
            if (s->owner != w || !s->end_ms || s->mine_prev != prev ||
                (!s->mine_next && s != w->ended_tail)) {
                snprintf(err, errlen, "uid %u: its ended list is broken at %d", (unsigned)w->uid,
                         mine_listed);
                return -1;
            }
        if (series != w->series || !series || mine != mine_listed ||
            (k && h->users[k - 1]->uid >= w->uid)) {
            snprintf(err, errlen, "uid %u: %d series (counted %d), %d ended (listed %d)",
                     (unsigned)w->uid, series, w->series, mine, mine_listed);
            return -1;
        }
    }
    for (int i = 1; i < h->nrefused; i++)
        if (h->refused[i - 1].key >= h->refused[i].key) {
            snprintf(err, errlen, "the refused out of order at %d", i);
            return -1;
        }
    return 0;
}

bool history_job_matches(const char *name, const char *asked)
{
    size_t n = strlen(asked);
    return strcmp(name, "-") != 0 &&
           (strcmp(name, asked) == 0 || (strncmp(name, asked, n) == 0 && name[n] == '.'));
}

/* ------------------------------------------------------------ the answer */

static bool visible(const struct history_series *s, const struct history_query *q)
{
    if (s->kind == 'd')
        return !q->job;
    if (q->viewer != 0 && q->viewer != s->uid)
        return false;
    return q->job ? history_job_matches(s->job, q->job) : !s->end_ms;
}

static int send_series(const struct history_series *s, history_send_fn send, void *arg)
{
    static const char *const kinds[] = {['d'] = "device", ['p'] = "process", ['j'] = "job"};
    struct proto_writer w;
    proto_begin(&w, VERB_SERIES);
    proto_add_u64(&w, "key", s->key);
    proto_add_u64(&w, "dev", (uint64_t)s->dev);
    proto_add(&w, "kind", kinds[(unsigned char)s->kind]);
    if (s->kind != 'd') {
        proto_add_u64(&w, "id", (uint64_t)s->id);
        proto_add_u64(&w, "pid", (uint64_t)s->pid);
        proto_add_u64(&w, "uid", s->uid);
        proto_add(&w, "user", s->user);
        proto_add(&w, "cmd", s->cmd);
        proto_add(&w, "job", s->job);
    }
    proto_add_u64(&w, "begin", s->begin_ms);
    if (s->end_ms)
        proto_add_u64(&w, "end", s->end_ms);
    return send(&w, arg);
}

/* One ring's samples as SAMPLES messages, as many in each as fit. */
static int send_ring(const struct history_series *s, const char *tier, uint64_t step_ms,
                     uint64_t first, uint64_t last, const struct history_sample *ring, int size,
                     history_send_fn send, void *arg, int *count)
{
    uint64_t used[HISTORY_HOUR], budget[HISTORY_HOUR];
    int n = 0;
    for (uint64_t i = first; i <= last; i++, n++) {
        used[n] = ring[i % (uint64_t)size].used;
        budget[n] = ring[i % (uint64_t)size].budget;
    }
    for (int at = 0; at < n;) {
        struct proto_writer w;
        proto_begin(&w, VERB_SAMPLES);
        proto_add_u64(&w, "key", s->key);
        proto_add(&w, "tier", tier);
        proto_add_u64(&w, "first", (first + (uint64_t)at) * step_ms);
        proto_add_u64(&w, "step", step_ms);
        size_t room = PROTO_MAX - w.len - strlen(" used= budget=");
        /* The most samples that fit: a run's text only grows with it. */
        int lo = 1, hi = n - at;
        while (lo < hi) {
            int k = lo + (hi - lo + 1) / 2;
            if (proto_runs_length(used + at, k) + proto_runs_length(budget + at, k) <= room)
                lo = k;
            else
                hi = k - 1;
        }
        proto_add_runs(&w, "used", used + at, lo);
        proto_add_runs(&w, "budget", budget + at, lo);
        int rc = send ? send(&w, arg) : 0;
        if (rc)
            return rc;
        ++*count;
        at += lo;
    }
    return 0;
}

/* The series and its samples; with send NULL, only counts the messages. */
static int send_all(const struct history_series *s, bool recent_only, history_send_fn send,
                    void *arg, int *count)
{
    *count = 1;
    int rc = send ? send_series(s, send, arg) : 0;
    uint64_t first = s->begin_ms / HISTORY_RECENT_MS;
    if (s->step >= HISTORY_RECENT && s->step - HISTORY_RECENT + 1 > first)
        first = s->step - HISTORY_RECENT + 1;
    if (!rc)
        rc = send_ring(s, "recent", HISTORY_RECENT_MS, first, s->step, s->recent, HISTORY_RECENT,
                       send, arg, count);
    uint64_t last = s->step / STEPS_PER_HOUR_STEP;
    first = s->begin_ms / HISTORY_HOUR_MS;
    if (last >= HISTORY_HOUR && last - HISTORY_HOUR + 1 > first)
        first = last - HISTORY_HOUR + 1;
    if (!rc && !recent_only)
        rc = send_ring(s, "hour", HISTORY_HOUR_MS, first, last, s->hour, HISTORY_HOUR, send, arg,
                       count);
    return rc;
}

int history_page(struct history *h, const struct history_query *q, uint64_t now_ms,
                 int max_messages, history_send_fn send, void *arg, uint64_t *next)
{
    *next = 0;
    int sent = 0;
    uint64_t last = 0;
    for (int i = q->after < UINT64_MAX ? lower_bound(h, q->after + 1) : h->n; i < h->n; i++) {
        struct history_series *s = h->series[i];
        if (!visible(s, q))
            continue;
        if (!s->end_ms)
            note(s, s->last.used, s->last.budget, now_ms); /* up to now */
        int cost, rc;
        send_all(s, q->recent_only, NULL, NULL, &cost);
        if (sent && sent + cost > max_messages - 1) { /* room for END */
            *next = last;
            return 0;
        }
        if ((rc = send_all(s, q->recent_only, send, arg, &cost)) != 0)
            return rc;
        sent += cost;
        last = s->key;
    }
    return 0;
}
