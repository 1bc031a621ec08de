#include "budget.h"
#include "../command/command.h"
#include "driver_memory.h"
#include "real.h"

#include "../core/options.h"
#include "../cuda/uuid.h"
#include "../client/agent.h"
#include "../cuda/granularity.h"
#include "../record/recorder.h"
#include "../util/addrmap.h"
#include "../util/lock.h"
#include "../util/parse.h"
#include "../util/report.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Budgets. A device's limit is resolved when it is first touched, because
 * a fraction needs the device's total from the driver. What is held is
 * counted in the command's state (command.c): shared by every process of
 * one `vram run`, or private to this process. */
static struct {
    struct options env;
    bool config_bad;
    char *join_error; /* why this process cannot join its command's budget */
    pthread_mutex_t resolve; /* taken only while resolving a device */
    _Atomic int state[BUDGET_MAX_DEVICES]; /* 0 unresolved, 1 unlimited, 2 limited */
    uint64_t limit[BUDGET_MAX_DEVICES];
    _Atomic int cdev[BUDGET_MAX_DEVICES]; /* the device's entry in the command's state, or -1 */
    char *denied[BUDGET_MAX_DEVICES]; /* why the daemon granted nothing */
    bool unbudgeted[BUDGET_MAX_DEVICES]; /* ... or rather the setting gave others a budget */
    _Atomic bool stopped[BUDGET_MAX_DEVICES]; /* vramd does not take the budget back (agent.h) */
} b = {.resolve = PTHREAD_MUTEX_INITIALIZER};

/* Live allocations, sharded so that threads allocating at once rarely meet
 * on a lock. Value: charge | device << 48 | kind << 56. */
#define SHARDS 16
static struct shard {
    vram_lock lock;
    struct addrmap map;
} shards[SHARDS];

#define PACK(bytes, dev, kind) ((bytes) | (uint64_t)(dev) << 48 | (uint64_t)(kind) << 56)
#define PACK_BYTES(v) ((v) & (((uint64_t)1 << 48) - 1))
#define PACK_DEV(v) ((int)(((v) >> 48) & 0xff))
#define PACK_KIND(v) ((enum charge_kind)((v) >> 56))

static inline struct shard *shard_of(uint64_t key)
{
    return &shards[((key >> 9) * 0x9E3779B97F4A7C15ull) >> 60];
}

/* The interposer's first moment in every process of a command: find the
 * command's state while the processes that can show it are alive. */
__attribute__((constructor)) static void budget_load(void)
{
    for (int d = 0; d < BUDGET_MAX_DEVICES; d++)
        atomic_init(&b.cdev[d], -1);
    /* VRAM_COMMAND=vramd: a container's command state, asked of vramd
     * here, above the command, which is given the answer. */
    struct command_from_daemon given = {.r = 1, .fd = -1};
    if (command_asks_daemon()) {
        char job[64];
        given.r = agent_container_state(&given.fd, job, sizeof job, given.why, sizeof given.why);
    }
    command_open_from_environment(&given);
}

int budget_setup(void)
{
    command_set_margin(DRIVER_MEMORY_MARGIN);
    options_clear(&b.env);
    /* Quiet unless asked: the level is set before anything could warn. */
    log_set_level(LOG_OFF);
    char err[1024];
    const char *lvl = getenv("VRAM_LOG");
    if (lvl && options_set(&b.env, "VRAM_LOG", lvl, err, sizeof err) == 0 && b.env.log_level >= 0)
        log_set_level(b.env.log_level);
    if (command_join(err, sizeof err) != 0) {
        /* A process of a budgeted command must not run unbudgeted: say why,
         * always, once, and refuse its allocations. */
        fprintf(stderr, "vram: error: %s; every GPU allocation of this process will be refused\n",
                err);
        b.join_error = strdup(err);
        b.config_bad = true;
        return -1;
    }
    char var[32], value[256];
    int rc = 0;
    if (command_budget_setting(var, sizeof var, value, sizeof value)) {
        /* The command's budget, as vram run was given it: the same for every
         * process of the command, whatever its own environment says. */
        if (var[0])
            rc = options_set(&b.env, var, value, err, sizeof err);
    } else {
        options_warn_unknown(); /* outside a command: no vram run said it */
        rc = options_from_environment(&b.env, err, sizeof err);
    }
    if (rc != 0) {
        /* A budget that cannot be read is not "no budget": say so, always,
         * and refuse allocations rather than run unbounded. */
        fprintf(stderr, "vram: error: %s; every GPU allocation will be refused\n", err);
        b.config_bad = true;
        return -1;
    }
    return 0;
}

