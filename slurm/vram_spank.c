/* vram_spank.so: GPU memory budgets for Slurm jobs.
 *
 *   srun --gpu-mem=4G python train.py         each task held to 4 GiB per GPU
 *   sbatch --gpu-mem=0=8G,1=4G job.sh         per device, as the task numbers them
 *   srun --gres=shard:2 python train.py       2 × shard_mem, when plugstack.conf sets it
 *
 * plugstack.conf:
 *   required /usr/local/lib/slurm/vram_spank.so preload=/usr/local/lib/libvram-preload.so \
 *            shard_mem=6G socket=/run/vram/vramd.sock default=none
 *
 * Where each piece runs:
 *   - the option callback, in srun/sbatch/salloc (local and allocator
 *     contexts): the value is checked there, with vram's own size parser,
 *     so a bad one is refused at submission;
 *   - slurm_spank_init_post_opt in slurmstepd (remote, as root): with
 *     socket=, the step's grant (budget × local tasks, on each GPU Slurm gave
 *     it) is registered with vramd under JOBID.STEPID and the job's user;
 *     slurmstepd holds the connection for the step's life, so the grant
 *     ends with the step however it ends (exit, scancel, a killed stepd).
 *     A thread of the plugin watches the connection: when vramd goes away
 *     (a restart) it reconnects every second and re-registers the grant,
 *     which the restarted daemon has held for it; a grant vramd could not
 *     take when the step started is registered when it is back;
 *   - slurm_spank_task_init in each task (as the user, just before exec):
 *     the interposer and the budget are put in its environment exactly as
 *     `vram run --limit` does.
 */
#include <slurm/spank.h>

#include "../src/core/options.h"
#include "../src/ledger/client.h"
#include "../src/util/parse.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

SPANK_PLUGIN(vram, 1);

#define FORMS "a size such as 4G, 4GiB, 512MiB (K/M/G/T are powers of 1024), or per GPU as the task numbers them: 0=4G,1=2G"

static char gpu_mem[256];     /* as given, checked */
static uint64_t gpu_mem_max;  /* the largest per-device budget in it */
static char preload[1024];
static char socket_path[108];
static uint64_t shard_mem;
static char default_mem[64];  /* "" or "none": no budget without --gpu-mem */
/* slurmstepd's standing with vramd: the step's grant, and the thread that
 * keeps it across daemon restarts. */
static struct {
    pthread_mutex_t mu;
    int fd;          /* the connection that holds the grant; -1 while vramd is away */
    bool registered; /* vramd has granted it (on this or an earlier connection) */
    int wake[2];     /* slurm_spank_exit stops the thread through this pipe */
    bool thread;
    pthread_t tid;
    char name[64], devices[256];
    uid_t uid;
    gid_t gid;
    uint64_t bytes; /* per GPU: budget × local tasks */
} H = {.mu = PTHREAD_MUTEX_INITIALIZER, .fd = -1, .wake = {-1, -1}};
/* Why the step may not run, found in slurmstepd and said in each task,
 * whose stderr is the user's: slurmstepd's own errors reach only slurmd's
 * log, and srun would say no more than "Plugin initialization failed". */
static char refusal[1024];

/* Checks a --gpu-mem value with vram's parser; 0, or -1 with a message. */
static int check_gpu_mem(const char *value, uint64_t *max, char *err, size_t n)
{
    struct options o;
    options_clear(&o);
    char why[1024];
    if (!value || !*value) {
        snprintf(err, n, "--gpu-mem needs a value; accepted: %s", FORMS);
        return -1;
    }
    if (options_set(&o, "VRAM_MEMORY_LIMIT", value, why, sizeof why) != 0) {
        const char *reason = strchr(why, ':');
        snprintf(err, n, "--gpu-mem=%s: %.300s; accepted: %s", value,
                 reason ? reason + 2 : why, FORMS);
        return -1;
    }
    *max = o.limit_all.kind == LIMIT_BYTES ? o.limit_all.bytes : 0;
    for (int d = 0; d < OPT_MAX_DEVICES; d++)
        if (o.limit[d].kind == LIMIT_BYTES && o.limit[d].bytes > *max)
            *max = o.limit[d].bytes;
    return 0;
}

