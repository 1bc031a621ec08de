/* processes: who a process is, from /proc. */
#include "processes.h"

#include "../src/util/proc.h"

#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void process_identify(unsigned pid, struct process_identity *id)
{
    id->uid = -1;
    snprintf(id->user, sizeof id->user, "-");
    snprintf(id->command, sizeof id->command, "-");
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%u/status", pid);
    FILE *f = fopen(path, "re");
    if (f) {
        while (fgets(line, sizeof line, f))
            if (strncmp(line, "Uid:", 4) == 0) {
                id->uid = strtol(line + 4, NULL, 10);
                break;
            }
        fclose(f);
    }
    if (id->uid >= 0) {
        struct passwd pw, *res = NULL;
        char buf[4096];
        if (getpwuid_r((uid_t)id->uid, &pw, buf, sizeof buf, &res) == 0 && res)
            snprintf(id->user, sizeof id->user, "%s", pw.pw_name);
        else
            snprintf(id->user, sizeof id->user, "%ld", id->uid);
    }
    if (!process_command_line(pid, id->command, sizeof id->command))
        snprintf(id->command, sizeof id->command, "-");
}

bool process_command_line(unsigned pid, char *out, size_t n)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%u/cmdline", pid);
    FILE *f = fopen(path, "re");
    if (!f || n == 0) {
        if (f)
            fclose(f);
        return false;
    }
    size_t len = fread(out, 1, n - 1, f);
    fclose(f);
    while (len > 0 && out[len - 1] == 0)
        len--;
    for (size_t i = 0; i < len; i++)
        if (out[i] == 0 || out[i] == '\n' || out[i] == '\t')
            out[i] = ' ';
    out[len] = 0;
    return len > 0;
}

unsigned long long process_start(unsigned pid) { return proc_start_time((pid_t)pid); }

const char *process_without_folder(const char *line)
{
    size_t end = strcspn(line, " ");
    const char *base = line;
    for (size_t k = 0; k < end; k++)
        if (line[k] == '/' && k + 1 < end)
            base = line + k + 1;
    return base;
}
