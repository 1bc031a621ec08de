/* test_driver_memory: the driver's own memory is inside the budget.
 *
 * On the simulated H100, as on a GPU, the driver takes memory no call vram
 * governs: a module's code reaches the device at its kernel's first launch
 * (CUDA_MODULE_LOADING=LAZY, the default), 2 MiB per module here. A
 * ResNet-like program loads fifty modules of 2 MiB, launches a kernel of
 * each and allocates 24 MiB of activations after each launch, under a
 * budget that cannot hold it all. What a user relies on: NVML's figure for
 * the program (what nvidia-smi lists) never passes its budget by more than
 * the tolerance README.md states, the memory the driver takes between two
 * readings (one module's code here), while the program is refused where
 * its budget is full. Without the reading, NVML's figure ends about 70 MiB
 * over the budget.
 *
 * Run under a budget per process (LD_PRELOAD) and under `vram run`; the
 * program also checks that, with no pressure, the driver's part is what
 * the driver took (NVML's figure less what vram charged: about 100 MiB).
 *
 * And a process of the command that escaped the interposer (it cleared
 * LD_PRELOAD) holds 1.5 GiB under `vram run --limit 3GiB`: NVML lists it
 * and its parent chain leads to vram run, so its memory is the command's:
 * the command's allocations that would pass the budget beside it are
 * refused while it holds it, allowed once it has gone, and vram run's peak
 * counts it (before: the escaped process's memory was not seen at all).
 * And when the command's only process escaped, vram run's own reading of
 * NVML makes its peak what NVML showed (before: "peak 0 B").
 *
 * Usage: test_driver_memory PRELOAD VRAM BUILD
 */
#include "../src/cuda/cuda_prototypes.h"
#include "check.h"
#include "nvml_test.h"

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>

#define MODULES 50
#define IMAGE (2 * MiB)
#define ACTIVATIONS (24 * MiB)
#define BUDGET (1536 * MiB) /* a context (518 MiB) and room for 36 of the 50 steps */
#define BUDGET_TEXT "1536MiB"
/* README.md, "The tolerance": what the driver takes between two readings;
 * here one module's code, which its first launch brings after the reading
 * that let its load go. */
#define TOLERANCE (2 * MiB)

static PFN_nvmlDeviceGetComputeRunningProcesses_v3 nvml_procs;
static nvmlDevice_t nvml_dev;

static void nvml_up(void)
{
    nvml_procs = NVML_FUNCTION(nvmlDeviceGetComputeRunningProcesses_v3);
    nvml_dev = nvml_test_device(0);
}

/* What NVML says this process holds, as nvidia-smi shows it. */
static uint64_t nvml_own(void)
{
    nvmlProcessInfo_t list[64];
    unsigned n = 64;
    CHECK(nvml_procs(nvml_dev, &n, list) == NVML_SUCCESS);
    for (unsigned i = 0; i < n; i++)
        if (list[i].pid == (unsigned)getpid())
            return list[i].usedGpuMemory;
    return 0;
}

/* Module m: a PTX image of IMAGE bytes whose one kernel is "k<m>". */
static char *image(int m)
{
    char *p = malloc(IMAGE);
    CHECK(p != NULL);
    memset(p, ' ', IMAGE - 1);
    int n = snprintf(p, IMAGE, ".version 8.0\n.target sm_90\n.address_size 64\n"
                               ".visible .entry k%d()\n{\nret;\n}\n", m);
    p[n] = ' ';
    p[IMAGE - 1] = 0;
    return p;
}

static void sleep_ms(long ms)
{
    struct timespec t = {ms / 1000, ms % 1000 * 1000000L};
    while (nanosleep(&t, &t) != 0)
        ;
}

