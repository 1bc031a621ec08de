/* The simulated GPU's shared directory (VRAM_SIM_DIR) cannot be abused,
 * and nothing a dead process leaves outlives it:
 *   - a lock file held by anyone, or a FIFO where a file is expected, makes
 *     no allocation wait (every case runs under an alarm);
 *   - a record forged by another user, naming someone else's process, is
 *     neither charged to that process nor counted;
 *   - a world-writable directory that another user owns is refused (its
 *     owner could delete the records in it);
 *   - a process killed while it registers leaves no file behind;
 *   - two threads of one process reading NVML's process list at once each
 *     see every process (the listing once shared its directory offset
 *     between them: each skipped or repeated what the other read, and a
 *     test saw a process held 0 B, or twice what it held);
 *   - a process in a pid namespace of its own (a container's) is listed as
 *     a real driver (R535 and later) lists it: by its pid on the host to a
 *     reader on the host, by its pid in its namespace to a reader there,
 *     and not at all to a reader in another namespace, to whom its memory
 *     is still used (the simulator once listed it to every reader by the
 *     pid it had in its own namespace: pid 1, the host's init, on the
 *     host); its own NVML reading of itself does not change that.
 * Each case is a fresh process (this program executed again), since the
 * simulator's state is per process and a forked child may not use CUDA.
 * The cases with another user need root and are skipped, and said to be,
 * without it. */
#include "../src/cuda/cuda_prototypes.h"
#include "../sim/occupancy.h"
#include "check.h"
#include "nvml_test.h"

#include <dirent.h>
#include <pthread.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdarg.h>
#include <sched.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define NOBODY 65534

/* The driver's fcntl goes through here: a case can have the process killed
 * at the moment it locks its record, the middle of registering. */
int fcntl(int fd, int cmd, ...)
{
    va_list ap;
    va_start(ap, cmd);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    if (cmd == F_OFD_SETLK && getenv("VRAM_TEST_KILL_AT_LOCK"))
        raise(SIGKILL);
    return (int)syscall(SYS_fcntl, fd, cmd, arg);
}

static char *self;

/* --------------------------------------------------------- in the child */

static int child_allocate(void)
{
    alarm(20); /* a hang is a failure, not a stuck test */
    CUcontext c;
    CUdeviceptr p;
    size_t free_b, total;
    CHECK(cuInit(0) == CUDA_SUCCESS);
    CHECK(cuDevicePrimaryCtxRetain(&c, 0) == CUDA_SUCCESS);
    CHECK(cuCtxSetCurrent(c) == CUDA_SUCCESS);
    CHECK(cuMemAlloc_v2(&p, 64 * MiB) == CUDA_SUCCESS);
    CHECK(cuMemGetInfo_v2(&free_b, &total) == CUDA_SUCCESS);
    CHECK(total - free_b == 64 * MiB);
    CHECK(cuMemFree_v2(p) == CUDA_SUCCESS);
    return 0;
}

static int child_refused(void)
{
    alarm(20);
    CHECK(cuInit(0) == CUDA_ERROR_NOT_INITIALIZED);
    return 0;
}

/* What NVML says of the device: nobody holds memory, nobody is listed. */
static int child_nvml_empty(void)
{
    alarm(20);
    nvmlDevice_t d = nvml_test_device(0);
    nvmlMemory_t m;
    nvmlProcessInfo_t p[8];
    unsigned n = 8;
    CHECK(NVML_FUNCTION(nvmlDeviceGetMemoryInfo)(d, &m) == NVML_SUCCESS);
    CHECK(m.used == 0);
    CHECK(NVML_FUNCTION(nvmlDeviceGetComputeRunningProcesses_v3)(d, &n, p) == NVML_SUCCESS);
    CHECK(n == 0);
    return 0;
}

static void allocate_mib(void)
{
    CUcontext c;
    CUdeviceptr p;
    CHECK(cuInit(0) == CUDA_SUCCESS);
    CHECK(cuDevicePrimaryCtxRetain(&c, 0) == CUDA_SUCCESS);
    CHECK(cuCtxSetCurrent(c) == CUDA_SUCCESS);
    CHECK(cuMemAlloc_v2(&p, MiB) == CUDA_SUCCESS);
}

/* Holds 1 MiB until its stdin closes. */
static int child_hold(void)
{
    alarm(60);
    allocate_mib();
    printf("held\n");
    fflush(stdout);
    char ch;
    while (read(0, &ch, 1) > 0)
        ;
    return 0;
}

/* NVML's list and used memory of device 0, read twice (the second time
 * after this process read its own record through NVML, as the interposer
 * does), on stdout: "used=BYTES" then "pid=PID bytes=BYTES" per process. */
