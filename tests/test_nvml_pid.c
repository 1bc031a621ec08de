/* nvml_pid: the pid a process looks for itself under in NVML's list, as
 * NVIDIA's drivers name processes (src/cuda/nvml_pid.h): its own pid in
 * the host's pid namespace or on R535 and later; in a container on an
 * older driver, the host's pid vramd said, or none at all (then the
 * driver's own part is not charged, and said) - never its container pid,
 * which on such a driver is another process's pid on the host. */
#include "../src/cuda/nvml_pid.h"
#include "../src/util/proc.h"
#include "check.h"

#include <sched.h>
#include <sys/wait.h>

int main(void)
{
    CHECK(nvml_pid_driver_series("580.65.06") == 580);
    CHECK(nvml_pid_driver_series("535.43.02") == 535);
    CHECK(nvml_pid_driver_series("470.256.02") == 470);
    CHECK(nvml_pid_driver_series("") == 0);
    CHECK(nvml_pid_driver_series("abc") == 0);
    CHECK(nvml_pid_driver_series("580") == 0); /* not a version NVML gives */
    CHECK(nvml_pid_driver_series(NULL) == 0);

    struct nvml_pid_view v;
    /* On the host: its own pid, whatever the driver. */
    v = nvml_pid_view("470.256.02", true, 4242, 0);
    CHECK(v.self == 4242 && v.this_namespace);
    /* In a container on R535 and later: its own pid in the container. */
    v = nvml_pid_view("580.65.06", false, 7, 0);
    CHECK(v.self == 7 && v.this_namespace);
    v = nvml_pid_view("535.43.02", false, 7, 91234);
    CHECK(v.self == 7 && v.this_namespace);
    /* On an older driver: the host's pid, from vramd; the list's other
     * pids are the host's too. */
    v = nvml_pid_view("525.147.05", false, 7, 91234);
    CHECK(v.self == 91234 && !v.this_namespace);
    /* Without vramd: not known, and why. */
    v = nvml_pid_view("525.147.05", false, 7, 0);
    CHECK(v.self == 0 && !v.this_namespace && v.why && strstr(v.why, "before R535"));
    v = nvml_pid_view(NULL, false, 7, 0);
    CHECK(v.self == 0 && v.why && strstr(v.why, "version"));

    /* This test runs on the host; a child of a new pid namespace is not.
     * (The namespace is made by a helper: once this process made one, its
     * own later children would go there, LeakSanitizer's among them.) */
    CHECK(proc_in_initial_pid_namespace());
    if (geteuid() == 0) {
        pid_t helper = fork();
        CHECK(helper >= 0);
        if (helper == 0) {
            if (unshare(CLONE_NEWPID) != 0)
                _exit(3);
            pid_t child = fork();
            if (child == 0)
                _exit(proc_in_initial_pid_namespace() ? 1 : 0);
            int st;
            _exit(child > 0 && waitpid(child, &st, 0) == child && WIFEXITED(st) ? WEXITSTATUS(st)
                                                                               : 4);
        }
        int st;
        CHECK(waitpid(helper, &st, 0) == helper && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    } else {
        printf("test_nvml_pid: SKIP the pid namespace case (it needs root)\n");
    }
    printf("test_nvml_pid: ok\n");
    return 0;
}