/* The program: modules, launches and activations until refused. */
static int program(uint64_t budget)
{
    CUcontext ctx;
    /* NVML first: the simulated NVML's nvmlInit_v2 counts its starts
     * unguarded from its readers, and the interposer's reader thread
     * starts with the first context. */
    nvml_up();
    CHECK(cuInit(0) == CUDA_SUCCESS);
    CHECK(cuDevicePrimaryCtxRetain(&ctx, 0) == CUDA_SUCCESS);
    CHECK(cuCtxPushCurrent_v2(ctx) == CUDA_SUCCESS);
    uint64_t most = 0;
    int steps = 0;
    bool refused = false;
    for (int m = 0; m < MODULES && !refused; m++) {
        char *p = image(m), name[16];
        CUmodule mod;
        CUfunction f;
        CUdeviceptr a;
        snprintf(name, sizeof name, "k%d", m);
        if (cuModuleLoadData(&mod, p) != CUDA_SUCCESS) {
            refused = true;
        } else {
            CHECK(cuModuleGetFunction(&f, mod, name) == CUDA_SUCCESS);
            CUresult rc = cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL);
            CHECK(rc == CUDA_SUCCESS || rc == CUDA_ERROR_OUT_OF_MEMORY);
            refused = rc != CUDA_SUCCESS || cuMemAlloc_v2(&a, ACTIVATIONS) != CUDA_SUCCESS;
            steps += !refused;
        }
        free(p);
        uint64_t now = nvml_own();
        if (now > most)
            most = now;
    }
    /* A reading or two later, nothing more is held than the tolerance allows. */
    sleep_ms(250);
    uint64_t now = nvml_own();
    if (now > most)
        most = now;
    printf("steps %d, NVML at most %llu MiB of a %llu MiB budget\n", steps,
           (unsigned long long)(most / MiB), (unsigned long long)(budget / MiB));
    if (budget < (uint64_t)-1 / 2) {
        CHECK(refused); /* the budget was the limit, not the program */
        if (most > budget + TOLERANCE) {
            fprintf(stderr, "NVML showed %llu MiB for the program, %llu MiB over its budget of "
                            "%llu MiB; the tolerance is %llu MiB\n",
                    (unsigned long long)(most / MiB), (unsigned long long)((most - budget) / MiB),
                    (unsigned long long)(budget / MiB), (unsigned long long)(TOLERANCE / MiB));
            return 1;
        }
        /* Tight: the budget was used, not left idle for the driver. */
        CHECK(most + 64 * MiB > budget);
    } else {
        /* No pressure: the driver took 2 MiB per module launched, which is
         * what vram now charges beyond the allocations and loads. */
        CHECK(!refused && steps == MODULES);
        size_t f, t;
        CHECK(cuMemGetInfo_v2(&f, &t) == CUDA_SUCCESS);
        CHECK(t - f == nvml_own()); /* the view counts the driver's part */
    }
    return 0;
}

/* --------------------------------------------------------- escaped */

static void hold_escaped(void)
{
    CUcontext ctx;
    CUdeviceptr a;
    CHECK(cuInit(0) == CUDA_SUCCESS);
    CHECK(cuDevicePrimaryCtxRetain(&ctx, 0) == CUDA_SUCCESS);
    CHECK(cuCtxPushCurrent_v2(ctx) == CUDA_SUCCESS);
    CHECK(cuMemAlloc_v2(&a, GiB) == CUDA_SUCCESS);
    CHECK(write(atoi(getenv("TEST_DRIVER_MEMORY_FD")), "x", 1) == 1);
    pause();
}