static int child_nvml_list(void)
{
    alarm(20);
    nvmlDevice_t d = nvml_test_device(0);
    for (int round = 0; round < 2; round++) {
        nvmlMemory_t m;
        nvmlProcessInfo_t p[16];
        unsigned n = 16;
        CHECK(NVML_FUNCTION(nvmlDeviceGetMemoryInfo)(d, &m) == NVML_SUCCESS);
        CHECK(NVML_FUNCTION(nvmlDeviceGetComputeRunningProcesses_v3)(d, &n, p) == NVML_SUCCESS);
        if (round == 1)
            continue;
        printf("used=%llu\n", m.used);
        for (unsigned i = 0; i < n; i++)
            printf("pid=%u bytes=%llu\n", p[i].pid, p[i].usedGpuMemory);
    }
    return 0;
}

/* child_hold in a pid namespace of its own with its own /proc, as in a
 * container; it reads NVML's list as it holds (the interposer does). */
static int child_hold_listing(void)
{
    alarm(60);
    CHECK(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0);
    CHECK(mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) == 0);
    allocate_mib();
    nvmlDevice_t d = nvml_test_device(0);
    nvmlProcessInfo_t list[16];
    unsigned n = 16;
    CHECK(NVML_FUNCTION(nvmlDeviceGetComputeRunningProcesses_v3)(d, &n, list) == NVML_SUCCESS);
    CHECK(n == 1 && list[0].pid == (unsigned)getpid());
    printf("held\n");
    fflush(stdout);
    char ch;
    while (read(0, &ch, 1) > 0)
        ;
    return 0;
}

#define HOLDERS 8
#define LISTINGS 3000
static PFN_nvmlDeviceGetComputeRunningProcesses_v3 list_processes;
static nvmlDevice_t listed_device;

/* LISTINGS readings of NVML's list: the holders' HOLDERS MiB each time. */
static void *list_repeatedly(void *arg)
{
    (void)arg;
    for (int i = 0; i < LISTINGS; i++) {
        nvmlProcessInfo_t p[64];
        unsigned n = 64;
        unsigned long long sum = 0;
        if (list_processes(listed_device, &n, p) != NVML_SUCCESS)
            return "the list could not be read";
        for (unsigned k = 0; k < n; k++)
            sum += p[k].usedGpuMemory;
        if (n != HOLDERS || sum != HOLDERS * MiB) {
            fprintf(stderr, "listing %d: %u processes holding %llu B, want %d holding %llu\n", i,
                    n, sum, HOLDERS, HOLDERS * MiB);
            return "a listing missed or repeated a process";
        }
    }
    return NULL;
}

static int child_nvml_threads(void)
{
    alarm(120);
    list_processes = NVML_FUNCTION(nvmlDeviceGetComputeRunningProcesses_v3);
    listed_device = nvml_test_device(0);
    pthread_t t[2];
    void *why[2];
    for (int i = 0; i < 2; i++)
        CHECK(pthread_create(&t[i], NULL, list_repeatedly, NULL) == 0);
    for (int i = 0; i < 2; i++) {
        CHECK(pthread_join(t[i], &why[i]) == 0);
        if (why[i])
            fprintf(stderr, "thread %d: %s\n", i, (const char *)why[i]);
    }
    CHECK(!why[0] && !why[1]);
    return 0;
}

/* ------------------------------------------------------- in the parent */

static char dir[1024];

static void fresh_dir(void)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/vram-test.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    CHECK(mkdtemp(dir));
    CHECK(chmod(dir, 01777) == 0);
    setenv("VRAM_SIM_DIR", dir, 1);
}

static void remove_dir(void)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            unlinkat(dirfd(d), e->d_name, 0);
    if (d)
        closedir(d);
    rmdir(dir);
}

/* Runs this program again as `what`; its wait status. */
static int run(const char *what)
{
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        execl(self, self, what, (char *)NULL);
        _exit(127);
    }
    int st;
    waitpid(pid, &st, 0);
    return st;
}

static bool ok(int st) { return WIFEXITED(st) && WEXITSTATUS(st) == 0; }

static void listings_at_once(void)
{
    fresh_dir();
    int to[2], from[2];
    CHECK(pipe(to) == 0 && pipe(from) == 0);
    pid_t holder[HOLDERS];
    for (int i = 0; i < HOLDERS; i++) {
        holder[i] = fork();
        CHECK(holder[i] >= 0);
        if (holder[i] == 0) {
            dup2(to[0], 0);
            dup2(from[1], 1);
            close(to[1]);
            close(from[0]);
            execl(self, self, "hold", (char *)NULL);
            _exit(127);
        }
    }
    close(to[0]);
    close(from[1]);
    FILE *ready = fdopen(from[0], "r");
    char line[64];
    for (int i = 0; i < HOLDERS; i++)
        CHECK(fgets(line, sizeof line, ready) && strcmp(line, "held\n") == 0);
    int st = run("nvml-threads");
    close(to[1]);
    for (int i = 0; i < HOLDERS; i++)
        waitpid(holder[i], NULL, 0);
    fclose(ready);
    remove_dir();
    CHECK(ok(st));
}

