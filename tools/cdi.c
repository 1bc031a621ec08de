/* vram cdi generate: a CDI spec (the Container Device Interface, as podman
 * and Docker 25+ read it) whose devices, vram.dev/gpu=0, =GPU-<uuid> and
 * =all, put a container under vram: the interposer, the vram command and
 * vramd's socket folder mounted into it, LD_PRELOAD and VRAM_DAEMON set,
 * and vram oci-hook run by the runtime at the container's creation and
 * after it stopped (which makes the container one vram job).
 *
 * The spec names the files as they are on this host (the container sees
 * them at the same paths), so it is made where vram is installed, after
 * vramd's socket folder exists, and made again when either moves. Its
 * cdiVersion is 0.5.0: the newest podman 4.3 (Debian 12) reads, and what
 * device names that start with a digit need (CDI's own rule), so that
 * every runtime with CDI reads it.
 */
#include "../src/client/client.h"
#include "../src/command/command.h"
#include "../src/cuda/nvml_query.h"
#include "../src/util/json.h"
#include "cli.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CDI_VERSION "0.5.0"
#define CDI_KIND "vram.dev/gpu"
#define CDI_MAX_GPUS 64

static void usage(FILE *out)
{
    fprintf(out,
            "usage: vram cdi generate [--output FILE]\n"
            "\n"
            "Writes a CDI spec (the Container Device Interface, read by podman and by\n"
            "Docker 25 and later) that puts a container under vram: its devices\n"
            "vram.dev/gpu=N (NVML's index), vram.dev/gpu=GPU-<uuid> and vram.dev/gpu=all\n"
            "mount the interposer, the vram command and vramd's socket folder into the\n"
            "container, set LD_PRELOAD and VRAM_DAEMON, and have the runtime run\n"
            "vram oci-hook when the container is made and after it stopped, which makes\n"
            "the container one vramd job (its processes share one budget, admitted by\n"
            "vramd; a refusal fails the start). Beside NVIDIA's own spec:\n"
            "  vram cdi generate --output /etc/cdi/vram.json\n"
            "  podman run --device nvidia.com/gpu=0 --device vram.dev/gpu=0 \\\n"
            "      -e VRAM_MEMORY_LIMIT=4GiB IMAGE python train.py\n"
            "The container then sees its budget as the GPU's memory. The spec names\n"
            "files by their paths on this host: make it again when vram moves.\n"
            "\n"
            "options:\n"
            "  --output FILE    write the spec to FILE (made whole, then renamed into\n"
            "                   place), not to stdout\n"
            "  --help           this text\n"
            "\n"
            "environment: VRAM_DAEMON (vramd's socket, whose folder is mounted),\n"
            "VRAM_PRELOAD_LIBRARY (the interposer), as for vram run.\n");
}

struct spec {
    char vram[PATH_MAX], preload[PATH_MAX], socket[PATH_MAX], socket_dir[PATH_MAX];
    int ngpus;
    struct nvml_about gpu[CDI_MAX_GPUS];
};

static void mount_entry(FILE *f, const char *path, bool writable, bool last)
{
    fprintf(f, "      {\"hostPath\": ");
    json_string(f, path);
    fprintf(f, ", \"containerPath\": ");
    json_string(f, path);
    fprintf(f, ", \"options\": [\"%s\", \"nosuid\", \"nodev\", \"bind\"]}%s\n",
            writable ? "rw" : "ro", last ? "" : ",");
}

/* The hooks of one device: vram oci-hook at creation and after the stop,
 * told which GPU the device is (or all). */
static void hooks(FILE *f, const struct spec *s, const char *gpu)
{
    static const char *const stage[] = {"createRuntime", "poststop"};
    fprintf(f, "      \"hooks\": [\n");
    for (int i = 0; i < 2; i++) {
        fprintf(f, "        {\"hookName\": \"%s\", \"path\": ", stage[i]);
        json_string(f, s->vram);
        fprintf(f, ", \"args\": [\"vram\", \"oci-hook\", \"%s\", \"--gpu\", ", stage[i]);
        json_string(f, gpu);
        /* A runtime gives a hook no environment but this. */
        char env[PATH_MAX + 32];
        snprintf(env, sizeof env, "VRAM_DAEMON=%s", s->socket[0] ? s->socket : "off");
        fprintf(f, "], \"env\": [");
        json_string(f, env);
        fprintf(f, "]}%s\n", i ? "" : ",");
    }
    fprintf(f, "      ]\n");
}

