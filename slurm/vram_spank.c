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
 *   - slurm_spank_init_post_opt in slurmstepd (remote, as root): each
 *     local task gets a command state of its own (src/command/command.h,
 *     handed to the user), so that the task and every process it starts
 *     share its budget on each GPU, as under `vram run`. With socket=, the
 *     step is one job of vramd's ledger, as a `vram run` command is
 *     (src/client/job.h): its grant (budget × local tasks, on each GPU
 *     Slurm gave it) is registered under JOBID.STEPID for the job's user,
 *     and put in the tasks' states, so their processes never ask vramd
 *     themselves. slurmstepd holds the connection for the step's life, so
 *     the grant ends with the step however it ends (exit, scancel, a killed
 *     stepd); a thread reports what the tasks' processes hold (vram top
 *     shows the step with its processes) and re-registers the grant with a
 *     vramd that restarted, which held it meanwhile. A vramd that does not
 *     answer when the step starts leaves its tasks' processes to ask it
 *     each for themselves, as without the plugin;
 *   - slurm_spank_task_init_privileged in each task (still root, before
 *     exec): where vramd has the driver hold the step's grant
 *     (src/daemon/driver_limits.h), the task asks to be put in the step's
 *     cgroup, so that the driver counts everything its processes hold;
 *   - slurm_spank_task_init in each task (as the user, just before exec):
 *     the interposer, the budget and the task's state are put in its
 *     environment exactly as `vram run --limit` does;
 *   - slurm_spank_task_exit in slurmstepd: when the node's last task of the
 *     step has ended, each task's peak per GPU is said on slurmstepd's
 *     stderr, which Slurm connects to the first task's: the job's output.
 */
#include <slurm/spank.h>

#include "../src/core/options.h"
#include "../src/client/client.h"
#include "../src/client/job.h"
#include "../src/command/command_state.h"
#include "../src/util/parse.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

SPANK_PLUGIN(vram, 1);

#define FORMS "a size such as 4G, 4GiB, 512MiB (K/M/G/T are powers of 1024), or per GPU as the task numbers them: 0=4G,1=2G"

static char gpu_mem[256];     /* as given, checked */
static uint64_t gpu_mem_max;  /* the largest per-device budget in it */
static char preload[1024];
static char socket_path[108];
static uint64_t shard_mem;
static char default_mem[64];  /* "" or "none": no budget without --gpu-mem */
/* In slurmstepd: the step's tasks' command states (one per local task),
 * and the step's standing with vramd. */
static struct command_owner *tasks;
static uint32_t ntasks, ended;
static bool held; /* the step is a job of vramd's: J holds its grant */
static struct job J;
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

/* The step's GPUs, as its tasks number them, in J (with what each task
 * may hold there); 0, or -1 with the refusal. */
static int step_gpus(spank_t sp, const char *value)
{
    char list[256], err[900];
    struct options o, none;
    options_clear(&o);
    options_clear(&none);
    if (options_set(&o, "VRAM_MEMORY_LIMIT", value, err, sizeof err) != 0) {
        snprintf(refusal, sizeof refusal, "%s", err);
        return -1;
    }
    /* Slurm sets CUDA_VISIBLE_DEVICES from the device files of the GPUs it
     * gave the step; where it could not (a gres without File=, or files
     * the node lacks), the tasks see every GPU of the node, and
     * SLURM_GPUS_ON_NODE still says how many the step has: GPUs 0..N-1. */
    if (spank_getenv(sp, "CUDA_VISIBLE_DEVICES", list, sizeof list) != ESPANK_SUCCESS || !list[0]) {
        char on_node[32];
        uint64_t n = 0;
        parse_why why;
        if (spank_getenv(sp, "SLURM_GPUS_ON_NODE", on_node, sizeof on_node) != ESPANK_SUCCESS ||
            parse_uint(on_node, JOB_MAX_DEVICES, &n, &why) != 0 || n == 0)
            n = 1;
        size_t used = 0;
        list[0] = 0;
        for (uint64_t i = 0; i < n && used < sizeof list; i++)
            used += (size_t)snprintf(list + used, sizeof list - used, "%s%llu", i ? "," : "",
                                     (unsigned long long)i);
    }
    int gpus = 1;
    for (const char *c = strchr(list, ','); c; c = strchr(c + 1, ','))
        gpus++;
    char *save = NULL;
    int ordinal = 0;
    for (char *d = strtok_r(list, ",", &save); d && J.ndev < JOB_MAX_DEVICES;
         d = strtok_r(NULL, ",", &save), ordinal++) {
        uint64_t index;
        parse_why why;
        const struct limit_setting *l = options_limit(&none, &o, ordinal);
        /* A GPU of the step that --gpu-mem gives no budget (1=2G on two
         * GPUs) would be unusable to its tasks (a step's grants are asked
         * for sizes: vramd has no default for them): refused, saying so,
         * as vram run refuses it without vramd. */
        if (l->kind != LIMIT_BYTES) {
            snprintf(refusal, sizeof refusal, "--gpu-mem=%.100s gives GPU %.20s (the step's device "
                     "%d) no budget, and the step has %d GPU%s: give each a budget (one for all: "
                     "SIZE; or one per GPU: 0=SIZE,1=SIZE)", value, d, ordinal, gpus,
                     gpus == 1 ? "" : "s");
            return -1;
        }
        if (parse_uint(d, 1u << 20, &index, &why) != 0) {
            snprintf(refusal, sizeof refusal, "CUDA_VISIBLE_DEVICES=%s: GPU \"%s\" is not an "
                     "index (%s); vramd is asked for GPUs by index", list, d, why.text);
            return -1;
        }
        struct job_device *jd = &J.dev[J.ndev++];
        jd->index = (int)index;
        jd->ordinal = ordinal;
        jd->ask = l->bytes * ntasks;
    }
    return 0;
}