/* NVML's list (child_nvml_list) read by a process in the pid and mount
 * namespaces of process `in` (-1: this process's; 0: new ones of their
 * own, with their own /proc, as another container's), into out. The
 * namespaces are entered by util-linux's nsenter and unshare: a process
 * with threads (ThreadSanitizer's) cannot enter a mount namespace itself. */
static void run_listing(pid_t in, char *out, size_t n)
{
    int from[2];
    CHECK(pipe(from) == 0);
    pid_t reader = fork();
    CHECK(reader >= 0);
    if (reader == 0) {
        dup2(from[1], 1);
        char target[16];
        snprintf(target, sizeof target, "%d", (int)in);
        if (in > 0)
            execlp("nsenter", "nsenter", "-t", target, "-p", "-m", self, "nvml-list", (char *)NULL);
        else if (in == 0)
            execlp("unshare", "unshare", "-p", "-f", "-m", "--mount-proc", self, "nvml-list",
                   (char *)NULL);
        else
            execl(self, self, "nvml-list", (char *)NULL);
        _exit(127);
    }
    close(from[1]);
    size_t got = 0;
    ssize_t r;
    while (got + 1 < n && (r = read(from[0], out + got, n - 1 - got)) > 0)
        got += (size_t)r;
    out[got] = 0;
    close(from[0]);
    int st;
    waitpid(reader, &st, 0);
    if (!ok(st))
        fprintf(stderr, "the listing in %s namespace failed (status %#x):\n%s",
                in < 0 ? "this" : in ? "the holder's" : "a new", st, out);
    CHECK(ok(st));
}

static void namespaced_holder(void)
{
    fresh_dir();
    int to[2], from[2], told[2];
    CHECK(pipe(to) == 0 && pipe(from) == 0 && pipe(told) == 0);
    pid_t starter = fork();
    CHECK(starter >= 0);
    if (starter == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (unshare(CLONE_NEWPID | CLONE_NEWNS) != 0)
            _exit(3);
        pid_t holder = fork(); /* pid 1 of the new namespace */
        if (holder == 0) {
            dup2(to[0], 0);
            dup2(from[1], 1);
            close(to[1]);
            close(from[0]);
            execl(self, self, "hold-listing", (char *)NULL);
            _exit(127);
        }
        close(to[1]); /* the holder's stdin ends when the test's end closes */
        dprintf(told[1], "%d\n", (int)holder); /* its pid here, on the host */
        int st;
        waitpid(holder, &st, 0);
        _exit(ok(st) ? 0 : 1);
    }
    close(to[0]);
    close(from[1]);
    close(told[1]);
    char line[64], out[4096], want[64];
    FILE *said = fdopen(told[0], "r"), *ready = fdopen(from[0], "r");
    CHECK(said && fgets(line, sizeof line, said));
    int host_pid = atoi(line);
    CHECK(host_pid > 1);
    CHECK(ready && fgets(line, sizeof line, ready) && strcmp(line, "held\n") == 0);

    /* On the host: by its host pid, never as pid 1 (the host's init). */
    run_listing(-1, out, sizeof out);
    snprintf(want, sizeof want, "used=%llu\npid=%d bytes=%llu\n", MiB, host_pid, MiB);
    if (strcmp(out, want) != 0)
        fprintf(stderr, "on the host NVML said:\n%swant:\n%s", out, want);
    CHECK(strcmp(out, want) == 0);

    /* In its own namespace: by the pid it has there. */
    run_listing(host_pid, out, sizeof out);
    snprintf(want, sizeof want, "used=%llu\npid=1 bytes=%llu\n", MiB, MiB);
    if (strcmp(out, want) != 0)
        fprintf(stderr, "in the holder's namespace NVML said:\n%swant:\n%s", out, want);
    CHECK(strcmp(out, want) == 0);

    /* In another container's: not listed, its memory used all the same. */
    run_listing(0, out, sizeof out);
    snprintf(want, sizeof want, "used=%llu\n", MiB);
    if (strcmp(out, want) != 0)
        fprintf(stderr, "in another namespace NVML said:\n%swant:\n%s", out, want);
    CHECK(strcmp(out, want) == 0);

    close(to[1]);
    int st;
    waitpid(starter, &st, 0);
    CHECK(ok(st));
    fclose(said);
    fclose(ready);
    remove_dir();
}

static void lock_held_by_another(void)
{
    fresh_dir();
    char path[1200];
    snprintf(path, sizeof path, "%s/devices.lock", dir);
    int fd = open(path, O_RDONLY | O_CREAT, 0644);
    CHECK(fd >= 0 && flock(fd, LOCK_EX) == 0);
    CHECK(ok(run("allocate")));
    close(fd);
    remove_dir();
}