static int opt_gpu_mem(int val, const char *optarg, int remote)
{
    (void)val, (void)remote;
    char err[1500];
    uint64_t max;
    if (check_gpu_mem(optarg, &max, err, sizeof err) != 0) {
        slurm_error("vram: %s", err);
        return ESPANK_BAD_ARG;
    }
    snprintf(gpu_mem, sizeof gpu_mem, "%s", optarg);
    gpu_mem_max = max;
    return ESPANK_SUCCESS;
}

static struct spank_option options[] = {
    {"gpu-mem", "SIZE",
     "GPU memory budget of each task on each GPU it uses (vram): 4G, 512MiB, or per GPU 0=4G,1=2G",
     1, 0, opt_gpu_mem},
    SPANK_OPTIONS_TABLE_END,
};

/* JOBID.STEP, as Slurm writes steps: 12.0, 12.batch. */
static void step_name(spank_t sp, char *out, size_t n)
{
    uint32_t job = 0, step = 0;
    spank_get_item(sp, S_JOB_ID, &job);
    spank_get_item(sp, S_JOB_STEPID, &step);
    switch (step) {
    case 0xfffffffbu: snprintf(out, n, "%u.batch", job); break;
    case 0xfffffffcu: snprintf(out, n, "%u.extern", job); break;
    case 0xfffffffau: snprintf(out, n, "%u.interactive", job); break;
    default: snprintf(out, n, "%u.%u", job, step);
    }
}

static int plugin_args(int ac, char **av)
{
    for (int i = 0; i < ac; i++) {
        const char *a = av[i];
        parse_why why;
        if (strncmp(a, "preload=", 8) == 0) {
            snprintf(preload, sizeof preload, "%s", a + 8);
        } else if (strncmp(a, "socket=", 7) == 0) {
            snprintf(socket_path, sizeof socket_path, "%s", a + 7);
        } else if (strncmp(a, "shard_mem=", 10) == 0) {
            if (parse_size(a + 10, &shard_mem, &why) != 0) {
                slurm_error("vram: plugstack.conf: shard_mem=\"%s\": %s; accepted: " PARSE_SIZE_FORMS,
                            a + 10, why.text);
                return -1;
            }
        } else if (strncmp(a, "default=", 8) == 0) {
            uint64_t max;
            char err[1500];
            if (strcmp(a + 8, "none") != 0 && check_gpu_mem(a + 8, &max, err, sizeof err) != 0) {
                slurm_error("vram: plugstack.conf: default=: %s (or none)", err);
                return -1;
            }
            snprintf(default_mem, sizeof default_mem, "%s", a + 8);
        } else {
            slurm_error("vram: plugstack.conf: unknown argument \"%s\"; accepted: preload=PATH, "
                        "socket=PATH, shard_mem=SIZE, default=SIZE|none", a);
            return -1;
        }
    }
    return 0;
}

int slurm_spank_init(spank_t sp, int ac, char **av)
{
    /* Registered in every context: sbatch and salloc ignore a static
     * spank_options table. */
    for (struct spank_option *o = options; o->name; o++)
        if (spank_option_register(sp, o) != ESPANK_SUCCESS)
            return -1;
    return plugin_args(ac, av);
}

/* The budget of this step's tasks: --gpu-mem, else shards × shard_mem,
 * else the plugstack default. "" when none applies. Refuses --gpu-mem
 * beyond what the shards allow. */
static int step_budget(spank_t sp, char *value, size_t n, uint64_t *max)
{
    char shards[32] = "";
    uint64_t nshards = 0;
    parse_why why;
    if (shard_mem && spank_getenv(sp, "SLURM_SHARDS_ON_NODE", shards, sizeof shards) == ESPANK_SUCCESS)
        parse_uint(shards, 1u << 20, &nshards, &why);
    value[0] = 0;
    *max = 0;
    if (gpu_mem[0]) {
        if (nshards && gpu_mem_max > nshards * shard_mem) {
            snprintf(refusal, sizeof refusal,
                     "--gpu-mem=%s is more than the %llu shard(s) of this job allow "
                     "(%llu x %s = %s); ask for more shards or less memory",
                     gpu_mem, (unsigned long long)nshards, (unsigned long long)nshards,
                     format_size(shard_mem).text, format_size(nshards * shard_mem).text);
            return -1;
        }
        snprintf(value, n, "%s", gpu_mem);
        *max = gpu_mem_max;
    } else if (nshards) {
        *max = nshards * shard_mem;
        snprintf(value, n, "%llu", (unsigned long long)*max);
    } else if (default_mem[0] && strcmp(default_mem, "none") != 0) {
        char err[1500];
        check_gpu_mem(default_mem, max, err, sizeof err);
        snprintf(value, n, "%s", default_mem);
    }
    return 0;
}

