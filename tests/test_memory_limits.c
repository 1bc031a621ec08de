/* test_memory_limits: the simulated R615 driver's per-cgroup memory limits.
 *
 * NVML's nvmlDeviceSetMemoryLimits_v1 (driver R615) gives a cgroup a hard
 * limit on a device that the driver itself enforces, on every byte the
 * cgroup's processes hold there. What vramd and the Slurm plugin rely on:
 *   - under the default profile (driver 580) Set answers
 *     NVML_ERROR_FUNCTION_NOT_FOUND: "absent";
 *   - with VRAM_SIM_DRIVER=615, root sets soft 512 MiB / hard 1 GiB on
 *     device 0 for a cgroup; Get gives them back, and its currentUsed is
 *     what the cgroup's process (in a cgroup below it) holds, its context
 *     included; the state file says it in the format limits.h gives;
 *   - that process, with no interposer (LD_PRELOAD unset), sees a 1 GiB
 *     device in cuMemGetInfo and nvmlDeviceGetMemoryInfo_v2, allocates up
 *     to the limit exactly and gets CUDA_ERROR_OUT_OF_MEMORY past it, also
 *     for the driver's own memory (a kernel's code at its first launch);
 *   - a process outside the cgroup allocates beyond 1 GiB and sees the
 *     device's 8 GiB;
 *   - two processes of the cgroup asking at once for its last bytes: one
 *     gets them, never both;
 *   - clearing (soft 0, hard MAX) lifts the limit; removing the cgroup
 *     clears it too (a cgroup made again at its path has none);
 *   - a user other than root gets NVML_ERROR_NO_PERMISSION, a path that is
 *     no cgroup INVALID_ARGUMENT or NOT_FOUND;
 *   - a VRAM_SIM_DRIVER the simulator does not model is refused by both
 *     libraries, naming the variable, its value and what is accepted.
 * Before the simulator had these functions, libnvidia-ml had no such
 * symbol and the test failed at its dlsym (and cuMemAlloc past the limit
 * succeeded).
 *
 * The cgroups: the test mounts cgroup2 privately, in a folder under
 * TMPDIR and in a mount namespace of its own (unshare(CLONE_NEWNS)), so
 * that it runs where cgroup2 is mounted nowhere and the nameSpace it
 * passes is not the path the driver reads the hierarchy through (here,
 * /sys/fs/cgroup/unified). The cgroups it makes there are the machine's:
 * vram-limits-PID and its child job, removed at exit (also through a
 * failed CHECK) after the process it put there is killed.
 * Needs root and cgroup2: SKIPs (77) otherwise.
 */
#include "../src/cuda/cuda_prototypes.h"
#include "../src/cuda/granularity.h"
#include "../src/cuda/nvml_limits.h"
#include "check.h"
#include "nvml_test.h"

#include <errno.h>
#include <grp.h>
#include <inttypes.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/wait.h>

#define LIMIT (1 * GiB)
#define SOFT (512 * MiB)
#define DEVICE (8 * GiB)
#define STEP (2 * MiB) /* the device's granularity: what any allocation costs at least */
#define RACE_LIMIT (2 * GiB) /* two contexts and one RACE, not two */
#define RACE (600 * MiB)

static PFN_nvmlDeviceSetMemoryLimits_v1 set_limits;
static PFN_nvmlDeviceGetMemoryLimits_v1 get_limits;
static PFN_nvmlDeviceGetMemoryInfo_v2 memory_v2;
static nvmlDevice_t dev0;

static void nvml_up(void)
{
    set_limits = NVML_FUNCTION(nvmlDeviceSetMemoryLimits_v1);
    get_limits = NVML_FUNCTION(nvmlDeviceGetMemoryLimits_v1);
    memory_v2 = NVML_FUNCTION(nvmlDeviceGetMemoryInfo_v2);
    dev0 = nvml_test_device(0);
}

static nvmlReturn_t set(const char *ns, uint64_t soft, uint64_t hard)
{
    nvmlSetMemoryLimits_v1_t l = {ns, soft, hard};
    return set_limits(dev0, &l);
}

static nvmlGetMemoryLimits_v1_t get(const char *ns)
{
    nvmlGetMemoryLimits_v1_t l = {.nameSpace = ns};
    CHECK(get_limits(dev0, &l) == NVML_SUCCESS);
    return l;
}