static void usage_of(int dev, uint64_t *used, uint64_t *peak)
{
    int c = atomic_load(&b.cdev[dev]);
    *used = c >= 0 ? command_own_used(c) : 0;
    *peak = c >= 0 ? command_own_peak(c) : 0;
}

/* A restarted vramd does not count this process's budget (yet): nothing more. */
static void allow(int dev, bool allowed)
{
    atomic_store_explicit(&b.stopped[dev], !allowed, memory_order_relaxed);
}

/* With a daemon, the budget is what it grants; `s` is the local answer. */
static int ask_daemon(int dev, const char *uuid, int s)
{
    char why[1024];
    uint64_t granted = 0;
    switch (agent_request(dev, uuid, real_device_total(dev), s == 2 ? b.limit[dev] : 0, usage_of,
                          allow, &granted, why, sizeof why)) {
    case AGENT_ALONE: return s;
    case AGENT_GRANTED: b.limit[dev] = granted; return 2;
    case AGENT_DENIED: break;
    }
    b.limit[dev] = 0;
    b.denied[dev] = strdup(why);
    /* The program is about to fail for a reason it cannot see: say it,
     * whatever VRAM_LOG says, once. */
    fprintf(stderr, "vram: device %d: no GPU memory granted by vramd: %s\n", dev, why);
    return 2;
}

/* A command whose budgets vramd granted to the whole command (vram run or
 * the Slurm plugin asked, before it started): the grant registered for
 * the device is the budget, and this process asks vramd nothing. A device
 * with no grant, or a grant of nothing (refused, started anyway), has no
 * memory for the command. */
static int granted_to_command(int dev, const char *uuid)
{
    char why[512];
    uint64_t budget = 0;
    int c = command_device(uuid, dev, false, 0, &budget, why, sizeof why);
    if (c >= 0 && budget) {
        b.limit[dev] = budget;
        return 2;
    }
    b.limit[dev] = 0;
    if (c < 0 && c != -2)
        snprintf(why, sizeof why, "the command's grants are for the GPUs it could see when it "
                 "started, and %s was not one of them", uuid);
    else if (c >= 0)
        snprintf(why, sizeof why, "vramd refused the command this GPU (%s), and it was started "
                 "anyway", uuid);
    b.denied[dev] = strdup(why);
    /* As ask_daemon: the program is about to fail for a reason it cannot see. */
    fprintf(stderr, "vram: device %d: no GPU memory granted by vramd: %s\n", dev, why);
    return 2;
}

/* A setting for a device this program does not have, or a fraction that
 * leaves a device less than 1 MiB, is a mistake to be heard, not "no
 * budget" (vram run refuses both before the program starts; this is for a
 * program started with the variables and LD_PRELOAD by hand): it makes the
 * configuration bad, which refuses every allocation. Judged once the
 * driver shows a device; false until then, to be tried again. */
