/* vram devices: the machine's GPUs and who holds their memory, as
 * nvidia-smi shows them, with vramd's budgets where it knows them.
 *
 * The GPUs come from the CUDA driver (the ordinals programs use), their
 * memory and processes from NVML. Nothing here creates a CUDA context, so
 * the listing never shows itself holding memory. */
#include "../src/client/client.h"
#include "../src/client/fetch.h"
#include "../src/util/parse.h"
#include "../src/util/text.h"
#include "cli.h"
#include "../src/cuda/nvml_query.h"
#include "processes.h"
#include "visible.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

struct listing {
    struct visible gpus;
    bool nvml;
    char nvml_error[512];
    bool memory_known[OPT_MAX_DEVICES];
    struct nvml_memory memory[OPT_MAX_DEVICES];
    struct nvml_sensors sensors[OPT_MAX_DEVICES]; /* -1: NVML cannot say */
    int nproc[OPT_MAX_DEVICES]; /* -1: unknown */
    struct nvml_process *proc[OPT_MAX_DEVICES];
    bool ledger; /* vramd answered */
    struct snapshot snap;
};

/* The budget vramd granted this process on this GPU, if it knows one: its
 * own, or, for a process of a job that holds none of its own (a vram run
 * command's, a Slurm step's), the job's, which its processes share. */
static bool budget_of(const struct listing *l, const char *uuid, unsigned pid, uint64_t *grant)
{
    if (!l->ledger || pid == 0)
        return false;
    for (int i = 0; i < l->snap.n; i++) {
        const struct snap_entry *e = &l->snap.e[i];
        if (e->role != 'p' || e->pid != (int)pid)
            continue;
        for (int d = 0; d < l->snap.ndev; d++)
            if (l->snap.dev[d].index == e->dev && strcmp(l->snap.dev[d].uuid, uuid) == 0) {
                *grant = e->grant;
                for (int k = 0; !e->grant && k < l->snap.n; k++) {
                    const struct snap_entry *j = &l->snap.e[k];
                    if (j->role == 'j' && j->dev == e->dev && j->uid == e->uid &&
                        strcmp(j->job, e->job) == 0)
                        *grant = j->grant;
                }
                return true;
            }
    }
    return false;
}

static void take(struct listing *l, const char *socket_path)
{
    for (int g = 0; g < l->gpus.n; g++) {
        l->nproc[g] = -1;
        l->sensors[g] = (struct nvml_sensors){-1, -1, -1, -1, -1};
        if (!l->nvml)
            continue;
        char err[512];
        nvmlDevice_t d;
        if (nvml_by_uuid(l->gpus.gpu[g].uuid, &d, err, sizeof err) == 0) {
            nvml_sensors(d, &l->sensors[g]);
            l->memory_known[g] = nvml_memory(d, &l->memory[g], err, sizeof err) == 0;
            l->nproc[g] = nvml_processes_on(d, &l->proc[g], err, sizeof err);
        }
        if ((!l->memory_known[g] || l->nproc[g] < 0) && !l->nvml_error[0])
            snprintf(l->nvml_error, sizeof l->nvml_error, "%s", err);
    }
    char why[512];
    l->ledger = socket_path && snapshot_fetch(socket_path, &l->snap, why, sizeof why) == 0;
}

static void bar(char *out, size_t n, uint64_t used, uint64_t total)
{
    size_t width = n - 1;
    size_t fill = total ? (size_t)((double)used / (double)total * (double)width + 0.5) : 0;
    for (size_t i = 0; i < width; i++)
        out[i] = i < fill ? '#' : '.';
    out[width] = 0;
}

static void brief(const struct listing *l)
{
    for (int g = 0; g < l->gpus.n; g++) {
        const struct visible_gpu *gpu = &l->gpus.gpu[g];
        char b[21];
        if (!l->memory_known[g]) {
            printf("GPU %d  %s  used: unknown (%s)\n", g, format_size(gpu->total).text,
                   l->nvml_error);
            continue;
        }
        bar(b, sizeof b, l->memory[g].used, l->memory[g].total);
        printf("GPU %d  [%s]  %10s used of %s\n", g, b, format_size(l->memory[g].used).text,
               format_size(l->memory[g].total).text);
    }
}