static void device(FILE *f, const struct spec *s, const char *name, const char *gpu, bool last)
{
    fprintf(f, "    {\"name\": ");
    json_string(f, name);
    fprintf(f, ", \"containerEdits\": {\n");
    hooks(f, s, gpu);
    fprintf(f, "    }}%s\n", last ? "" : ",");
}

static void write_spec(FILE *f, const struct spec *s)
{
    fprintf(f, "{\n  \"cdiVersion\": \"" CDI_VERSION "\",\n  \"kind\": \"" CDI_KIND "\",\n");
    fprintf(f, "  \"devices\": [\n");
    for (int i = 0; i < s->ngpus; i++) {
        char index[16];
        snprintf(index, sizeof index, "%d", i);
        device(f, s, index, s->gpu[i].uuid, false);
        device(f, s, s->gpu[i].uuid, s->gpu[i].uuid, false);
    }
    device(f, s, "all", "all", true);
    fprintf(f, "  ],\n  \"containerEdits\": {\n    \"env\": [");
    char env[PATH_MAX + 32];
    snprintf(env, sizeof env, "LD_PRELOAD=%s", s->preload);
    json_string(f, env);
    if (s->socket[0]) {
        snprintf(env, sizeof env, "VRAM_DAEMON=%s", s->socket);
        fputs(", ", f);
        json_string(f, env);
        /* One budget for all the container's processes: the job's command
         * state, which vramd hands each of them (src/client/agent.h). */
        if (strcmp(s->socket, "off") != 0) {
            fputs(", ", f);
            json_string(f, COMMAND_ENV "=" COMMAND_FROM_DAEMON);
        }
    }
    fprintf(f, "],\n    \"mounts\": [\n");
    mount_entry(f, s->preload, false, false);
    mount_entry(f, s->vram, false, !s->socket_dir[0]);
    if (s->socket_dir[0])
        mount_entry(f, s->socket_dir, true, true);
    fprintf(f, "    ]\n  }\n}\n");
}

__attribute__((format(printf, 1, 2))) static int cdi_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "vram cdi generate: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 1;
}

/* A path as the spec may carry it: one that JSON and the runtime's mount
 * options take as it is (no comma, which mount options split on). */
static bool path_ok(const char *p) { return p[0] == '/' && !strchr(p, ','); }