static bool check_configuration(void)
{
    int present = 0;
    for (int d = 0; d < OPT_MAX_DEVICES && d < BUDGET_MAX_DEVICES; d++)
        present += real_device_total(d) > 0;
    if (present == 0)
        return false;
    struct options none;
    options_clear(&none);
    for (int d = 0; d < OPT_MAX_DEVICES && d < BUDGET_MAX_DEVICES && !b.config_bad; d++) {
        const struct limit_setting *l = options_limit(&none, &b.env, d);
        uint64_t total = real_device_total(d);
        if (total == 0 && l == &b.env.limit[d] && l->kind != LIMIT_NONE) {
            fprintf(stderr, "vram: error: %s names device %d, but this program sees only "
                            "device%s 0%s%.0d; every GPU allocation will be refused\n",
                    l->origin, d, present == 1 ? "" : "s", present == 1 ? "" : " to ",
                    present == 1 ? 0 : present - 1);
            b.config_bad = true;
        } else if (total && l->kind == LIMIT_BYTES && l->bytes > total) {
            /* As vram run and libvram: more than the device is a mistake. */
            fprintf(stderr, "vram: error: %s gives device %d (%s) a budget of %s, more than "
                            "it has; every GPU allocation will be refused\n",
                    l->origin, d, format_size(total).text, format_size(l->bytes).text);
            b.config_bad = true;
        } else if (total && l->kind == LIMIT_FRACTION &&
                   (double)total * l->fraction < (double)PARSE_MEANINGFUL_BYTES) {
            fprintf(stderr, "vram: error: %s gives device %d (%s) a budget of %s, less than "
                            "1 MiB; every GPU allocation will be refused\n",
                    l->origin, d, format_size(total).text,
                    format_size((uint64_t)((double)total * l->fraction)).text);
            b.config_bad = true;
        }
    }
    return true;
}

/* A device left without a budget where the setting gives others one
 * (VRAM_MEMORY_LIMIT=1=4GiB on two GPUs), and no vramd gives it one: the
 * program would take it whole, unseen. Refused, said whatever VRAM_LOG
 * says (vram run refuses it before starting; this is for the interposer
 * preloaded by hand). True when refused. */
static bool unbudgeted_beside_budgets(int dev, const char *uuid)
{
    int other = -1;
    for (int d = 0; d < OPT_MAX_DEVICES && other < 0; d++)
        if (d != dev && b.env.limit[d].kind != LIMIT_NONE)
            other = d;
    if (other < 0 || b.env.limit_all.kind != LIMIT_NONE)
        return false;
    char why[512];
    snprintf(why, sizeof why, "%s gives device %d a budget and device %d (%s) none; give each "
             "GPU a budget (one for all: SIZE; or one per GPU: 0=SIZE,1=SIZE), or hide device %d "
             "with CUDA_VISIBLE_DEVICES", b.env.limit[other].origin, other, dev, uuid, dev);
    fprintf(stderr, "vram: error: %s; every GPU allocation on device %d will be refused\n", why,
            dev);
    b.denied[dev] = strdup(why);
    b.unbudgeted[dev] = true;
    b.limit[dev] = 0;
    return true;
}

/* This process's answer for a device (2 limited, 1 unlimited), then the
 * command's: with one budget per command, the budget the command's first
 * process on this device (by UUID) registered holds for all. */
static int resolve_device(int dev)
{
    struct options none;
    options_clear(&none);
    const struct limit_setting *l = options_limit(&none, &b.env, dev);
    int s = 2;
    if (b.config_bad) {
        b.limit[dev] = 0;
        return 2;
    }
    if (l->kind == LIMIT_BYTES)
        b.limit[dev] = l->bytes;
    else if (l->kind == LIMIT_FRACTION)
        b.limit[dev] = (uint64_t)((double)real_device_total(dev) * l->fraction);
    else
        s = 1;
    char uuid[UUID_TEXT_SIZE], why[512];
    bool known = real_device_uuid(dev, uuid) == 0;
    if (!known) /* a driver that cannot say: the ordinal is all we have */
        snprintf(uuid, sizeof uuid, "device-%d", dev);
    else if (command_granted())
        s = granted_to_command(dev, uuid);
    else
        s = ask_daemon(dev, uuid, s);
    if (s == 1 && unbudgeted_beside_budgets(dev, uuid))
        return 2;
    if (b.denied[dev])
        return 2;
    uint64_t budget = 0;
    int c = command_device(uuid, dev, s == 2, b.limit[dev], &budget, why, sizeof why);
    if (c == -2) {
        fprintf(stderr, "vram: error: device %d: %s; every GPU allocation on it will be refused\n",
                dev, why);
        b.denied[dev] = strdup(why);
        b.limit[dev] = 0;
        return 2;
    }
    if (c >= 0 && command_mode() == COMMAND_SHARED) {
        if (s != 2 || budget < b.limit[dev])
            b.limit[dev] = budget;
        s = 2;
    }
    atomic_store(&b.cdev[dev], c);
    if (c >= 0)
        driver_memory_account(dev, c);
    return s;
}

