/* proc: /proc's figures of a process. */
#include "proc.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PROC_PID_INIT_INO 0xEFFFFFFCu /* the kernel's include/linux/proc_ns.h */

bool proc_in_initial_pid_namespace(void)
{
    struct stat st;
    return stat("/proc/self/ns/pid", &st) != 0 || st.st_ino == PROC_PID_INIT_INO;
}

uint64_t proc_start_time(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = 0;
    char *p = strrchr(buf, ')'); /* the command may contain spaces and parentheses */
    if (!p)
        return 0;
    int field = 2;
    for (; *p && field < 22; p++)
        if (*p == ' ')
            field++;
    return strtoull(p, NULL, 10);
}

int proc_children(pid_t pid, pid_t *out, int max)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    struct dirent *e;
    int n = 0;
    while (d && n < max && (e = readdir(d))) {
        if (e->d_name[0] < '1' || e->d_name[0] > '9')
            continue;
        char file[96];
        snprintf(file, sizeof file, "/proc/%d/task/%.20s/children", (int)pid, e->d_name);
        FILE *in = fopen(file, "re");
        int child;
        while (in && n < max && fscanf(in, "%d", &child) == 1)
            out[n++] = child;
        if (in)
            fclose(in);
    }
    if (d)
        closedir(d);
    return n;
}