/* Registers H's grant on a new connection, GPU by GPU (restore: it was
 * granted before a vramd restart, which held it). 0 with H.fd set; 1 if
 * vramd does not answer; -1 if it refused (the reason in `refusal`). */
static int register_on_new_connection(bool restore)
{
    int fd = ledger_connect(socket_path);
    if (fd < 0)
        return 1;
    char devices[256], num[24];
    snprintf(devices, sizeof devices, "%s", H.devices);
    char *save = NULL;
    for (char *d = strtok_r(devices, ",", &save); d; d = strtok_r(NULL, ",", &save)) {
        struct proto_writer w;
        struct proto_msg m;
        char err[256];
        proto_begin(&w, VERB_JOB);
        proto_add(&w, "job", H.name);
        snprintf(num, sizeof num, "%u", (unsigned)H.uid);
        proto_add(&w, "uid", num);
        snprintf(num, sizeof num, "%u", (unsigned)H.gid);
        proto_add(&w, "gid", num);
        proto_add(&w, "index", d);
        proto_add_u64(&w, "bytes", H.bytes);
        if (restore)
            proto_add_u64(&w, "restore", H.bytes);
        if (ledger_send(fd, &w) != 0 || ledger_recv(fd, &m, 10000, err, sizeof err) != 0) {
            close(fd);
            return 1;
        }
        if (m.verb != VERB_GRANT) {
            const char *text = proto_get(&m, "text");
            snprintf(refusal, sizeof refusal, "job %s: vramd refused %s on GPU %s: %s", H.name,
                     format_size(H.bytes).text, d, text ? text : "");
            close(fd);
            return -1;
        }
    }
    H.fd = fd; /* close-on-exec: the tasks do not inherit it */
    H.registered = true;
    return 0;
}

/* In slurmstepd, for the step's life: the daemon sends nothing unasked, so
 * a connection that becomes readable has been closed: vramd went away.
 * Then every second: connect again and re-register what was granted (or
 * register, if vramd was away when the step began). */
static void *holder(void *arg)
{
    (void)arg;
    for (;;) {
        pthread_mutex_lock(&H.mu);
        int fd = H.fd;
        pthread_mutex_unlock(&H.mu);
        struct pollfd p[2] = {{H.wake[0], POLLIN, 0}, {fd, POLLIN | POLLRDHUP, 0}};
        int r = poll(p, fd >= 0 ? 2 : 1, fd >= 0 ? -1 : 1000);
        if (r < 0 && errno != EINTR)
            return NULL;
        if (p[0].revents)
            return NULL; /* the step is over */
        pthread_mutex_lock(&H.mu);
        if (H.fd >= 0 && p[1].revents) {
            close(H.fd);
            H.fd = -1;
            slurm_info("vram: job %s: vramd went away; re-registering when it is back", H.name);
        } else if (H.fd < 0 && r == 0) {
            bool restore = H.registered;
            int rc = register_on_new_connection(restore);
            if (rc == 0)
                slurm_info("vram: job %s: %s %s per GPU with vramd", H.name,
                           restore ? "re-registered" : "registered", format_size(H.bytes).text);
            else if (rc < 0)
                slurm_error("vram: %s (the tasks keep their own budgets)", refusal);
        }
        pthread_mutex_unlock(&H.mu);
    }
}