static int resolve(int dev)
{
    static bool checked;
    if (dev < 0 || dev >= BUDGET_MAX_DEVICES)
        return 1;
    int s = atomic_load_explicit(&b.state[dev], memory_order_acquire);
    if (s)
        return s;
    pthread_mutex_lock(&b.resolve);
    s = atomic_load(&b.state[dev]);
    if (!s && !checked && !b.config_bad)
        checked = check_configuration();
    if (!s) {
        s = resolve_device(dev);
        if (s == 2)
            vlog(LOG_INFO, "device %d: budget %s%s", dev, format_size(b.limit[dev]).text,
                 command_mode() == COMMAND_SHARED ? " for the whole command" : "");
        if (s == 2)
            record_budget(dev, b.limit[dev], command_mode() == COMMAND_SHARED
                                                 ? RECORD_COMMAND_BUDGET : RECORD_PROCESS_BUDGET);
        atomic_store_explicit(&b.state[dev], s, memory_order_release);
    }
    pthread_mutex_unlock(&b.resolve);
    return s;
}

bool budget_limited(int dev) { return resolve(dev) == 2; }
uint64_t budget_limit(int dev) { return budget_limited(dev) ? b.limit[dev] : UINT64_MAX; }

/* A reservation that came near the budget, or was refused: what the driver
 * holds is read first (driver_memory.h). `pending`: what of the
 * reservation the driver has not been asked for yet. */
__attribute__((noinline, cold)) static int reserve_near(int dev, int c, uint64_t bytes,
                                                        uint64_t pending, int rc, bool count)
{
    if (rc > 0) {
        if (driver_memory_settle(dev, pending) < 0)
            return 0;
        return command_recheck(c, b.limit[dev], bytes);
    }
    /* Refused: the driver may have given back what it held. */
    if (driver_memory_part(dev) == 0 || driver_memory_settle(dev, 0) <= 0)
        return -1;
    rc = count ? command_reserve(c, b.limit[dev], bytes)
               : command_try_reserve(c, b.limit[dev], bytes);
    return rc <= 0 ? rc : command_recheck(c, b.limit[dev], bytes);
}

static inline int reserve(int dev, uint64_t bytes, uint64_t pending, bool count)
{
    int c = atomic_load_explicit(&b.cdev[dev], memory_order_relaxed);
    if (c < 0 || atomic_load_explicit(&b.stopped[dev], memory_order_relaxed))
        return -1; /* limited but not accounted (a budget that could not be set up), or stopped */
    int rc = count ? command_reserve(c, b.limit[dev], bytes)
                   : command_try_reserve(c, b.limit[dev], bytes);
    if (__builtin_expect(rc == 0, 1))
        return 0;
    return reserve_near(dev, c, bytes, pending, rc, count);
}

int budget_reserve(int dev, uint64_t bytes) { return reserve(dev, bytes, bytes, true); }

int budget_reserve_held(int dev, uint64_t bytes) { return reserve(dev, bytes, 0, true); }

int budget_try_reserve(int dev, uint64_t bytes) { return reserve(dev, bytes, bytes, false); }

void budget_release(int dev, uint64_t bytes)
{
    int c = atomic_load_explicit(&b.cdev[dev], memory_order_relaxed);
    if (c >= 0)
        command_release(c, bytes);
}

void budget_commit(int dev, uint64_t key, uint64_t bytes, enum charge_kind kind)
{
    struct shard *s = shard_of(key);
    vram_lock_acquire(&s->lock);
    int rc = addrmap_put(&s->map, key, PACK(bytes, dev, kind));
    vram_lock_release(&s->lock);
    if (rc != 0) /* no host memory to remember it: it can never be freed, so uncharge */
        budget_release(dev, bytes);
}

