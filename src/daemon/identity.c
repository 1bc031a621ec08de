/* identity: who a client is, from the kernel and never from what it writes.
 * A PID is only ever used together with the process's start time. */
#include "daemon.h"

#include "../ledger/protocol.h"

#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Field 22 of /proc/PID/stat: when the process started, in clock ticks.
 * With the pid it names one process for the machine's uptime. */
uint64_t start_time(pid_t pid)
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

bool same_process(pid_t pid, uint64_t start) { return start && start_time(pid) == start; }

void read_groups(struct ledger_client *c)
{
    char path[64], line[4096];
    snprintf(path, sizeof path, "/proc/%d/status", (int)c->pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "Groups:", 7) == 0) {
            char *p = line + 7, *end;
            while (c->ngroups < LEDGER_MAX_GROUPS) {
                unsigned long g = strtoul(p, &end, 10);
                if (end == p)
                    break;
                c->groups[c->ngroups++] = (gid_t)g;
                p = end;
            }
        }
    fclose(f);
}

void user_name(uid_t uid, char *out, size_t n)
{
    struct passwd *pw = getpwuid(uid);
    char name[PROTO_NAME_MAX];
    if (pw)
        proto_name_clean(pw->pw_name, name, sizeof name);
    else
        snprintf(name, sizeof name, "uid%u", (unsigned)uid);
    snprintf(out, n, "%s", name);
}