/* A command for one line of a table: printable, and cut to `width`. */
static void printable(char *out, size_t n, const char *in, int width)
{
    text_printable(out, width > 0 && (size_t)width + 1 < n ? (size_t)width + 1 : n, in);
}

static void table(const struct listing *l)
{
    struct winsize ws;
    int width = isatty(STDOUT_FILENO) && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col
                    ? ws.ws_col
                    : 0; /* not a terminal: whole commands */
    printf("%-4s %-23s %11s %11s %11s %4s %4s %5s\n", "GPU", "NAME / UUID", "TOTAL", "USED", "FREE",
           "UTIL", "TEMP", "POWER");
    for (int g = 0; g < l->gpus.n; g++) {
        const struct visible_gpu *gpu = &l->gpus.gpu[g];
        const struct nvml_sensors *x = &l->sensors[g];
        char used[32] = "-", free_b[32] = "-", util[16] = "-", temp[16] = "-", power[32] = "-";
        if (l->memory_known[g]) {
            snprintf(used, sizeof used, "%s", format_size(l->memory[g].used).text);
            snprintf(free_b, sizeof free_b, "%s", format_size(l->memory[g].free).text);
        }
        if (x->gpu_percent >= 0)
            snprintf(util, sizeof util, "%d%%", x->gpu_percent);
        if (x->celsius >= 0)
            snprintf(temp, sizeof temp, "%dC", x->celsius);
        if (x->milliwatts >= 0)
            snprintf(power, sizeof power, "%ldW", x->milliwatts / 1000);
        printf("%-4d %-23.23s %11s %11s %11s %4s %4s %5s\n", g, gpu->name,
               format_size(gpu->total).text, used, free_b, util, temp, power);
        printf("%-4s %s\n", "", gpu->uuid);
    }
    if (l->gpus.n == 0)
        printf("(no GPU)\n");
    printf("\n%-4s %8s %-12s %11s %11s  %s\n", "GPU", "PID", "USER", "USED", "BUDGET",
           "COMMAND");
    int shown = 0;
    for (int g = 0; g < l->gpus.n; g++) {
        if (l->nproc[g] < 0) {
            printf("%-4d %s\n", g, l->nvml_error[0] ? l->nvml_error : "processes unknown");
            continue;
        }
        for (int i = 0; i < l->nproc[g]; i++) {
            const struct nvml_process *p = &l->proc[g][i];
            struct process_identity id;
            process_identify(p->pid, &id);
            char used[32] = "n/a", budget[32] = "-", cmd[512];
            uint64_t grant;
            if (p->used_known)
                snprintf(used, sizeof used, "%s", format_size(p->used).text);
            if (budget_of(l, l->gpus.gpu[g].uuid, p->pid, &grant))
                snprintf(budget, sizeof budget, "%s", format_size(grant).text);
            printable(cmd, sizeof cmd, id.command, width ? width - 52 : 0);
            printf("%-4d %8u %-12.12s %11s %11s  %s\n", g, p->pid, id.user, used, budget, cmd);
            shown++;
        }
    }
    if (shown == 0 && l->nvml)
        printf("     (no process holds GPU memory)\n");
}

static void json_string(const char *s)
{
    putchar('"');
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            printf("\\%c", *p);
        else if (*p < 32 || *p >= 127)
            printf("\\u%04x", *p); /* bytes, not decoded: /proc's text has no encoding */
        else
            putchar(*p);
    }
    putchar('"');
}