bool budget_forget(uint64_t key, int *dev, uint64_t *bytes, enum charge_kind *kind)
{
    struct shard *s = shard_of(key);
    uint64_t v;
    vram_lock_acquire(&s->lock);
    bool found = s->map.count && addrmap_take(&s->map, key, &v);
    vram_lock_release(&s->lock);
    if (!found)
        return false;
    *dev = PACK_DEV(v);
    *bytes = PACK_BYTES(v);
    if (kind)
        *kind = PACK_KIND(v);
    return true;
}

/* ------------------------------------------------- contexts and modules */

int budget_reserve_part(int dev, uint64_t bytes, enum command_part part, bool held)
{
    if (reserve(dev, bytes, held ? 0 : bytes, true) != 0)
        return -1;
    command_part(atomic_load_explicit(&b.cdev[dev], memory_order_relaxed), part, bytes, true);
    return 0;
}

void budget_release_part(int dev, uint64_t bytes, enum command_part part)
{
    int c = atomic_load_explicit(&b.cdev[dev], memory_order_relaxed);
    if (c < 0)
        return;
    command_part(c, part, bytes, false);
    command_release(c, bytes);
}

uint64_t budget_context_size(int dev)
{
    int c = atomic_load(&b.cdev[dev]);
    return c >= 0 ? command_context_size(c) : 0;
}

void budget_note_context_size(int dev, uint64_t bytes)
{
    int c = atomic_load(&b.cdev[dev]);
    if (c >= 0)
        command_note_context_size(c, bytes);
}

void budget_report_context(int dev, uint64_t bytes, const char *call, const char *name)
{
    static atomic_bool told[BUDGET_MAX_DEVICES];
    uint64_t limit = b.limit[dev];
    bool accounted = atomic_load(&b.cdev[dev]) >= 0 && !b.config_bad && !b.denied[dev];
    if (!accounted || limit >= bytes + PARSE_MEANINGFUL_BYTES) {
        budget_report_oom(dev, bytes, call);
        return;
    }
    if (atomic_exchange(&told[dev], true))
        return;
    /* The program cannot run in this budget at all: it must hear why. */
    fprintf(stderr,
            "vram: error: a CUDA context takes %s on device %d (%s) and its budget is %s, "
            "which leaves no room beside it: %s fails with CUDA_ERROR_OUT_OF_MEMORY; a budget "
            "there needs at least %s\n",
            format_size(bytes).text, dev, name, format_size(limit).text, call,
            format_size(bytes + PARSE_MEANINGFUL_BYTES).text);
}

/* What the device holds against its budget: the whole command's (dead
 * processes' shares reclaimed first), or this process's. */
static uint64_t held(int dev)
{
    int c = atomic_load(&b.cdev[dev]);
    return c >= 0 ? command_used(c) : 0;
}

uint64_t budget_total(int dev, uint64_t phys_total)
{
    if (!budget_limited(dev))
        return phys_total;
    return b.limit[dev] < phys_total ? b.limit[dev] : phys_total;
}

void budget_view(int dev, uint64_t phys_free, uint64_t phys_total, uint64_t *free_out,
                 uint64_t *total_out)
{
    if (!budget_limited(dev)) {
        *free_out = phys_free;
        *total_out = phys_total;
        return;
    }
    uint64_t limit = b.limit[dev], used = held(dev);
    uint64_t total = limit < phys_total ? limit : phys_total;
    uint64_t free_bytes = used < limit ? limit - used : 0;
    if (free_bytes > phys_free)
        free_bytes = phys_free;
    if (free_bytes > total)
        free_bytes = total;
    /* Rounded down to what one allocation can take, so that a framework
     * that asks for "all that is free" gets it. */
    *free_out = device_fit(free_bytes);
    *total_out = total;
}

/* -------------------------------------------------------------- report */

static const char *kind_name[CHARGE_KINDS] = {
    "cuMemAlloc", "cuMemAllocPitch", "cuMemAllocManaged", "stream-ordered pool",
    "cuMemCreate", "array", "mipmapped array", "graph memory",
};

struct top {
    int dev;
    uint64_t key[3], bytes[3];
    enum charge_kind kind[3];
};

