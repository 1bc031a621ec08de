/* nvml_pid: which pid NVML lists a process under (nvml_pid.h). */
#include "nvml_pid.h"

#include <stddef.h>

int nvml_pid_driver_series(const char *driver)
{
    if (!driver)
        return 0;
    int series = 0, digits = 0;
    for (; driver[digits] >= '0' && driver[digits] <= '9' && digits < 6; digits++)
        series = series * 10 + (driver[digits] - '0');
    /* "580.65.06", "535.43.02": the series, then a dot. */
    return digits > 0 && driver[digits] == '.' ? series : 0;
}

struct nvml_pid_view nvml_pid_view(const char *driver, bool initial, unsigned self,
                                   unsigned daemon_pid)
{
    if (initial || nvml_pid_driver_series(driver) >= NVML_PID_NAMESPACED_SINCE)
        return (struct nvml_pid_view){self, true, NULL};
    if (daemon_pid)
        return (struct nvml_pid_view){daemon_pid, false, NULL};
    return (struct nvml_pid_view){
        0, false,
        nvml_pid_driver_series(driver)
            ? "NVML names processes by their pid on the host (a driver before R535) and this "
              "one runs in a pid namespace of its own (a container), with no vramd to say its "
              "pid there"
            : "NVML does not say its driver's version, so whether it names processes by their "
              "pid on the host (drivers before R535) or in this process's pid namespace (a "
              "container's) is not known, and there is no vramd to say its pid on the host"};
}