static void json(const struct listing *l)
{
    printf("{\"gpus\":[");
    for (int g = 0; g < l->gpus.n; g++) {
        const struct visible_gpu *gpu = &l->gpus.gpu[g];
        printf("%s{\"index\":%d,\"name\":", g ? "," : "", g);
        json_string(gpu->name);
        printf(",\"uuid\":");
        json_string(gpu->uuid);
        printf(",\"total\":%llu", (unsigned long long)gpu->total);
        if (l->memory_known[g])
            printf(",\"used\":%llu,\"free\":%llu", (unsigned long long)l->memory[g].used,
                   (unsigned long long)l->memory[g].free);
        else
            printf(",\"used\":null,\"free\":null");
        const struct nvml_sensors *x = &l->sensors[g];
        const long figures[] = {x->gpu_percent, x->celsius, x->milliwatts, x->limit_milliwatts};
        const char *names[] = {"utilization", "temperature", "power_mw", "power_limit_mw"};
        for (int k = 0; k < 4; k++)
            if (figures[k] >= 0)
                printf(",\"%s\":%ld", names[k], figures[k]);
            else
                printf(",\"%s\":null", names[k]);
        if (l->nproc[g] < 0) {
            printf(",\"processes\":null}");
            continue;
        }
        printf(",\"processes\":[");
        for (int i = 0; i < l->nproc[g]; i++) {
            const struct nvml_process *p = &l->proc[g][i];
            struct process_identity id;
            process_identify(p->pid, &id);
            uint64_t grant;
            printf("%s{\"pid\":%u,\"uid\":", i ? "," : "", p->pid);
            if (id.uid >= 0)
                printf("%ld", id.uid);
            else
                printf("null");
            printf(",\"user\":");
            json_string(id.user);
            printf(",\"command\":");
            json_string(id.command);
            if (p->used_known)
                printf(",\"used\":%llu", (unsigned long long)p->used);
            else
                printf(",\"used\":null");
            if (budget_of(l, gpu->uuid, p->pid, &grant))
                printf(",\"budget\":%llu}", (unsigned long long)grant);
            else
                printf(",\"budget\":null}");
        }
        printf("]}");
    }
    printf("],\"nvml_error\":");
    if (l->nvml_error[0])
        json_string(l->nvml_error);
    else
        printf("null");
    printf(",\"vramd\":%s}\n", l->ledger ? "true" : "false");
}

/* nvidia-smi --query-gpu=index,uuid,name,memory.total,memory.used,
 * memory.free,utilization.gpu,temperature.gpu,power.draw
 * --format=csv[,noheader][,nounits]: the same names, units and forms (the
 * header keeps its units, as nvidia-smi's does), so that scripts written
 * for it read it. */
static void csv(const struct listing *l, bool header, bool units)
{
    if (header)
        printf("index, uuid, name, memory.total [MiB], memory.used [MiB], memory.free [MiB], "
               "utilization.gpu [%%], temperature.gpu, power.draw [W]\n");
    for (int g = 0; g < l->gpus.n; g++) {
        const struct visible_gpu *gpu = &l->gpus.gpu[g];
        const struct nvml_sensors *x = &l->sensors[g];
        char name[sizeof gpu->name];
        printable(name, sizeof name, gpu->name, 0);
        /* nvidia-smi's MiB are whole: the bytes shifted down. */
        char used[32] = "[N/A]", free_b[32] = "[N/A]", util[32] = "[N/A]", temp[32] = "[N/A]",
             power[32] = "[N/A]";
        const char *mib = units ? " MiB" : "";
        if (l->memory_known[g]) {
            snprintf(used, sizeof used, "%llu%s", (unsigned long long)(l->memory[g].used >> 20), mib);
            snprintf(free_b, sizeof free_b, "%llu%s", (unsigned long long)(l->memory[g].free >> 20),
                     mib);
        }
        if (x->gpu_percent >= 0)
            snprintf(util, sizeof util, "%d%s", x->gpu_percent, units ? " %" : "");
        if (x->celsius >= 0)
            snprintf(temp, sizeof temp, "%d", x->celsius);
        if (x->milliwatts >= 0)
            snprintf(power, sizeof power, "%ld.%02ld%s", x->milliwatts / 1000,
                     x->milliwatts % 1000 / 10, units ? " W" : "");
        printf("%d, %s, %s, %llu%s, %s, %s, %s, %s, %s\n", g, gpu->uuid, name,
               (unsigned long long)(gpu->total >> 20), mib, used, free_b, util, temp, power);
    }
}