static bool consider(uint64_t key, uint64_t v, void *arg)
{
    struct top *t = arg;
    if (PACK_DEV(v) != t->dev)
        return true;
    uint64_t bytes = PACK_BYTES(v);
    for (int i = 0; i < 3; i++) {
        if (bytes > t->bytes[i]) {
            for (int j = 2; j > i; j--) {
                t->bytes[j] = t->bytes[j - 1];
                t->key[j] = t->key[j - 1];
                t->kind[j] = t->kind[j - 1];
            }
            t->bytes[i] = bytes;
            t->key[i] = key;
            t->kind[i] = PACK_KIND(v);
            break;
        }
    }
    return true;
}

/* " including contexts 518.00 MiB, modules 2.00 MiB, driver 4.00 MiB":
 * what this process holds that no allocation asked for, for the report. */
struct beside {
    char text[128];
};

static struct beside beside_allocations(int c)
{
    static const char *const name[COMMAND_PARTS] = {"contexts", "modules", "driver"};
    struct beside t = {""};
    int n = 0;
    for (int p = 0, said = 0; p < COMMAND_PARTS; p++) {
        uint64_t v = command_own_part(c, (enum command_part)p);
        if (v && n >= 0 && (size_t)n < sizeof t.text)
            n += snprintf(t.text + n, sizeof t.text - (size_t)n, "%s %s %s",
                          said++ ? "," : " including", name[p], format_size(v).text);
    }
    return t;
}

/* Refusals said on stderr: the first on a device in full, then at most one
 * a second, saying how many were refused since the last line, and at exit
 * how many came after it. A program that retries smaller and smaller
 * allocations, or a framework probing what fits, would otherwise print
 * hundreds of the same line. */
#define REFUSALS_EVERY_MS 1000
static struct {
    pthread_mutex_t mu;
    uint64_t last_ms[BUDGET_MAX_DEVICES];
    unsigned unsaid[BUDGET_MAX_DEVICES];
    bool said[BUDGET_MAX_DEVICES];
    /* As said, for the line at exit, when the driver may be gone. */
    char uuid[BUDGET_MAX_DEVICES][UUID_TEXT_SIZE];
} refusals = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* Whether to say this refusal on dev; *since: how many were not said
 * since the last line. */
static bool say_refusal(int dev, unsigned *since)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    uint64_t now = (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
    pthread_mutex_lock(&refusals.mu);
    bool say = !refusals.said[dev] || now - refusals.last_ms[dev] >= REFUSALS_EVERY_MS;
    *since = refusals.unsaid[dev];
    if (say) {
        refusals.said[dev] = true;
        refusals.last_ms[dev] = now;
        refusals.unsaid[dev] = 0;
    } else {
        refusals.unsaid[dev]++;
    }
    pthread_mutex_unlock(&refusals.mu);
    return say;
}

/* "GPU-5a1d...": the device as vram top and nvidia-smi name it beside
 * their own index, which may not be this program's. */
static const char *uuid_text_of(int dev, char *buf)
{
    if (real_device_uuid(dev, buf) != 0)
        snprintf(buf, UUID_TEXT_SIZE, "device-%d", dev);
    return buf;
}

__attribute__((destructor)) static void refusals_unsaid(void)
{
    if (log_level() < LOG_ERROR || pthread_mutex_trylock(&refusals.mu) != 0)
        return;
    for (int d = 0; d < BUDGET_MAX_DEVICES; d++)
        if (refusals.unsaid[d])
            vlog(LOG_ERROR, "device %d (%s): %u more allocation%s refused after the last line "
                 "above", d, refusals.uuid[d], refusals.unsaid[d],
                 refusals.unsaid[d] == 1 ? "" : "s");
    pthread_mutex_unlock(&refusals.mu);
}