/* slurmstepd, as root: the step's grant, held by this connection. 0 (with
 * `held` when vramd took it); -1 if vramd refused it. */
static int register_grant(spank_t sp, const char *value)
{
    job_init(&J);
    snprintf(J.socket, sizeof J.socket, "%s", socket_path);
    J.for_user = true;
    step_name(sp, J.name, sizeof J.name);
    snprintf(J.cmd, sizeof J.cmd, "job");
    if (spank_get_item(sp, S_JOB_UID, &J.uid) != ESPANK_SUCCESS ||
        spank_get_item(sp, S_JOB_GID, &J.gid) != ESPANK_SUCCESS) {
        snprintf(refusal, sizeof refusal, "job %s: Slurm did not say whose it is", J.name);
        return -1;
    }
    if (step_gpus(sp, value) != 0)
        return -1;
    char why[700];
    if (job_connect(&J, why, sizeof why) != 0) {
        slurm_info("vram: job %s: vramd at %s does not answer (%s); the tasks' processes ask it "
                   "for themselves", J.name, socket_path, why);
        return 0;
    }
    for (int i = 0; i < J.ndev; i++) {
        int r = job_ask(&J, i, 0, NULL, NULL, why, sizeof why);
        if (r <= 0) {
            snprintf(refusal, sizeof refusal, "job %s: vramd refused %s on GPU %d: %s", J.name,
                     format_size(J.dev[i].ask).text, J.dev[i].index,
                     r < 0 ? "it stopped answering" : why);
            job_end(&J);
            return -1;
        }
    }
    held = true;
    slurm_info("vram: job %s: %s per GPU for %u task(s) registered with vramd", J.name, value,
               ntasks);
    return 0;
}

/* One command state per local task: what the task's processes hold,
 * shared by all of them, and the peak at the end. The states are the
 * user's (their processes must open them), created here so that this
 * process can read them after the tasks end. */
static int task_states(spank_t sp, const char *value)
{
    uid_t uid;
    gid_t gid;
    if (spank_get_item(sp, S_JOB_UID, &uid) != ESPANK_SUCCESS ||
        spank_get_item(sp, S_JOB_GID, &gid) != ESPANK_SUCCESS)
        return -1;
    tasks = calloc(ntasks, sizeof *tasks);
    if (!tasks)
        return -1;
    char why[512];
    for (uint32_t t = 0; t < ntasks; t++) {
        struct command_owner *o = &tasks[t];
        o->fd = -1;
        if (command_create(o, held || !socket_path[0] ? COMMAND_SHARED : COMMAND_PER_PROCESS,
                           "VRAM_MEMORY_LIMIT", value, NULL, 0, why, sizeof why) != 0 ||
            fchown(o->fd, uid, gid) != 0) {
            snprintf(refusal, sizeof refusal, "%s", why);
            return -1;
        }
        /* With vramd, the grant is the tasks' budget: per task, on each GPU. */
        for (int i = 0; held && i < J.ndev; i++)
            command_grant(o, J.dev[i].uuid, J.dev[i].ordinal, J.dev[i].ask / ntasks);
        if (held)
            job_watch(&J, o->shared, o->fd);
    }
    return 0;
}

int slurm_spank_init_post_opt(spank_t sp, int ac, char **av)
{
    (void)ac, (void)av;
    if (spank_context() != S_CTX_REMOTE)
        return 0;
    char value[256];
    uint64_t max;
    /* A refusal is said by each task (below); the step goes on to launch them. */
    if (step_budget(sp, value, sizeof value, &max) != 0 || !value[0])
        return 0;
    spank_get_item(sp, S_JOB_LOCAL_TASK_COUNT, &ntasks);
    if (!ntasks)
        ntasks = 1;
    if ((socket_path[0] && register_grant(sp, value) != 0) || task_states(sp, value) != 0) {
        slurm_error("vram: %s", refusal[0] ? refusal : "cannot set up the tasks' budgets");
        if (!refusal[0])
            snprintf(refusal, sizeof refusal, "cannot set up the tasks' budgets");
        return 0;
    }
    if (held)
        job_start(&J);
    return 0;
}

/* The cgroup Slurm made for this step, if the task is in it or below it
 * (cgroup/v2 with task/cgroup: .../job_J/step_S/user/task_T; S a number,
 * batch, extern or interactive), as /proc/self/cgroup writes it; false
 * when there is none (task/none: the tasks run in slurmstepd's cgroup). */