static int generate(const char *output)
{
    struct spec *s = calloc(1, sizeof *s);
    if (!s)
        return cdi_fail("out of memory");
    int rc = 1;
    ssize_t n = readlink("/proc/self/exe", s->vram, sizeof s->vram - 1);
    if (n <= 0) {
        rc = cdi_fail("cannot find the vram command itself (/proc/self/exe)");
        goto out;
    }
    s->vram[n] = 0;
    char found_at[PATH_MAX];
    if (cli_find_preload(found_at, sizeof found_at) != 0 || !realpath(found_at, s->preload)) {
        rc = cdi_fail("cannot find the interposer %s (set VRAM_PRELOAD_LIBRARY to its path)",
                      found_at);
        goto out;
    }
    /* vramd's socket as every client finds it; its folder is mounted (a
     * restarted vramd makes a new socket, which a mount of the file would
     * not show). Without one, the system's place. */
    char err[256];
    int found = ledger_find_socket(s->socket, sizeof s->socket, err, sizeof err);
    if (found < 0) {
        rc = cdi_fail("%s", err);
        goto out;
    }
    const char *env = getenv("VRAM_DAEMON");
    bool off = found > 0 && env && strcmp(env, "off") == 0;
    if (off) /* said so: the containers' processes work without vramd */
        snprintf(s->socket, sizeof s->socket, "off");
    else if (found > 0)
        snprintf(s->socket, sizeof s->socket, "%s", LEDGER_SYSTEM_SOCKET);
    snprintf(s->socket_dir, sizeof s->socket_dir, "%s", off ? "" : s->socket);
    char *slash = strrchr(s->socket_dir, '/');
    if (slash && slash != s->socket_dir)
        *slash = 0;
    struct stat st;
    if (!off && (stat(s->socket_dir, &st) != 0 || !S_ISDIR(st.st_mode))) {
        /* A bind mount of a folder that is not there fails every container,
         * and a VRAM_DAEMON naming a socket that is not there makes each of
         * their processes wait for a daemon that is down. */
        fprintf(stderr, "vram cdi generate: vramd's socket folder %s is not there (vramd makes "
                        "it when it starts): the spec neither mounts it nor sets VRAM_DAEMON, "
                        "and containers made with it reach no vramd; make the spec again once "
                        "vramd runs\n",
                s->socket_dir);
        s->socket_dir[0] = 0;
        s->socket[0] = 0;
    }
    const char *paths[] = {s->vram, s->preload, s->socket_dir};
    for (size_t i = 0; i < 3; i++)
        if (paths[i][0] && !path_ok(paths[i])) {
            rc = cdi_fail("%s: a path with a comma cannot be mounted by a CDI spec", paths[i]);
            goto out;
        }
    if (nvml_open(NULL, "vram cdi generate", err, sizeof err) != 0) {
        rc = cdi_fail("%s", err);
        goto out;
    }
    int count = nvml_count(err, sizeof err);
    for (int i = 0; i < count && s->ngpus < CDI_MAX_GPUS; i++) {
        nvmlDevice_t d;
        if (nvml_by_index((unsigned)i, &d, err, sizeof err) != 0 ||
            nvml_about(d, &s->gpu[s->ngpus], err, sizeof err) != 0)
            break;
        if (!cli_gpu_uuid_ok(s->gpu[s->ngpus].uuid)) {
            snprintf(err, sizeof err, "GPU %d's UUID is not one", i);
            break;
        }
        s->ngpus++;
    }
    nvml_close();
    if (count < 0 || s->ngpus != count) {
        rc = cdi_fail("NVML cannot list the GPUs: %s", err);
        goto out;
    }
    if (!output) {
        write_spec(stdout, s);
        rc = fflush(stdout) == 0 ? 0 : 1;
        goto out;
    }
    char tmp[PATH_MAX + 32];
    snprintf(tmp, sizeof tmp, "%s.new-%d", output, (int)getpid());
    FILE *f = fopen(tmp, "wx");
    if (!f) {
        rc = cdi_fail("--output %s: %s", output, strerror(errno));
        goto out;
    }
    write_spec(f, s);
    if (fchmod(fileno(f), 0644) != 0 || fflush(f) != 0 || fsync(fileno(f)) != 0) {
        fclose(f);
        unlink(tmp);
        rc = cdi_fail("--output %s: %s", output, strerror(errno));
        goto out;
    }
    fclose(f);
    if (rename(tmp, output) != 0) {
        unlink(tmp);
        rc = cdi_fail("--output %s: %s", output, strerror(errno));
        goto out;
    }
    rc = 0;
out:
    free(s);
    return rc;
}

int cmd_cdi(int argc, char **argv)
{
    const char *help = NULL, *output = NULL;
    const struct cli_option table[] = {{"--output", CLI_VALUE, &output},
                                       {"--help", CLI_FLAG, &help},
                                       {"-h", CLI_FLAG, &help},
                                       {NULL, CLI_FLAG, NULL}};
    char *operand[2];
    int n = cli_parse_operands("cdi", table, argc, argv, 2, operand, 2);
    if (n < 0)
        return 2;
    if (help) {
        usage(stdout);
        return 0;
    }
    if (n == 2 && strcmp(operand[0], "generate") == 0)
        return cli_usage_error("cdi", "vram cdi generate takes no operand, not \"%s\" (vram cdi "
                                      "--help)",
                               operand[1]);
    if (n != 1 || strcmp(operand[0], "generate") != 0)
        return cli_usage_error("cdi", "the command is vram cdi generate, not vram cdi%s%s (vram "
                                      "cdi --help)",
                               n ? " " : "", n ? operand[0] : "");
    if (output && !*output)
        return cli_usage_error("cdi", "--output: a file name is needed");
    return generate(output);
}