/* --format csv, with nvidia-smi's noheader and nounits in any order. */
static int parse_format(const char *v, bool *header, bool *units)
{
    char copy[128];
    snprintf(copy, sizeof copy, "%s", v);
    *header = *units = true;
    bool is_csv = false;
    for (char *save = NULL, *w = strtok_r(copy, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
        if (strcmp(w, "csv") == 0)
            is_csv = true;
        else if (strcmp(w, "noheader") == 0)
            *header = false;
        else if (strcmp(w, "nounits") == 0)
            *units = false;
        else
            return -1;
    }
    return is_csv && strlen(v) < sizeof copy ? 0 : -1;
}

static void devices_usage(FILE *out)
{
    fprintf(out,
            "usage: vram devices [--brief | --json | --format csv[,noheader][,nounits]]\n"
            "\n"
            "Which GPUs this machine has and who holds their memory, as nvidia-smi shows\n"
            "them: each GPU as CUDA programs number it here (CUDA_VISIBLE_DEVICES applies),\n"
            "with its name, UUID, total, used and free memory, utilisation, temperature\n"
            "and power (- where NVML cannot say); then each process holding\n"
            "GPU memory: its GPU, pid, user, the memory it holds, its budget (where vramd\n"
            "granted one, or its command's, which the command's processes share; -\n"
            "elsewhere) and its command. Memory and processes are NVML's;\n"
            "the listing creates no CUDA context and holds no GPU memory itself.\n"
            "\n"
            "  --brief    one line per GPU: how full it is\n"
            "  --json     the same as the full listing, as one JSON object for scripts:\n"
            "             {\"gpus\": [{\"index\", \"name\", \"uuid\", \"total\", \"used\", \"free\",\n"
            "             \"utilization\" (%%), \"temperature\" (C), \"power_mw\",\n"
            "             \"power_limit_mw\", \"processes\": [{\"pid\", \"uid\", \"user\",\n"
            "             \"command\", \"used\", \"budget\"}]}], \"nvml_error\", \"vramd\"};\n"
            "             sizes in bytes, null where unknown\n"
            "  --format csv[,noheader][,nounits]\n"
            "             one line per GPU for scripts, as nvidia-smi --format=csv writes\n"
            "             --query-gpu=index,uuid,name,memory.total,memory.used,memory.free,\n"
            "             utilization.gpu,temperature.gpu,power.draw: a header naming the\n"
            "             fields and their units (noheader: none), values with their units\n"
            "             (nounits: bare); [N/A] where NVML cannot say. index is as above\n"
            "             (CUDA_VISIBLE_DEVICES applies): give programs the uuid, which\n"
            "             names the same GPU everywhere\n"
            "  --help     this text\n");
}

int cmd_devices(int argc, char **argv)
{
    const char *brief_flag = NULL, *json_flag = NULL, *help = NULL, *format = NULL;
    const struct cli_option table_[] = {
        {"--brief", CLI_FLAG, &brief_flag}, {"--json", CLI_FLAG, &json_flag},
        {"--format", CLI_VALUE, &format},
        {"--help", CLI_FLAG, &help},        {"-h", CLI_FLAG, &help},
        {NULL, 0, NULL},
    };
    if (cli_parse("devices", table_, argc, argv, 2, false) < 0)
        return 2;
    if (help) {
        devices_usage(stdout);
        return 0;
    }
    if (!!brief_flag + !!json_flag + !!format > 1)
        return cli_usage_error("devices", "--brief, --json and --format: give one of them");
    bool header = true, units = true;
    if (format && parse_format(format, &header, &units) != 0)
        return cli_usage_error("devices", "--format \"%s\": not a form; accepted: csv, with "
                               "noheader and nounits after commas as nvidia-smi takes them "
                               "(csv,noheader,nounits)", format);

    static struct listing l; /* large: not on the stack */
    char err[2048];
    if (visible_gpus(NULL, NULL, &l.gpus, err, sizeof err) != 0) {
        fprintf(stderr, "vram devices: %s\n", err);
        return 1;
    }
    l.nvml = nvml_open(NULL, "vram devices", l.nvml_error, sizeof l.nvml_error) == 0;
    /* Budgets are asked of vramd only for the full listing, and only if
     * one runs: a listing never waits for a daemon that is not there. */
    char sock[256], derr[512];
    bool daemon = !brief_flag && !format &&
                  ledger_find_socket(sock, sizeof sock, derr, sizeof derr) == 0;
    take(&l, daemon ? sock : NULL);
    if (json_flag)
        json(&l);
    else if (format)
        csv(&l, header, units);
    else if (brief_flag)
        brief(&l);
    else
        table(&l);
    for (int g = 0; g < l.gpus.n; g++)
        free(l.proc[g]);
    if (l.ledger)
        snapshot_free(&l.snap);
    if (l.nvml)
        nvml_close();
    return 0;
}