static int beside_escaped(char **argv)
{
    int fds[2];
    CHECK(pipe(fds) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* gone with the program, also when a CHECK fails */
        char fd[16];
        snprintf(fd, sizeof fd, "%d", fds[1]);
        setenv("TEST_DRIVER_MEMORY_FD", fd, 1);
        setenv("TEST_DRIVER_MEMORY_UNDER", "escapee", 1);
        unsetenv("LD_PRELOAD"); /* out of the interposer's reach, not of NVML's */
        execv("/proc/self/exe", argv);
        _exit(1);
    }
    char c;
    CHECK(read(fds[0], &c, 1) == 1);
    CUcontext ctx;
    CUdeviceptr a, b;
    CHECK(cuInit(0) == CUDA_SUCCESS);
    CHECK(cuDevicePrimaryCtxRetain(&ctx, 0) == CUDA_SUCCESS);
    CHECK(cuCtxPushCurrent_v2(ctx) == CUDA_SUCCESS);
    /* Its context and 1.5 GiB (2,060 MiB with this context) of a 3 GiB budget. */
    CHECK(cuMemAlloc_v2(&a, GiB) == CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(cuMemAlloc_v2(&a, 512 * MiB) == CUDA_SUCCESS);
    kill(pid, SIGKILL);
    CHECK(waitpid(pid, NULL, 0) == pid);
    sleep_ms(300); /* a reading or more */
    CHECK(cuMemAlloc_v2(&b, GiB) == CUDA_SUCCESS);
    return 0;
}

/* vram run's peak, from its --summary. */
static uint64_t summary_peak(const char *path)
{
    char buf[8192] = "";
    FILE *f = fopen(path, "r");
    CHECK(f != NULL);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    const char *p = strstr(buf, "\"peak\": ");
    CHECK(p != NULL);
    return strtoull(p + 8, NULL, 10);
}

static int again(const char *how, const char *limit, char **argv)
{
    pid_t pid = fork();
    if (pid == 0) {
        setenv("TEST_DRIVER_MEMORY_UNDER", how, 1);
        setenv("TEST_DRIVER_MEMORY_BUDGET", limit, 1);
        unsetenv("VRAM_SIM_CONTEXT_SIZE");  /* the profile's: 518 MiB */
        unsetenv("CUDA_MODULE_LOADING");    /* the driver's default: lazy */
        char summary[4200];
        snprintf(summary, sizeof summary, "%s/summary.json", private_gpu_dir);
        const char *const run_words[] = {"--summary", summary, NULL};
        const char *const unpreloaded[] = {"env", "-u", "LD_PRELOAD", NULL};
        exec_self_under_budget(!strcmp(how, "process"), limit, argv, run_words,
                               !strcmp(how, "alone") ? unpreloaded : NULL);
        _exit(1);
    }
    int status;
    CHECK(waitpid(pid, &status, 0) == pid);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "test_driver_memory: the run under %s (%s) failed\n", how, limit);
        return 1;
    }
    if (!strcmp(how, "escaped")) {
        char summary[4200];
        snprintf(summary, sizeof summary, "%s/summary.json", private_gpu_dir);
        uint64_t peak = summary_peak(summary);
        /* Two contexts, the escaped GiB and 512 MiB at once. */
        if (peak < 2 * 518 * MiB + GiB + 512 * MiB) {
            fprintf(stderr, "test_driver_memory: vram run's peak is %llu MiB, without what the "
                            "escaped process held\n", (unsigned long long)(peak / MiB));
            return 1;
        }
    }
    if (!strcmp(how, "alone")) {
        char summary[4200];
        snprintf(summary, sizeof summary, "%s/summary.json", private_gpu_dir);
        uint64_t peak = summary_peak(summary);
        if (peak < 518 * MiB + 3 * GiB) {
            fprintf(stderr, "test_driver_memory: vram run's peak is %llu MiB, without what the "
                            "escaped process held\n", (unsigned long long)(peak / MiB));
            return 1;
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    const char *how = getenv("TEST_DRIVER_MEMORY_UNDER");
    if (!how) {
        CHECK(argc == 4); /* the interposer's path, the vram command's, the build folder */
        private_gpu("8GiB");
        int rc = again("process", BUDGET_TEXT, argv);
        rc = again("command", BUDGET_TEXT, argv) || rc;
        rc = again("process", "8GiB", argv) || rc;
        rc = again("escaped", "3GiB", argv) || rc;
        rc = again("alone", "2GiB", argv) || rc;
        return rc;
    }
    if (!strcmp(how, "alone")) { /* 3 GiB under a 2 GiB budget, out of vram's reach */
        CUcontext ctx;
        CUdeviceptr a;
        CHECK(getenv("LD_PRELOAD") == NULL);
        CHECK(cuInit(0) == CUDA_SUCCESS);
        CHECK(cuDevicePrimaryCtxRetain(&ctx, 0) == CUDA_SUCCESS);
        CHECK(cuCtxPushCurrent_v2(ctx) == CUDA_SUCCESS);
        CHECK(cuMemAlloc_v2(&a, 3 * GiB) == CUDA_SUCCESS);
        sleep_ms(500); /* vram run reads every 200 ms */
        return 0;
    }
    if (!strcmp(how, "escapee"))
        hold_escaped();
    if (!strcmp(how, "escaped"))
        return beside_escaped(argv);
    uint64_t budget = strcmp(getenv("TEST_DRIVER_MEMORY_BUDGET"), BUDGET_TEXT) == 0 ? BUDGET
                                                                                     : (uint64_t)-1;
    return program(budget);
}
