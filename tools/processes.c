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

/* /proc/PID/cmdline as it is: the arguments, each ended by a NUL, in out
 * (NUL-ended once more); its length without the trailing NULs, 0 if it
 * cannot be read. */
static size_t raw_command_line(unsigned pid, char *out, size_t n)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%u/cmdline", pid);
    if (!n)
        return 0;
    out[0] = 0;
    FILE *f = fopen(path, "re");
    if (!f)
        return 0;
    size_t len = fread(out, 1, n - 1, f);
    fclose(f);
    while (len > 0 && out[len - 1] == 0)
        len--;
    out[len] = 0;
    return len;
}

/* The arguments from `from` on, joined by spaces. */
static void join(char *line, size_t from, size_t len)
{
    memmove(line, line + from, len - from + 1);
    for (size_t i = 0; i < len - from; i++)
        if (line[i] == 0 || line[i] == '\n' || line[i] == '\t')
            line[i] = ' ';
}

bool process_command_line(unsigned pid, char *out, size_t n)
{
    size_t len = raw_command_line(pid, out, n);
    if (!len)
        return false;
    join(out, 0, len);
    return true;
}

bool process_program(unsigned pid, bool after_dashes, char *out, size_t n, size_t *name_len)
{
    char line[4096]; /* the whole line, wherever "--" is; then as much as out holds */
    size_t len = raw_command_line(pid, line, sizeof line);
    if (!len || !n)
        return false;
    size_t from = 0;
    for (size_t i = 0; after_dashes && i < len; i += strlen(line + i) + 1)
        if (strcmp(line + i, "--") == 0) {
            if (i + 3 <= len)
                from = i + 3;
            break;
        }
    /* The program's own folder is cut at its last '/' before the NUL that
     * ends it: a folder may have spaces, and the arguments may have '/'. */
    size_t name_end = from + strlen(line + from);
    for (size_t k = from; k < name_end; k++)
        if (line[k] == '/' && k + 1 < name_end)
            from = k + 1;
    join(line, from, len);
    snprintf(out, n, "%s", line);
    if (name_len)
        *name_len = name_end - from < n ? name_end - from : n - 1;
    return true;
}

unsigned long long process_start(unsigned pid) { return proc_start_time((pid_t)pid); }