static void fifos_where_files_were(void)
{
    fresh_dir();
    char path[1200];
    snprintf(path, sizeof path, "%s/devices.lock", dir);
    CHECK(mkfifo(path, 0666) == 0);
    snprintf(path, sizeof path, "%s/proc-1-fifo", dir);
    CHECK(mkfifo(path, 0666) == 0);
    CHECK(ok(run("allocate")));
    CHECK(ok(run("nvml-empty")));
    remove_dir();
}

static void killed_while_registering(void)
{
    fresh_dir();
    setenv("VRAM_TEST_KILL_AT_LOCK", "1", 1);
    int st = run("allocate");
    unsetenv("VRAM_TEST_KILL_AT_LOCK");
    CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    DIR *d = opendir(dir);
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            fprintf(stderr, "left behind by a process killed while registering: %s\n", e->d_name);
            exit(1);
        }
    closedir(d);
    CHECK(ok(run("allocate")));
    remove_dir();
}

static void directory_of_another_user(void)
{
    fresh_dir();
    CHECK(chown(dir, NOBODY, NOBODY) == 0);
    CHECK(ok(run("refused")));
    remove_dir();
}

/* Another user writes a record that names this process and claims 1 GiB,
 * and holds it as a live process would. */
static void forged_record(void)
{
    fresh_dir();
    int ready[2];
    CHECK(pipe(ready) == 0);
    pid_t victim = getpid();
    pid_t forger = fork();
    if (forger == 0) {
        if (setgid(NOBODY) != 0 || setuid(NOBODY) != 0)
            _exit(2);
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* gone with the test, whatever happens */
        char path[1200];
        snprintf(path, sizeof path, "%s/proc-%d-f0e", dir, (int)victim);
        int fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0644);
        struct occ_record r = {.magic = OCC_RECORD_MAGIC, .pid = victim};
        r.used[0] = 1 * GiB;
        struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
        if (fd < 0 || pwrite(fd, &r, sizeof r, 0) != sizeof r || fcntl(fd, F_OFD_SETLK, &fl) != 0)
            _exit(3);
        if (write(ready[1], "x", 1) != 1)
            _exit(4);
        pause();
        _exit(0);
    }
    char c;
    CHECK(read(ready[0], &c, 1) == 1);
    CHECK(ok(run("nvml-empty")));
    CHECK(ok(run("allocate"))); /* and the 1 GiB claimed is not in the way either */
    kill(forger, SIGKILL);
    waitpid(forger, NULL, 0);
    close(ready[0]);
    close(ready[1]);
    remove_dir();
}

int main(int argc, char **argv)
{
    /* A path that still names this program once a case has chdir()ed or
     * entered another mount namespace (whose root is where it started). */
    self = realpath(argv[0], NULL);
    CHECK(self != NULL);
    setenv("VRAM_SIM_DEVICES", "1100MiB", 1);
    /* The simulator's own shared state, no budget: a case reads the
     * device's use as exactly what it allocated (a forged claim not in it)
     * and NVML's list as empty, which a context would add its size to. */
    setenv("VRAM_SIM_CONTEXT_SIZE", "0", 1);
    if (argc == 2 && strcmp(argv[1], "allocate") == 0)
        return child_allocate();
    if (argc == 2 && strcmp(argv[1], "refused") == 0)
        return child_refused();
    if (argc == 2 && strcmp(argv[1], "nvml-empty") == 0)
        return child_nvml_empty();
    if (argc == 2 && strcmp(argv[1], "hold") == 0)
        return child_hold();
    if (argc == 2 && strcmp(argv[1], "nvml-threads") == 0)
        return child_nvml_threads();
    if (argc == 2 && strcmp(argv[1], "nvml-list") == 0)
        return child_nvml_list();
    if (argc == 2 && strcmp(argv[1], "hold-listing") == 0)
        return child_hold_listing();
    /* VRAM_TEST_ONLY=NAME runs one case (to see each fail on its own). */
    const char *only = getenv("VRAM_TEST_ONLY");
#define CASE(name) (!only || strcmp(only, #name) == 0)
    if (CASE(lock_held_by_another))
        lock_held_by_another();
    if (CASE(fifos_where_files_were))
        fifos_where_files_were();
    if (CASE(killed_while_registering))
        killed_while_registering();
    if (CASE(listings_at_once))
        listings_at_once();
    if (geteuid() == 0) {
        if (CASE(directory_of_another_user))
            directory_of_another_user();
        if (CASE(forged_record))
            forged_record();
        if (CASE(namespaced_holder))
            namespaced_holder();
    } else {
        printf("test_sim_state: SKIP the cases with another user (they need root)\n");
    }
    printf("test_sim_state: ok\n");
    return 0;
}
