/* vram oci-runtime (also run as vram-oci-runtime, a link to vram): an OCI
 * runtime in front of runc, for container engines without CDI (Docker
 * 20.10, Debian 12's docker.io): dockerd's "runtimes" names it, and for a
 * container whose environment has VRAM_CONTAINER_GPUS, it adds to the
 * bundle's config.json the hooks a CDI spec of vram cdi generate adds
 * (vram oci-hook createRuntime and poststop, per GPU), then runs the real
 * runtime with the same arguments. Everything else (the mounts and the
 * variables the spec would add) is the engine's command line, as the
 * README says. The config.json is the engine's, written for this container
 * a moment ago; it is read strictly (json_read.h) and rewritten whole, or
 * not at all.
 */
#include "../src/util/json.h"
#include "../src/util/json_read.h"
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CONFIG_MAX (4u << 20)
#define GPUS_MAX 16

struct edit {
    size_t at;  /* inserted before this byte */
    char *text; /* malloc()ed */
};

/* VRAM_NAME=... in config.json's process.env, into out ("" if absent). */
static void env_of(const struct json_doc *d, const char *name, char *out, size_t n)
{
    out[0] = 0;
    int p = json_member(d, 0, "process");
    int env = p >= 0 && d->tok[p].type == JSON_OBJECT ? json_member(d, p, "env") : -1;
    if (env < 0 || d->tok[env].type != JSON_ARRAY)
        return;
    size_t len = strlen(name);
    char entry[PATH_MAX + 64];
    for (uint32_t i = 0, t = (uint32_t)env + 1; i < d->tok[env].size; i++, t = d->tok[t].end)
        if (d->tok[t].type == JSON_STRING && json_text(d, (int)t, entry, sizeof entry) == 0 &&
            strncmp(entry, name, len) == 0 && entry[len] == '=')
            snprintf(out, n, "%s", entry + len + 1);
}

/* The hooks of one stage for each GPU, as JSON array elements. */
static char *hooks_text(const char *stage, char gpu[][96], int ngpus, const char *daemon)
{
    char *text = NULL, exe[PATH_MAX];
    size_t len = 0;
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    FILE *f = n > 0 ? open_memstream(&text, &len) : NULL;
    if (!f)
        return NULL;
    exe[n] = 0;
    for (int i = 0; i < ngpus; i++) {
        fprintf(f, "%s{\"path\":", i ? "," : "");
        json_string(f, exe);
        fprintf(f, ",\"args\":[\"vram\",\"oci-hook\",\"%s\",\"--gpu\",", stage);
        json_string(f, gpu[i]);
        fprintf(f, "]");
        if (daemon[0]) {
            char env[PATH_MAX + 16];
            snprintf(env, sizeof env, "VRAM_DAEMON=%s", daemon);
            fprintf(f, ",\"env\":[");
            json_string(f, env);
            fprintf(f, "]");
        }
        fprintf(f, "}");
    }
    fclose(f);
    return text;
}

__attribute__((format(printf, 3, 4))) static int fail(char *why, size_t n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, n, fmt, ap);
    va_end(ap);
    return -1;
}

/* The edits that put the hooks in: into hooks.STAGE where it is an array,
 * else a new member of hooks, else a new hooks object. */
static int plan(const struct json_doc *d, const char *pre, const char *post, struct edit *e,
                int *ne, char *why, size_t n)
{
    const char *stage[2] = {"createRuntime", "poststop"}, *text[2] = {pre, post};
    int hooks = json_member(d, 0, "hooks");
    if (hooks == -2 || (hooks >= 0 && d->tok[hooks].type != JSON_OBJECT))
        return fail(why, n, "config.json's hooks is %s",
                    hooks == -2 ? "there twice" : "not an object");
    char *added = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&added, &len);
    if (!f)
        return fail(why, n, "out of memory");
    int members = 0;
    for (int s = 0; s < 2; s++) {
        int a = hooks >= 0 ? json_member(d, hooks, stage[s]) : -1;
        if (a == -2 || (a >= 0 && d->tok[a].type != JSON_ARRAY)) {
            fclose(f);
            free(added);
            return fail(why, n, "config.json's hooks.%s is %s", stage[s],
                        a == -2 ? "there twice" : "not an array");
        }
        if (a >= 0) { /* ours first, then the engine's own */
            size_t k = strlen(text[s]) + 2;
            e[*ne].at = d->tok[a].start + 1;
            e[*ne].text = malloc(k);
            if (e[*ne].text)
                snprintf(e[*ne].text, k, "%s%s", text[s], d->tok[a].size ? "," : "");
            (*ne)++;
            continue;
        }
        fprintf(f, "%s\"%s\":[%s]", members++ ? "," : "", stage[s], text[s]);
    }
    fclose(f);
    if (!members) {
        free(added);
        return 0;
    }
    size_t k = len + 16;
    char *t = malloc(k);
    if (t && hooks >= 0)
        snprintf(t, k, "%s%s", added, d->tok[hooks].size ? "," : "");
    else if (t)
        snprintf(t, k, "\"hooks\":{%s}%s", added, d->tok[0].size ? "," : "");
    free(added);
    e[*ne].at = (hooks >= 0 ? d->tok[hooks].start : d->tok[0].start) + 1;
    e[(*ne)++].text = t;
    return 0;
}