void budget_report_oom(int dev, uint64_t requested, const char *call)
{
    unsigned since;
    if (log_level() < LOG_ERROR || dev < 0 || dev >= BUDGET_MAX_DEVICES ||
        !say_refusal(dev, &since))
        return;
    char uuid[UUID_TEXT_SIZE], more[96] = "";
    uuid_text_of(dev, uuid);
    pthread_mutex_lock(&refusals.mu);
    memcpy(refusals.uuid[dev], uuid, sizeof uuid);
    pthread_mutex_unlock(&refusals.mu);
    if (since)
        snprintf(more, sizeof more, " (and %u more refused since the last line)", since);
    struct top t = {.dev = dev};
    for (int s = 0; s < SHARDS; s++) {
        vram_lock_acquire(&shards[s].lock);
        addrmap_each(&shards[s].map, consider, &t);
        vram_lock_release(&shards[s].lock);
    }
    char holders[512] = "";
    size_t n = 0;
    for (int i = 0; i < 3 && t.bytes[i]; i++)
        n += (size_t)snprintf(holders + n, sizeof holders - n, "%s%s at 0x%llx (%s)",
                              i ? ", " : "; largest holders: ", format_size(t.bytes[i]).text,
                              (unsigned long long)t.key[i], kind_name[t.kind[i]]);
    int c = atomic_load(&b.cdev[dev]);
    if (b.join_error)
        vlog(LOG_ERROR, "%s refused on device %d (%s): this process could not join its "
             "command's budget (see above)%s", call, dev, uuid, more);
    else if (b.config_bad)
        vlog(LOG_ERROR, "%s refused on device %d (%s): the budget configuration is invalid (see "
             "above)%s", call, dev, uuid, more);
    else if (b.denied[dev])
        vlog(LOG_ERROR, "%s refused on device %d (%s): %s%s%s", call, dev, uuid,
             b.unbudgeted[dev] ? "" : "vramd granted no memory: ", b.denied[dev], more);
    else if (c < 0 || command_claim_error())
        vlog(LOG_ERROR, "%s refused on device %d (%s): %s%s", call, dev, uuid,
             c < 0 ? "the device has no budget accounting" : command_claim_error(), more);
    else if (command_mode() == COMMAND_SHARED) {
        uint64_t all = command_used(c), mine = command_own_used(c);
        int others = command_processes(c) - (mine != 0);
        char split[160] = "";
        if (others > 0)
            snprintf(split, sizeof split, ", %d other process%s %s", others,
                     others == 1 ? "" : "es", format_size(all > mine ? all - mine : 0).text);
        vlog(LOG_ERROR,
             "%s refused with CUDA_ERROR_OUT_OF_MEMORY: device %d (%s) budget %s, in use %s by "
             "the command (this process %s%s%s), requested %s%s%s",
             call, dev, uuid, format_size(b.limit[dev]).text, format_size(all).text,
             format_size(mine).text, beside_allocations(c).text, split,
             format_size(requested).text, holders, more);
    } else
        vlog(LOG_ERROR,
             "%s refused with CUDA_ERROR_OUT_OF_MEMORY: device %d (%s) budget %s, in use %s%s, "
             "requested %s%s%s",
             call, dev, uuid, format_size(b.limit[dev]).text,
             format_size(command_own_used(c)).text, beside_allocations(c).text,
             format_size(requested).text, holders, more);
}

unsigned budget_refusal(int dev, uint64_t *in_use)
{
    *in_use = held(dev);
    if (b.join_error)
        return RECORD_NO_ACCOUNTING;
    if (b.config_bad)
        return RECORD_BAD_SETTINGS;
    if (b.denied[dev])
        return b.unbudgeted[dev] ? RECORD_BAD_SETTINGS : RECORD_NOT_GRANTED;
    if (atomic_load(&b.cdev[dev]) < 0 || command_claim_error())
        return RECORD_NO_ACCOUNTING;
    return RECORD_OVER_BUDGET;
}

void budget_after_fork(void)
{
    /* What the command's state needs is done by command.c's own handler. */
    pthread_mutex_init(&b.resolve, NULL);
    pthread_mutex_init(&refusals.mu, NULL);
    /* The parent's to say, not ours; the child's first is said in full. */
    memset(refusals.unsaid, 0, sizeof refusals.unsaid);
    memset(refusals.said, 0, sizeof refusals.said);
    for (int s = 0; s < SHARDS; s++) {
        vram_lock_init(&shards[s].lock);
        addrmap_destroy(&shards[s].map);
    }
}