static void version_is(const char *want)
{
    char text[80];
    CHECK(NVML_FUNCTION(nvmlSystemGetDriverVersion)(text, sizeof text) == NVML_SUCCESS);
    CHECK_CONTAINS(text, want);
}

/* --------------------------------------------------------- the cgroups */

static char mnt[4096], group[4200], job[4300];
/* A process this test runs in cgroup `job`. */
struct member {
    pid_t pid;
    FILE *from;
    int to;
};
static struct member members[3];
static pid_t owner;

static void clean_up(void)
{
    if (getpid() != owner)
        return;
    for (int i = 0; i < 3; i++)
        if (members[i].pid > 0) {
            kill(members[i].pid, SIGKILL);
            waitpid(members[i].pid, NULL, 0);
        }
    if (job[0])
        rmdir(job);
    if (group[0])
        rmdir(group);
    if (mnt[0]) {
        umount2(mnt, MNT_DETACH);
        rmdir(mnt);
    }
}

static void skip(const char *why)
{
    printf("test_memory_limits: SKIP: %s\n", why);
    exit(77);
}

static void make_cgroups(void)
{
    char why[4600];
    if (unshare(CLONE_NEWNS) != 0) {
        snprintf(why, sizeof why, "needs a mount namespace of its own: %s", strerror(errno));
        skip(why);
    }
    CHECK(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0);
    const char *tmp = getenv("TMPDIR");
    snprintf(mnt, sizeof mnt, "%s/vram-cgroup2.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    CHECK(mkdtemp(mnt) != NULL);
    if (mount("cgroup2", mnt, "cgroup2", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) != 0) {
        snprintf(why, sizeof why, "needs cgroup v2 (mount -t cgroup2: %s)", strerror(errno));
        skip(why);
    }
    snprintf(group, sizeof group, "%s/vram-limits-%d", mnt, (int)getpid());
    if (mkdir(group, 0755) != 0) {
        snprintf(why, sizeof why, "cannot make a cgroup (mkdir %s: %s)", group, strerror(errno));
        group[0] = 0;
        skip(why);
    }
    snprintf(job, sizeof job, "%s/job", group);
    CHECK(mkdir(job, 0755) == 0);
}

/* ------------------------------------------------ the process inside */

/* A line from a member into line; if it ended, its status decides. */
static void hear(struct member *m, const char *want, char line[256])
{
    if (!fgets(line, 256, m->from)) {
        int status;
        CHECK(waitpid(m->pid, &status, 0) == m->pid);
        m->pid = -1;
        if (WIFEXITED(status) && WEXITSTATUS(status) == 77)
            skip("cannot move a process into a cgroup of the private cgroup2 mount");
        fprintf(stderr, "the process inside the cgroup ended (status %d) before \"%s\"\n",
                status, want);
        exit(1);
    }
    CHECK_CONTAINS(line, want);
}

static void tell(struct member *m, const char *what)
{
    CHECK(write(m->to, what, strlen(what)) == (ssize_t)strlen(what));
}

/* Runs this program again as `role` in cgroup `job`, with no interposer. */
static void start_inside(struct member *m, const char *role)
{
    int up[2], down[2];
    CHECK(pipe(up) == 0 && pipe(down) == 0);
    m->pid = fork();
    CHECK(m->pid >= 0);
    if (m->pid == 0) {
        char procs[4400];
        snprintf(procs, sizeof procs, "%s/cgroup.procs", job);
        FILE *f = fopen(procs, "w");
        if (!f || fputs("0\n", f) == EOF || fclose(f) != 0)
            _exit(77);
        dup2(down[0], 0);
        dup2(up[1], 1);
        close(up[0]), close(up[1]), close(down[0]), close(down[1]);
        unsetenv("LD_PRELOAD");
        setenv("CUDA_MODULE_LOADING", "LAZY", 1);
        setenv("TEST_MEMORY_LIMITS_AS", role, 1);
        execl("/proc/self/exe", "test_memory_limits", (char *)NULL);
        _exit(127);
    }
    close(up[1]);
    close(down[0]);
    m->from = fdopen(up[0], "r");
    m->to = down[1];
    CHECK(m->from != NULL);
}

static void finish(struct member *m)
{
    int status;
    tell(m, "end\n");
    CHECK(waitpid(m->pid, &status, 0) == m->pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    m->pid = -1;
    fclose(m->from);
    close(m->to);
}

static void wait_line(const char *want)
{
    char line[256];
    CHECK(fgets(line, sizeof line, stdin) != NULL);
    CHECK_CONTAINS(line, want);
}

/* Device 0's primary context, current. */
static void context_up(void)
{
    CUcontext ctx;
    CHECK(cuInit(0) == CUDA_SUCCESS);
    CHECK(cuDevicePrimaryCtxRetain(&ctx, 0) == CUDA_SUCCESS);
    CHECK(cuCtxPushCurrent_v2(ctx) == CUDA_SUCCESS);
}

static void nvml_total_is(uint64_t total, uint64_t used)
{
    nvmlMemory_v2_t m = {.version = nvmlMemory_v2};
    CHECK(memory_v2(dev0, &m) == NVML_SUCCESS);
    CHECK(m.total == total);
    CHECK(m.used == used);
    CHECK(m.used + m.free + m.reserved == m.total);
}

/* A module of one tiny kernel, "k": its image on the device, and 2 MiB of
 * code at its first launch (sim/config.h, SIM_CODE_STEP). */
static const char ptx[] = "//\n.version 8.0\n.target sm_90\n.address_size 64\n\n"
                          ".visible .entry k(\n\t.param .u64 p\n)\n{\n\tret;\n}\n";

static CUresult launch(CUfunction f)
{
    return cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL);
}

/* The process in the cgroup: a 1 GiB device, full at exactly 1 GiB. */
static int run_inside(void)
{
    CUdeviceptr a, b, c;
    size_t free_b, total;
    CHECK(getenv("LD_PRELOAD") == NULL);
    nvml_up();
    context_up();
    CHECK(cuMemGetInfo_v2(&free_b, &total) == CUDA_SUCCESS);
    CHECK(total == LIMIT);
    uint64_t context = LIMIT - free_b; /* what the cgroup holds: this context */
    CHECK(context > 0 && context < LIMIT && free_b % STEP == 0);
    nvml_total_is(LIMIT, context);
    size_t device_total;
    CHECK(cuDeviceTotalMem_v2(&device_total, 0) == CUDA_SUCCESS);
    CHECK(device_total == DEVICE); /* the device's, as the reference keeps it */

    /* A module: its image now, its code at its kernel's first launch. */
    CUmodule mod;
    CUfunction kernel;
    CHECK(cuModuleLoadData(&mod, ptx) == CUDA_SUCCESS);
    CHECK(cuModuleGetFunction(&kernel, mod, "k") == CUDA_SUCCESS);
    CHECK(cuMemGetInfo_v2(&free_b, &total) == CUDA_SUCCESS);
    CHECK(total == LIMIT && free_b == LIMIT - context - device_charge(sizeof ptx));

    /* Whole steps, then what is left below one (charged by 512 bytes). */
    size_t big = free_b & ~(STEP - 1), rest = free_b - big;
    CHECK(cuMemAlloc_v2(&a, big + STEP) == CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(cuMemAlloc_v2(&a, big) == CUDA_SUCCESS);                   /* below the limit */
    CHECK(cuMemAlloc_v2(&b, rest + 512) == CUDA_ERROR_OUT_OF_MEMORY); /* past it */
    CHECK(cuMemAlloc_v2(&b, rest) == CUDA_SUCCESS);                  /* exactly at it */
    CHECK(cuMemAlloc_v2(&c, 1) == CUDA_ERROR_OUT_OF_MEMORY);
    /* The driver's own memory too: the kernel's code has no room. */
    CHECK(launch(kernel) == CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(cuMemGetInfo_v2(&free_b, &total) == CUDA_SUCCESS);
    CHECK(free_b == 0 && total == LIMIT);
    nvml_total_is(LIMIT, LIMIT);
    printf("full %" PRIu64 "\n", (uint64_t)LIMIT);
    fflush(stdout);

    wait_line("cleared");
    CHECK(cuMemAlloc_v2(&c, LIMIT) == CUDA_SUCCESS);
    CHECK(launch(kernel) == CUDA_SUCCESS); /* its code: a step more */
    CHECK(cuMemGetInfo_v2(&free_b, &total) == CUDA_SUCCESS);
    CHECK(total == DEVICE);
    nvmlMemory_v2_t m = {.version = nvmlMemory_v2};
    CHECK(memory_v2(dev0, &m) == NVML_SUCCESS && m.total == DEVICE);
    printf("beyond\n");
    fflush(stdout);
    wait_line("end");
    CHECK(cuModuleUnload(mod) == CUDA_SUCCESS);
    return 0;
}

/* Two of these race for the cgroup's last bytes. */
static int run_racer(void)
{
    CUdeviceptr a;
    context_up();
    printf("ready\n");
    fflush(stdout);
    wait_line("go");
    printf("got %d\n", (int)cuMemAlloc_v2(&a, RACE));
    fflush(stdout);
    wait_line("end");
    return 0;
}

/* ----------------------------------------------------------- the test */

/* A driver the simulator does not model is refused by both libraries,
 * naming the variable, its value and what is accepted. */
static void bad_driver(void)
{
    int out[2];
    CHECK(pipe(out) == 0);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        dup2(out[1], 2);
        setenv("VRAM_SIM_DRIVER", "600", 1);
        PFN_nvmlInit_v2 init = (PFN_nvmlInit_v2)nvml_test_symbol("nvmlInit_v2");
        _exit(init && init() != NVML_SUCCESS && cuInit(0) == CUDA_ERROR_INVALID_VALUE ? 0 : 1);
    }
    close(out[1]);
    char text[2048] = "";
    size_t n = 0;
    ssize_t got;
    while (n < sizeof text - 1 && (got = read(out[0], text + n, sizeof text - 1 - n)) > 0)
        n += (size_t)got;
    close(out[0]);
    int status;
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK_CONTAINS(text, "VRAM_SIM_DRIVER=\"600\"");
    CHECK_CONTAINS(text, "expected 580");
    CHECK_CONTAINS(text, "615");
}

/* Under the default profile the functions are absent. */
static void default_profile(void)
{
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        unsetenv("VRAM_SIM_DRIVER");
        nvml_up();
        version_is("580.");
        CHECK(set(group, SOFT, LIMIT) == NVML_ERROR_FUNCTION_NOT_FOUND);
        nvmlGetMemoryLimits_v1_t l = {.nameSpace = group};
        CHECK(get_limits(dev0, &l) == NVML_ERROR_FUNCTION_NOT_FOUND);
        _exit(0);
    }
    int status;
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static void not_root(void)
{
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        CHECK(setgroups(0, NULL) == 0 && setresgid(65534, 65534, 65534) == 0 &&
              setresuid(65534, 65534, 65534) == 0);
        CHECK(set(group, SOFT, LIMIT) == NVML_ERROR_NO_PERMISSION);
        CHECK(set(group, 0, NVML_DEVICE_MEMORY_LIMIT_MAX) == NVML_ERROR_NO_PERMISSION);
        _exit(0);
    }
    int status;
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* The state file's line for the group, as limits.h gives its format. */
static void state_says(uint64_t soft, uint64_t hard)
{
    char path[4200], want[4400], text[8192] = "";
    struct stat st;
    CHECK(stat(group, &st) == 0);
    snprintf(path, sizeof path, "%s/limits", getenv("VRAM_SIM_DIR"));
    FILE *f = fopen(path, "r");
    CHECK(f != NULL);
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = 0;
    snprintf(want, sizeof want, "\n0 %" PRIu64 " %" PRIu64 " %" PRIu64 " %s\n", (uint64_t)st.st_ino,
             soft, hard, group);
    CHECK_CONTAINS(text, want);
    CHECK(stat(path, &st) == 0 && st.st_uid == 0 && (st.st_mode & 0777) == 0644);
}

/* This process is outside the cgroup: the device is all its own. */
static void outside(void)
{
    CUdeviceptr a;
    size_t free_b, total;
    context_up();
    CHECK(cuMemGetInfo_v2(&free_b, &total) == CUDA_SUCCESS);
    CHECK(total == DEVICE);
    CHECK(cuMemAlloc_v2(&a, 2 * LIMIT) == CUDA_SUCCESS);
    nvmlMemory_v2_t m = {.version = nvmlMemory_v2};
    CHECK(memory_v2(dev0, &m) == NVML_SUCCESS && m.total == DEVICE);
}

int main(void)
{
    const char *role = getenv("TEST_MEMORY_LIMITS_AS");
    if (role)
        return strcmp(role, "racer") == 0 ? run_racer() : run_inside();
    if (geteuid() != 0)
        skip("needs root (to make cgroups and set limits)");
    owner = getpid();
    atexit(clean_up);
    private_gpu("8GiB");
    make_cgroups();

    bad_driver();
    default_profile();
    setenv("VRAM_SIM_DRIVER", "615", 1);
    nvml_up();
    version_is("615.");
    not_root();

    /* Paths that name no cgroup. */
    char missing[4400];
    snprintf(missing, sizeof missing, "%s/none", group);
    CHECK(set(missing, 0, LIMIT) == NVML_ERROR_NOT_FOUND);
    CHECK(set(getenv("VRAM_SIM_DIR"), 0, LIMIT) == NVML_ERROR_INVALID_ARGUMENT);
    CHECK(set("vram-limits", 0, LIMIT) == NVML_ERROR_INVALID_ARGUMENT);
    CHECK(set(group, LIMIT, SOFT) == NVML_ERROR_INVALID_ARGUMENT); /* soft above hard */

    CHECK(set(group, SOFT, LIMIT) == NVML_SUCCESS);
    state_says(SOFT, LIMIT);
    nvmlGetMemoryLimits_v1_t l = get(group);
    CHECK(l.softLimit == SOFT && l.hardLimit == LIMIT && l.currentUsed == 0);

    struct member *in = &members[0];
    char line[256];
    start_inside(in, "inside");
    hear(in, "full", line);
    l = get(group);
    CHECK(l.softLimit == SOFT && l.hardLimit == LIMIT);
    CHECK(l.currentUsed == LIMIT); /* the child's context and allocations */
    CHECK(get(job).currentUsed == LIMIT && get(job).hardLimit == NVML_DEVICE_MEMORY_LIMIT_MAX);

    outside();
    CHECK(get(group).currentUsed == LIMIT); /* this process is not the cgroup's */

    CHECK(set(group, 0, NVML_DEVICE_MEMORY_LIMIT_MAX) == NVML_SUCCESS);
    l = get(group);
    CHECK(l.softLimit == 0 && l.hardLimit == NVML_DEVICE_MEMORY_LIMIT_MAX);
    tell(in, "cleared\n");
    hear(in, "beyond", line);
    CHECK(get(group).currentUsed == 2 * LIMIT + STEP);
    finish(in);
    CHECK(get(group).currentUsed == 0);

    /* Two processes of the cgroup asking at once for its last bytes: one
     * gets them, the other CUDA_ERROR_OUT_OF_MEMORY, however they race. */
    CHECK(set(group, 0, RACE_LIMIT) == NVML_SUCCESS);
    struct member *r1 = &members[1], *r2 = &members[2];
    start_inside(r1, "racer");
    start_inside(r2, "racer");
    hear(r1, "ready", line);
    hear(r2, "ready", line);
    uint64_t contexts = get(group).currentUsed;
    CHECK(contexts > 0 && contexts + RACE <= RACE_LIMIT && contexts + 2 * RACE > RACE_LIMIT);
    tell(r1, "go\n");
    tell(r2, "go\n");
    int got[2];
    hear(r1, "got ", line);
    got[0] = atoi(line + 4);
    hear(r2, "got ", line);
    got[1] = atoi(line + 4);
    CHECK((got[0] == CUDA_SUCCESS && got[1] == CUDA_ERROR_OUT_OF_MEMORY) ||
          (got[1] == CUDA_SUCCESS && got[0] == CUDA_ERROR_OUT_OF_MEMORY));
    CHECK(get(group).currentUsed == contexts + RACE);
    finish(r1);
    finish(r2);

    /* Removing the cgroup takes its limit: one made again there has none. */
    CHECK(set(group, SOFT, LIMIT) == NVML_SUCCESS);
    CHECK(rmdir(job) == 0 && rmdir(group) == 0);
    job[0] = 0;
    CHECK(mkdir(group, 0755) == 0);
    l = get(group);
    CHECK(l.softLimit == 0 && l.hardLimit == NVML_DEVICE_MEMORY_LIMIT_MAX);
    /* With no limit left (the removed cgroup's is dropped), no state file:
     * a charge then costs the driver one failed open. */
    CHECK(set(group, 0, NVML_DEVICE_MEMORY_LIMIT_MAX) == NVML_SUCCESS);
    char state[4200];
    snprintf(state, sizeof state, "%s/limits", getenv("VRAM_SIM_DIR"));
    CHECK(access(state, F_OK) != 0 && errno == ENOENT);

    printf("test_memory_limits: ok\n");
    return 0;
}