static void start_holder(void)
{
    if (pipe2(H.wake, O_CLOEXEC) != 0)
        return;
    /* Signals are slurmstepd's business, not this thread's. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    H.thread = pthread_create(&H.tid, NULL, holder, NULL) == 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* slurmstepd, as root: the step's grant, held by this connection. */
static int register_grant(spank_t sp, uint64_t per_task)
{
    uint32_t tasks = 1;
    uid_t uid = 0;
    gid_t gid = 0;
    step_name(sp, H.name, sizeof H.name);
    if (spank_get_item(sp, S_JOB_UID, &uid) != ESPANK_SUCCESS ||
        spank_get_item(sp, S_JOB_GID, &gid) != ESPANK_SUCCESS)
        return -1;
    spank_get_item(sp, S_JOB_LOCAL_TASK_COUNT, &tasks);
    if (spank_getenv(sp, "CUDA_VISIBLE_DEVICES", H.devices, sizeof H.devices) != ESPANK_SUCCESS ||
        !H.devices[0])
        snprintf(H.devices, sizeof H.devices, "0");
    H.uid = uid;
    H.gid = gid;
    H.bytes = per_task * tasks;
    pthread_mutex_lock(&H.mu);
    int rc = register_on_new_connection(false);
    pthread_mutex_unlock(&H.mu);
    if (rc < 0)
        return -1;
    if (rc > 0)
        slurm_info("vram: job %s: vramd at %s does not answer (%s); tasks keep their own "
                   "budgets, and the grant is registered when vramd is back",
                   H.name, socket_path, strerror(errno));
    else
        slurm_info("vram: job %s: %s per task × %u task(s) registered with vramd", H.name,
                   format_size(per_task).text, tasks);
    start_holder();
    return 0;
}

int slurm_spank_init_post_opt(spank_t sp, int ac, char **av)
{
    (void)ac, (void)av;
    if (spank_context() != S_CTX_REMOTE || !socket_path[0])
        return 0;
    char value[256];
    uint64_t max;
    /* A refusal is said by each task (below); the step goes on to launch them. */
    if (step_budget(sp, value, sizeof value, &max) == 0 && value[0] &&
        register_grant(sp, max) != 0)
        slurm_error("vram: %s", refusal);
    else if (refusal[0])
        slurm_error("vram: %s", refusal);
    return 0;
}

/* In the task, as its user, just before exec: what `vram run` sets. */
int slurm_spank_task_init(spank_t sp, int ac, char **av)
{
    (void)ac, (void)av;
    char value[256];
    uint64_t max;
    if (refusal[0] || step_budget(sp, value, sizeof value, &max) != 0) {
        fprintf(stderr, "vram: %s; the task was not started\n", refusal);
        return -1;
    }
    if (!value[0])
        return 0;
    if (!preload[0] || access(preload, R_OK) != 0) {
        fprintf(stderr, "vram: the interposer \"%s\" cannot be read; set preload=PATH in "
                "plugstack.conf. The task was not started without its budget.\n", preload);
        return -1;
    }
    char old[4096] = "", joined[8192];
    if (spank_getenv(sp, "LD_PRELOAD", old, sizeof old) == ESPANK_SUCCESS && old[0])
        snprintf(joined, sizeof joined, "%s:%s", preload, old);
    else
        snprintf(joined, sizeof joined, "%s", preload);
    spank_setenv(sp, "LD_PRELOAD", joined, 1);
    spank_setenv(sp, "VRAM_MEMORY_LIMIT", value, 1);
    spank_unsetenv(sp, "VRAM_MEMORY_FRACTION");
    spank_setenv(sp, "VRAM_LOG", "error", 0);
    if (socket_path[0]) {
        char name[64];
        step_name(sp, name, sizeof name);
        spank_setenv(sp, "VRAM_DAEMON", socket_path, 1);
        spank_setenv(sp, "VRAM_JOB", name, 1);
    }
    return 0;
}

int slurm_spank_exit(spank_t sp, int ac, char **av)
{
    (void)sp, (void)ac, (void)av;
    if (H.thread) {
        if (write(H.wake[1], "x", 1) != 1)
            pthread_cancel(H.tid);
        pthread_join(H.tid, NULL);
        H.thread = false;
    }
    if (H.fd >= 0) { /* the step is over: its grant ends */
        close(H.fd);
        H.fd = -1;
    }
    return 0;
}