static bool step_cgroup(const char *name, char *out, size_t n)
{
    char line[1024], want[96];
    const char *dot = strchr(name, '.');
    if (!dot)
        return false;
    snprintf(want, sizeof want, "/job_%.*s/step_%s", (int)(dot - name), name, dot + 1);
    FILE *f = fopen("/proc/self/cgroup", "re");
    bool found = false;
    while (f && !found && fgets(line, sizeof line, f)) {
        if (!strchr(line, '\n')) /* cut short: it could name another step */
            break;
        line[strcspn(line, "\n")] = 0;
        bool plain = true; /* a protocol value: printable, no space */
        for (const char *c = line; *c; c++)
            plain &= *c > ' ' && *c < 0x7f;
        if (strncmp(line, "0::/", 4) != 0 || !plain)
            continue;
        /* The step's part: followed by its own children, or the end. */
        for (char *p = strstr(line + 3, want); p && !found; p = strstr(p + 1, want)) {
            char *end = p + strlen(want);
            if (*end == '/' || !*end) {
                *end = 0;
                found = (size_t)snprintf(out, n, "%s", line + 3) < n;
            }
        }
    }
    if (f)
        fclose(f);
    return found;
}

/* In the task, still root, before exec: where vramd has the driver hold
 * the step's grant (it said so with the grant), Slurm's step cgroup, which
 * the task is in, is named for the driver to hold; without one, the task
 * joins a cgroup vramd makes for the step below the one it is in. Either
 * way the task never leaves a cgroup Slurm put it in (its device filter,
 * memory and CPU limits still hold). vramd acts on the process that asks
 * (the kernel says which), so the task asks for itself. A task that
 * cannot be placed runs held by the interposer alone, as on a driver
 * without limits; one whose limit the driver refuses (its table full) is
 * not started: vramd refused the step's grant as the driver would not hold
 * it. */
int slurm_spank_task_init_privileged(spank_t sp, int ac, char **av)
{
    (void)sp, (void)ac, (void)av;
    char why[1024], cgroup[1024];
    bool by_driver = false;
    for (int i = 0; held && i < J.ndev; i++)
        by_driver |= J.dev[i].by_driver;
    int r = by_driver ? job_place(&J, step_cgroup(J.name, cgroup, sizeof cgroup) ? cgroup : NULL,
                                  why, sizeof why)
                      : 0;
    if (r == -2) {
        fprintf(stderr, "vram: job %s: %s; the task was not started\n", J.name, why);
        return -1;
    }
    if (r < 0)
        fprintf(stderr, "vram: job %s: the task is not in the step's cgroup (%s); the interposer "
                "alone holds it to its budget\n", J.name, why);
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
    /* The task's state: its descriptor is inherited through the exec, and
     * named, as vram run names its own, for the task's processes. */
    int id = -1;
    if (tasks && spank_get_item(sp, S_TASK_ID, &id) == ESPANK_SUCCESS && id >= 0 &&
        (uint32_t)id < ntasks) {
        char idhex[33], env[128];
        command_id_text(tasks[id].shared->id, idhex);
        snprintf(env, sizeof env, "%s:%d/%d", idhex, (int)getpid(), tasks[id].fd);
        if (fcntl(tasks[id].fd, F_SETFD, 0) != 0) {
            fprintf(stderr, "vram: cannot hand the task its budget's state: %s; the task was not "
                    "started\n", strerror(errno));
            return -1;
        }
        spank_setenv(sp, COMMAND_ENV, env, 1);
    }
    return 0;
}

/* In slurmstepd as each task starts: named to vramd as the step's own
 * before it runs the program. */
int slurm_spank_task_post_fork(spank_t sp, int ac, char **av)
{
    (void)ac, (void)av;
    pid_t pid;
    if (held && spank_get_item(sp, S_TASK_PID, &pid) == ESPANK_SUCCESS)
        job_member(&J, pid);
    return 0;
}

/* In slurmstepd as each task ends: once the node's last one has, what each
 * held at most, on slurmstepd's stderr, which is the first task's (the
 * job's output). */
int slurm_spank_task_exit(spank_t sp, int ac, char **av)
{
    (void)sp, (void)ac, (void)av;
    if (!tasks || ++ended < ntasks)
        return 0;
    struct command_summary *s = malloc(sizeof *s);
    if (!s)
        return 0;
    for (uint32_t t = 0; t < ntasks; t++) {
        command_summarize(&tasks[t], s);
        for (int i = 0; i < s->ndevices; i++) {
            char line[512], task[32] = "";
            command_peak_line(s, i, line, sizeof line);
            if (ntasks > 1)
                snprintf(task, sizeof task, "task %u: ", t);
            fprintf(stderr, "vram: %s%s\n", task, line);
        }
    }
    fflush(stderr);
    free(s);
    return 0;
}

int slurm_spank_exit(spank_t sp, int ac, char **av)
{
    (void)sp, (void)ac, (void)av;
    if (held) { /* the step is over: its grant ends */
        job_end(&J);
        held = false;
    }
    return 0;
}
