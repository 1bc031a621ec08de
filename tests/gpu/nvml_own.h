/* What nvidia-smi lists for this process (MiB, as it says it), in bytes, or
 * -1 when it does not list it: asked while the program holds everything it
 * got, so that tests/gpu/run.sh can set it against the budget. nvidia-smi
 * runs without the interposer, as a program of its own. */
#include <stdio.h>
#include <unistd.h>

static long long nvml_own(void)
{
    FILE *p = popen("env -u LD_PRELOAD nvidia-smi --query-compute-apps=pid,used_memory "
                    "--format=csv,noheader,nounits 2>/dev/null",
                    "r");
    if (!p)
        return -1;
    long long pid, mib, bytes = -1;
    while (fscanf(p, "%lld, %lld", &pid, &mib) == 2)
        if (pid == (long long)getpid())
            bytes = mib << 20;
    pclose(p);
    return bytes;
}