/* config.json with the hooks added, written whole in place of the old. */
static int write_edited(int dir, const char *text, size_t len, struct edit *e, int ne,
                        mode_t mode, char *why, size_t n)
{
    for (int i = 0; i < ne; i++)
        if (!e[i].text)
            return fail(why, n, "out of memory");
    /* In the order of the text. */
    for (int i = 1; i < ne; i++)
        for (int j = i; j > 0 && e[j - 1].at > e[j].at; j--) {
            struct edit t = e[j];
            e[j] = e[j - 1];
            e[j - 1] = t;
        }
    char tmp[64];
    snprintf(tmp, sizeof tmp, "config.json.vram-%d", (int)getpid());
    int fd = openat(dir, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode & 07777);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
        if (fd >= 0)
            close(fd);
        return fail(why, n, "cannot write the bundle's %s: %s", tmp, strerror(errno));
    }
    size_t at = 0;
    for (int i = 0; i < ne; i++) {
        fwrite(text + at, 1, e[i].at - at, f);
        fputs(e[i].text, f);
        at = e[i].at;
    }
    fwrite(text + at, 1, len - at, f);
    if (fflush(f) != 0 || ferror(f) || fsync(fileno(f)) != 0) {
        fclose(f);
        unlinkat(dir, tmp, 0);
        return fail(why, n, "cannot write the bundle's %s: %s", tmp, strerror(errno));
    }
    fclose(f);
    if (renameat(dir, tmp, dir, "config.json") != 0) {
        unlinkat(dir, tmp, 0);
        return fail(why, n, "cannot replace the bundle's config.json: %s", strerror(errno));
    }
    return 0;
}

/* Adds vram's hooks to the bundle's config.json where the container asks
 * for them (VRAM_CONTAINER_GPUS); 0, or -1 with why. */
static int add_hooks(const char *bundle, char *why, size_t n)
{
    int dir = open(bundle, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0)
        return fail(why, n, "bundle %s: %s", bundle, strerror(errno));
    int fd = openat(dir, "config.json", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    char *text = NULL;
    struct json_doc d = {0};
    struct edit e[3] = {{0}};
    int ne = 0, rc = -1;
    char err[256], list[512], daemon[PATH_MAX], gpu[GPUS_MAX][96];
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > CONFIG_MAX) {
        fail(why, n, "bundle %s: config.json: %s", bundle,
             fd < 0 ? strerror(errno) : "not a regular file of at most 4 MiB");
        goto out;
    }
    text = malloc((size_t)st.st_size + 1);
    ssize_t len = text ? read(fd, text, (size_t)st.st_size) : -1;
    if (len != st.st_size) {
        fail(why, n, "bundle %s: cannot read config.json", bundle);
        goto out;
    }
    if (json_parse(&d, text, (size_t)len, 200000, 64, err, sizeof err) != 0 ||
        d.tok[0].type != JSON_OBJECT) {
        fail(why, n, "bundle %s: config.json is not a JSON object: %s", bundle, err);
        goto out;
    }
    env_of(&d, "VRAM_CONTAINER_GPUS", list, sizeof list);
    /* Not asked for, or a CDI spec put the hooks there already. */
    if (!list[0] || strstr(text, "\"oci-hook\"")) {
        rc = 0;
        goto out;
    }
    int ngpus = 0;
    for (char *save = NULL, *g = strtok_r(list, ",", &save); g; g = strtok_r(NULL, ",", &save)) {
        bool index = g[0] && strspn(g, "0123456789") == strlen(g);
        if (ngpus == GPUS_MAX || (!index && strcmp(g, "all") && !cli_gpu_uuid_ok(g))) {
            fail(why, n, "VRAM_CONTAINER_GPUS: \"%.60s\" is not a GPU (an index as nvidia-smi "
                 "shows it, GPU-<uuid> or all; at most 16)", g);
            goto out;
        }
        snprintf(gpu[ngpus++], sizeof gpu[0], "%s", g);
    }
    env_of(&d, "VRAM_DAEMON", daemon, sizeof daemon);
    if (!daemon[0] && getenv("VRAM_DAEMON"))
        snprintf(daemon, sizeof daemon, "%s", getenv("VRAM_DAEMON"));
    char *pre = hooks_text("createRuntime", gpu, ngpus, daemon),
         *post = hooks_text("poststop", gpu, ngpus, daemon);
    if (pre && post && plan(&d, pre, post, e, &ne, why, n) == 0)
        rc = write_edited(dir, text, (size_t)len, e, ne, st.st_mode, why, n);
    else if (!pre || !post)
        fail(why, n, "cannot find the vram command itself (/proc/self/exe)");
    free(pre);
    free(post);
out:
    for (int i = 0; i < ne; i++)
        free(e[i].text);
    json_free(&d);
    free(text);
    if (fd >= 0)
        close(fd);
    close(dir);
    return rc;
}

/* runc's and crun's global options that take a value. */
static bool takes_value(const char *opt)
{
    static const char *const with[] = {"--root", "--log", "--log-format", "--criu", "--rootless",
                                       "--cgroup-manager"};
    if (strchr(opt, '='))
        return false;
    for (size_t i = 0; i < sizeof with / sizeof *with; i++)
        if (strcmp(opt, with[i]) == 0)
            return true;
    return false;
}

int cmd_oci_runtime(int argc, char **argv, int first)
{
    const char *runtime = getenv("VRAM_OCI_RUNTIME");
    if (!runtime || !*runtime)
        runtime = "runc";
    int i = first;
    while (i < argc && argv[i][0] == '-')
        i += takes_value(argv[i]) ? 2 : 1;
    if (i < argc && (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)) {
        printf("usage: vram-oci-runtime RUNTIME-ARGUMENTS (or vram oci-runtime ...)\n"
               "\n"
               "An OCI runtime in front of runc, for container engines without CDI (Docker\n"
               "20.10): for a container whose environment sets VRAM_CONTAINER_GPUS (0,\n"
               "GPU-<uuid>, all, or a list), it adds to the bundle's config.json the hooks\n"
               "a CDI spec of vram cdi generate adds (vram oci-hook at creation and after\n"
               "the stop), then runs the real runtime, VRAM_OCI_RUNTIME (default runc),\n"
               "with the same arguments. In /etc/docker/daemon.json:\n"
               "  {\"runtimes\": {\"vram\": {\"path\": \"/usr/bin/vram-oci-runtime\"}}}\n"
               "then docker run --runtime vram -e VRAM_CONTAINER_GPUS=0 ... (the README's\n"
               "Docker section gives the mounts and variables).\n");
        return 0;
    }
    if (i < argc && (strcmp(argv[i], "create") == 0 || strcmp(argv[i], "run") == 0)) {
        const char *bundle = ".";
        for (int j = i + 1; j < argc; j++) {
            if ((strcmp(argv[j], "--bundle") == 0 || strcmp(argv[j], "-b") == 0) && j + 1 < argc)
                bundle = argv[++j];
            else if (strncmp(argv[j], "--bundle=", 9) == 0)
                bundle = argv[j] + 9;
        }
        char why[PATH_MAX + 300];
        if (add_hooks(bundle, why, sizeof why) != 0) {
            fprintf(stderr, "vram oci-runtime: %s\n", why);
            return 1;
        }
    }
    char **args = calloc((size_t)(argc - first + 2), sizeof *args);
    if (!args)
        return 1;
    args[0] = (char *)runtime;
    for (int k = first; k < argc; k++)
        args[k - first + 1] = argv[k];
    execvp(runtime, args);
    fprintf(stderr, "vram oci-runtime: cannot run the runtime %s (VRAM_OCI_RUNTIME): %s\n",
            runtime, strerror(errno));
    free(args);
    return 127;
}
