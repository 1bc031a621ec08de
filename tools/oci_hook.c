/* vram oci-hook: run by a container runtime (runc, crun) at a container's
 * creation and after it stopped, with the OCI state on stdin, as the CDI
 * spec of `vram cdi generate` names it (its hooks createRuntime and
 * poststop). It finds which container this is (id and name), its first
 * process (its pid on the host), its cgroup and its budget, and makes the
 * container one vram job (registered with vramd: oci_vramd.c).
 *
 * Everything it reads may be forged by whoever can run it: the state on
 * stdin, and a bundle that is not the runtime's. So the state is read
 * strictly and bounded (json_read.h), the bundle's config.json must be
 * root's (or the caller's) and writable by no one else, the pid must be a
 * process in the container (in its pid namespace, in its cgroup), the
 * cgroup must be the container's own (its last component names the
 * container), and a caller who is not root may speak only for a container
 * whose processes are its own (rootless podman). Each refusal names the
 * field, its value and why; the runtime then fails the container's start
 * with that message.
 */
#include "../src/client/agent.h"
#include "../src/core/options.h"
#include "../src/util/container.h"
#include "../src/util/json_read.h"
#include "../src/util/parse.h"
#include "cli.h"
#include "oci_hook.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define STATE_MAX (64u << 10)       /* the state is a few hundred bytes */
#define CONFIG_MAX (4u << 20)       /* podman's config.json: ~11 KiB, seccomp's rules included */
#define STORAGE_LIST_MAX (16u << 20) /* containers/storage's list of containers */
#define TOKENS_MAX 200000u
#define DEPTH_MAX 64

static void usage(FILE *out)
{
    fprintf(out,
            "usage: vram oci-hook createRuntime|poststop [--gpu UUID|N|all]\n"
            "\n"
            "Makes a container one vram job: run by the container runtime (runc, crun),\n"
            "never by hand, with the container's OCI state on stdin, as the CDI spec\n"
            "that vram cdi generate writes names it (podman run --device\n"
            "vram.dev/gpu=0 ...). At createRuntime it finds the container (its id and\n"
            "name), its first process (its pid on the host), its cgroup and its budget,\n"
            "and registers them with vramd as one job; at poststop it ends the job.\n"
            "\n"
            "The budget is the container's VRAM_MEMORY_LIMIT or VRAM_MEMORY_FRACTION (as\n"
            "vram run reads them), or its annotation vram.dev/limit (podman run\n"
            "--annotation vram.dev/limit=4GiB), else vramd's policy default. A bad value,\n"
            "a forged state, a process or cgroup that is not the container's, or a\n"
            "caller who is neither root nor the container's user fails the container's\n"
            "start with the reason. VRAM_LOG=info says what was found.\n"
            "\n"
            "options:\n"
            "  --gpu UUID|N|all the GPU the container was given (the CDI device's)\n"
            "  --help           this text\n");
}

struct hook {
    const char *stage;
    char id[256]; /* for messages, once known */
    struct json_doc state, config;
    char *state_text, *config_text;
    int bundle_fd;
};

__attribute__((format(printf, 2, 3))) static int refuse(const struct hook *h, const char *fmt, ...)
{
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (h->id[0])
        fprintf(stderr, "vram oci-hook %s: container %.64s: %s\n", h->stage, h->id, msg);
    else
        fprintf(stderr, "vram oci-hook %s: %s\n", h->stage, msg);
    return 1;
}

/* Up to max bytes from fd into a malloc()ed, NUL-terminated buffer; its
 * length, or -1 (errno set; EFBIG when there is more than max). */
static ssize_t read_bounded(int fd, size_t max, char **out)
{
    char *buf = malloc(max + 1);
    if (!buf)
        return -1;
    size_t n = 0;
    for (;;) {
        ssize_t r = read(fd, buf + n, max + 1 - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            free(buf);
            return -1;
        }
        if (r == 0)
            break;
        n += (size_t)r;
        if (n > max) {
            free(buf);
            errno = EFBIG;
            return -1;
        }
    }
    buf[n] = 0;
    *out = buf;
    return (ssize_t)n;
}

/* Printable ASCII of at most n-1 bytes, for a value quoted in a message. */
static const char *shown(const char *s, char *buf, size_t n)
{
    size_t o = 0;
    for (; *s && o + 4 < n; s++)
        buf[o++] = (*s >= 0x20 && *s < 0x7f) ? *s : '?';
    if (*s && o + 4 <= n)
        memcpy(buf + o, "...", 3), o += 3;
    buf[o] = 0;
    return buf;
}

/* State field `key` as a string into out: 0, or 1 after a refusal. */
static int state_text(struct hook *h, const char *key, bool required, char *out, size_t n)
{
    int t = json_member(&h->state, 0, key);
    out[0] = 0;
    if (t == -2)
        return refuse(h, "the state has \"%s\" twice: a forged state", key);
    if (t < 0)
        return required ? refuse(h, "the state has no \"%s\"", key) : 0;
    if (h->state.tok[t].type != JSON_STRING)
        return refuse(h, "the state's \"%s\" is %s, not a string", key,
                      json_type_name(h->state.tok[t].type));
    if (json_text(&h->state, t, out, n) != 0)
        return refuse(h, "the state's \"%s\" is longer than %zu bytes or holds a NUL", key, n - 1);
    return 0;
}

/* The state: ociVersion, id, status, pid, bundle. */
static int read_state(struct hook *h, struct container *c, char *bundle, size_t bundle_n)
{
    ssize_t n = read_bounded(0, STATE_MAX, &h->state_text);
    if (n < 0)
        return refuse(h, errno == EFBIG ? "the OCI state on stdin is over %u KiB: not a runtime's"
                                        : "cannot read the OCI state on stdin (%u KiB at most): %s",
                      STATE_MAX >> 10, strerror(errno));
    char err[256], version[64], status[32], b[64];
    if (json_parse(&h->state, h->state_text, (size_t)n, TOKENS_MAX, DEPTH_MAX, err, sizeof err))
        return refuse(h, "the OCI state on stdin is not JSON: %s", err);
    if (h->state.tok[0].type != JSON_OBJECT)
        return refuse(h, "the OCI state on stdin is %s, not an object",
                      json_type_name(h->state.tok[0].type));
    if (state_text(h, "ociVersion", true, version, sizeof version) ||
        state_text(h, "id", true, c->id, sizeof c->id) ||
        state_text(h, "status", true, status, sizeof status) ||
        state_text(h, "bundle", true, bundle, bundle_n))
        return 1;
    if (strncmp(version, "1.", 2) != 0)
        return refuse(h, "ociVersion \"%s\" is not a version 1 of the OCI runtime spec",
                      shown(version, b, sizeof b));
    if (!container_id_ok(c->id))
        return refuse(h, "id \"%s\" is not a container's id (1 to 255 of A-Z a-z 0-9 _ . + -)",
                      shown(c->id, b, sizeof b));
    snprintf(h->id, sizeof h->id, "%s", c->id);
    bool creating = strcmp(h->stage, "createRuntime") == 0;
    if (creating ? strcmp(status, "creating") && strcmp(status, "created")
                 : strcmp(status, "stopped"))
        return refuse(h, "status \"%s\" is not a container's at %s (%s)",
                      shown(status, b, sizeof b), h->stage,
                      creating ? "\"creating\" or \"created\"" : "\"stopped\"");
    if (bundle[0] != '/')
        return refuse(h, "bundle \"%s\" is not an absolute path", shown(bundle, b, sizeof b));
    int t = json_member(&h->state, 0, "pid");
    int64_t pid = 0;
    if (t == -2)
        return refuse(h, "the state has \"pid\" twice: a forged state");
    if (t >= 0 && json_integer(&h->state, t, 0, INT32_MAX, &pid) != 0)
        return refuse(h, "the state's \"pid\" is not a process id (a whole number from 1 to %d)",
                      INT32_MAX);
    if (creating && pid <= 0)
        return refuse(h, "the state has no \"pid\": the container's first process is needed at %s",
                      h->stage);
    c->pid = (long)pid;
    t = json_member(&h->state, 0, "annotations");
    if (t == -2)
        return refuse(h, "the state has \"annotations\" twice: a forged state");
    if (t >= 0 && h->state.tok[t].type != JSON_OBJECT)
        return refuse(h, "the state's \"annotations\" is %s, not an object",
                      json_type_name(h->state.tok[t].type));
    return 0;
}

/* A file or folder the job's facts are read from: root's or the caller's,
 * and writable by no one else. */
static int trusted(struct hook *h, int fd, const char *what)
{
    struct stat st;
    if (fstat(fd, &st) != 0)
        return refuse(h, "%s: %s", what, strerror(errno));
    if (st.st_uid != 0 && st.st_uid != getuid())
        return refuse(h, "%s belongs to user %u: only root's, or yours, is taken", what,
                      (unsigned)st.st_uid);
    if (st.st_mode & (S_IWGRP | S_IWOTH))
        return refuse(h, "%s is writable by others (mode %04o): it could be forged", what,
                      (unsigned)(st.st_mode & 07777));
    return 0;
}

static int read_config(struct hook *h, const char *bundle)
{
    h->bundle_fd = open(bundle, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (h->bundle_fd < 0)
        return refuse(h, "bundle %s: %s", bundle, strerror(errno));
    char what[PATH_MAX + 32];
    snprintf(what, sizeof what, "bundle %s", bundle);
    if (trusted(h, h->bundle_fd, what))
        return 1;
    snprintf(what, sizeof what, "%s/config.json", bundle);
    int fd = openat(h->bundle_fd, "config.json", O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return refuse(h, "%s: %s", what, errno == ELOOP ? "a symbolic link" : strerror(errno));
    struct stat st;
    if (trusted(h, fd, what)) {
        close(fd);
        return 1;
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return refuse(h, "%s is not a regular file", what);
    }
    ssize_t n = read_bounded(fd, CONFIG_MAX, &h->config_text);
    close(fd);
    if (n < 0)
        return refuse(h, "%s: %s", what,
                      errno == EFBIG ? "over 4 MiB: not a runtime's" : strerror(errno));
    char err[256];
    if (json_parse(&h->config, h->config_text, (size_t)n, TOKENS_MAX, DEPTH_MAX, err, sizeof err))
        return refuse(h, "%s is not JSON: %s", what, err);
    if (h->config.tok[0].type != JSON_OBJECT)
        return refuse(h, "%s is not a JSON object", what);
    return 0;
}

/* config.json's member at path ("linux", "cgroupsPath"), of type `type`:
 * its token, -1 when absent, or -2 after a refusal. */
static int config_at(struct hook *h, enum json_type type, const char *a, const char *b)
{
    int t = json_member(&h->config, 0, a);
    if (t >= 0 && b)
        t = h->config.tok[t].type == JSON_OBJECT ? json_member(&h->config, t, b) : -1;
    if (t == -2) {
        refuse(h, "config.json has %s%s%s twice", a, b ? "." : "", b ? b : "");
        return -2;
    }
    if (t >= 0 && h->config.tok[t].type != type) {
        refuse(h, "config.json's %s%s%s is %s, not %s", a, b ? "." : "", b ? b : "",
               json_type_name(h->config.tok[t].type), json_type_name(type));
        return -2;
    }
    return t;
}

/* ---------------------------------------------------- the process, the cgroup */

/* /proc/PID/cgroup's path for cgroup2 ("0::"), else (cgroup v1 alone) the
 * first hierarchy's, into out: 0, or 1 after a refusal. */
/* A file of process dir `proc` (status, cgroup), whole: its length, or -1. */
static ssize_t read_proc_file(int proc, const char *name, char **text)
{
    int fd = openat(proc, name, O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read_bounded(fd, 64 << 10, text) : -1;
    if (fd >= 0)
        close(fd);
    return n;
}

static int cgroup_of(struct hook *h, int proc, char *out, size_t n)
{
    char *text = NULL;
    if (read_proc_file(proc, "cgroup", &text) < 0)
        return refuse(h, "cannot read the first process's /proc/PID/cgroup: %s", strerror(errno));
    const char *line = strncmp(text, "0::", 3) == 0 ? text : strstr(text, "\n0::");
    if (line)
        line += line == text ? 3 : 4;
    else if ((line = strchr(text, ':')) && (line = strchr(line + 1, ':')))
        line++;
    size_t l = line ? strcspn(line, "\n") : 0;
    if (!line || l == 0 || l >= n || line[0] != '/') {
        free(text);
        return refuse(h, "the first process's /proc/PID/cgroup names no cgroup");
    }
    memcpy(out, line, l);
    out[l] = 0;
    free(text);
    return 0;
}

/* config.json's linux.cgroupsPath, for the cgroup it means: "/a/b" (cgroupfs)
 * is the path itself; "SLICE:PREFIX:NAME" (systemd) ends in PREFIX-NAME.scope. */
static bool is_config_cgroup(const char *cgroup, const char *path)
{
    if (path[0] == '/') {
        size_t n = strlen(cgroup), p = strlen(path);
        /* The hook may see the hierarchy from a cgroup namespace below its root. */
        return n >= p && strcmp(cgroup + n - p, path) == 0 && (n == p || path[0] == '/');
    }
    const char *a = strchr(path, ':'), *b = a ? strchr(a + 1, ':') : NULL;
    if (!b)
        return false;
    char scope[512];
    snprintf(scope, sizeof scope, "/%.*s-%s.scope", (int)(b - a - 1), a + 1, b + 1);
    size_t n = strlen(cgroup), s = strlen(scope);
    return n >= s && strcmp(cgroup + n - s, scope) == 0;
}

/* The real uid of process dir `proc`, or -1. */
static long uid_of(int proc)
{
    char *text = NULL;
    if (read_proc_file(proc, "status", &text) < 0)
        return -1;
    const char *u = strstr(text, "\nUid:");
    long uid = u ? strtol(u + 5, NULL, 10) : -1;
    free(text);
    return uid;
}

/* The pid namespace of process dir `proc` (its inode), or 0. */
static unsigned long pid_namespace_of(int proc)
{
    struct stat st;
    return fstatat(proc, "ns/pid", &st, 0) == 0 ? (unsigned long)st.st_ino : 0;
}

static int open_process(struct hook *h, long pid, int *proc)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%ld", pid);
    *proc = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    return *proc < 0 ? refuse(h, "pid %ld: no such process (%s)", pid, strerror(errno)) : 0;
}

/* Before anything else of a container is read: a caller who is not root
 * speaks only for its own container (rootless podman's processes are its
 * user's on the host). */
static int check_owner(struct hook *h, struct container *c)
{
    int proc;
    if (open_process(h, c->pid, &proc))
        return 1;
    long uid = uid_of(proc);
    close(proc);
    if (uid < 0)
        return refuse(h, "pid %ld: cannot read its /proc/%ld/status", c->pid, c->pid);
    if (getuid() != 0 && (uid_t)uid != getuid())
        return refuse(h, "pid %ld runs as user %ld, not as you (user %u): only root, or the user "
                         "whose container it is, may make it a job",
                      c->pid, uid, (unsigned)getuid());
    c->owner = getuid();
    return 0;
}

static int check_process(struct hook *h, struct container *c)
{
    int proc, rc = 1;
    if (open_process(h, c->pid, &proc))
        return 1;
    /* Its own pid namespace, unless config.json says it shares one. */
    int ns = config_at(h, JSON_ARRAY, "linux", "namespaces");
    if (ns == -2)
        goto out;
    bool own_pid_ns = false;
    char want_ns[PATH_MAX] = "";
    for (int i = 0, t = ns >= 0 ? ns + 1 : 0; ns >= 0 && i < (int)h->config.tok[ns].size;
         i++, t = (int)h->config.tok[t].end) {
        int type = json_member(&h->config, t, "type"), p = json_member(&h->config, t, "path");
        if (json_is(&h->config, type, "pid")) {
            own_pid_ns = true;
            if (p >= 0 && json_text(&h->config, p, want_ns, sizeof want_ns) != 0)
                want_ns[0] = 0;
        }
    }
    unsigned long its = pid_namespace_of(proc), mine = 0;
    struct stat st;
    if (stat("/proc/self/ns/pid", &st) == 0)
        mine = (unsigned long)st.st_ino;
    if (own_pid_ns && !want_ns[0] && (!its || its == mine)) {
        refuse(h, "pid %ld is in the host's pid namespace, not in the container's own: not the "
                  "container's first process (a forged state)",
               c->pid);
        goto out;
    }
    if (own_pid_ns && want_ns[0] && (stat(want_ns, &st) != 0 || st.st_ino != its)) {
        refuse(h, "pid %ld is not in the pid namespace config.json names (%s)", c->pid, want_ns);
        goto out;
    }
    if (cgroup_of(h, proc, c->cgroup, sizeof c->cgroup))
        goto out;
    char b[300];
    if (strcmp(c->cgroup, "/") == 0 || !container_cgroup_names(c->cgroup, c->id)) {
        refuse(h, "pid %ld is in cgroup %s, which is not container %.12s's own (its last part "
                  "names no container %.12s): a forged state, or a process outside it",
               c->pid, shown(c->cgroup, b, sizeof b), c->id, c->id);
        goto out;
    }
    int cp = config_at(h, JSON_STRING, "linux", "cgroupsPath");
    char config_cgroup[PATH_MAX];
    if (cp == -2)
        goto out;
    if (cp >= 0 && (json_text(&h->config, cp, config_cgroup, sizeof config_cgroup) != 0 ||
                    !is_config_cgroup(c->cgroup, config_cgroup))) {
        refuse(h, "pid %ld is in cgroup %s, not in the one config.json's linux.cgroupsPath "
                  "names (%s)",
               c->pid, shown(c->cgroup, b, sizeof b), cp >= 0 ? config_cgroup : "?");
        goto out;
    }
    rc = 0;
out:
    close(proc);
    return rc;
}

/* ------------------------------------------------------- name, budget */

/* containers/storage's list beside a podman bundle
 * (ROOT/overlay-containers/ID/userdata): the container's first name. */
static bool storage_name(struct hook *h, const char *bundle, const char *id, char *out, size_t n)
{
    char list[PATH_MAX];
    const char *tail = strstr(bundle, "/overlay-containers/");
    size_t cut = tail ? (size_t)(tail - bundle) + strlen("/overlay-containers/") : 0;
    if (!tail || snprintf(list, sizeof list, "%.*scontainers.json", (int)cut, bundle) >=
                     (int)sizeof list)
        return false;
    int fd = open(list, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    if (fd < 0)
        return false;
    char *text = NULL;
    bool found = false;
    /* Root's file, from the same storage as the bundle: its word is taken. */
    ssize_t len = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (st.st_uid == 0 ||
                  st.st_uid == getuid()) && !(st.st_mode & (S_IWGRP | S_IWOTH))
                      ? read_bounded(fd, STORAGE_LIST_MAX, &text)
                      : -1;
    close(fd);
    struct json_doc d;
    char err[128];
    if (len >= 0 && json_parse(&d, text, (size_t)len, 4u << 20, DEPTH_MAX, err, sizeof err) == 0) {
        if (d.tok[0].type == JSON_ARRAY)
            for (uint32_t i = 0, t = 1; i < d.tok[0].size && !found; i++, t = d.tok[t].end) {
                int names = json_member(&d, (int)t, "names");
                if (json_is(&d, json_member(&d, (int)t, "id"), id) && names >= 0 &&
                    d.tok[names].type == JSON_ARRAY && d.tok[names].size > 0)
                    found = json_text(&d, names + 1, out, n) == 0;
            }
        json_free(&d);
    }
    free(text);
    (void)h;
    return found;
}

/* The name as podman ps shows it: an annotation that says it (Kubernetes'
 * runtimes, nerdctl, or vram.dev/name), podman's storage, else the id's
 * first 12 characters (Docker's short id). Made printable. */
static void find_name(struct hook *h, const char *bundle, struct container *c, int annotations)
{
    static const char *const keys[] = {"vram.dev/name", "io.kubernetes.cri.container-name",
                                       "io.kubernetes.container.name", "nerdctl/name"};
    char name[256] = "";
    for (size_t i = 0; i < sizeof keys / sizeof *keys && !name[0]; i++) {
        int t = json_member(&h->config, annotations, keys[i]);
        if (t >= 0 && json_text(&h->config, t, name, sizeof name) != 0)
            name[0] = 0;
    }
    if (!name[0] && !storage_name(h, bundle, c->id, name, sizeof name))
        snprintf(name, sizeof name, "%.12s", c->id);
    for (char *p = name; *p; p++)
        if (!isalnum((unsigned char)*p) && !strchr("._:@+/-", *p))
            *p = '_';
    snprintf(c->name, sizeof c->name, "%s", name);
}

/* The budget: VRAM_MEMORY_LIMIT or VRAM_MEMORY_FRACTION in the container's
 * environment, or the annotation vram.dev/limit, each checked as vram run
 * checks it; one, or none (vramd's policy). 0, or 1 after a refusal. */
static int find_budget(struct hook *h, struct container *c, int annotations)
{
    int env = config_at(h, JSON_OBJECT, "process", NULL);
    if (env == -2)
        return 1;
    env = env >= 0 ? json_member(&h->config, env, "env") : -1;
    if (env == -2)
        return refuse(h, "config.json has process.env twice");
    if (env >= 0 && h->config.tok[env].type != JSON_ARRAY)
        return refuse(h, "config.json's process.env is %s, not an array",
                      json_type_name(h->config.tok[env].type));
    static const char *const vars[] = {"VRAM_MEMORY_LIMIT", "VRAM_MEMORY_FRACTION"};
    struct options o;
    options_clear(&o);
    char err[512], entry[512], b[64];
    bool waits = false;
    for (int i = 0, t = env + 1; env >= 0 && i < (int)h->config.tok[env].size;
         i++, t = (int)h->config.tok[t].end) {
        if (h->config.tok[t].type != JSON_STRING)
            return refuse(h, "config.json's process.env[%d] is %s, not a string", i,
                          json_type_name(h->config.tok[t].type));
        if (json_text(&h->config, t, entry, sizeof entry) != 0)
            continue; /* longer than any budget: not one of ours */
        if (strncmp(entry, "VRAM_WAIT=", 10) == 0) {
            if (waits)
                return refuse(h, "VRAM_WAIT is set twice in the container's environment");
            if (agent_wait_parse(entry + 10, &c->wait_ms, err, sizeof err) != 0)
                return refuse(h, "in the container's environment: %s", err);
            waits = true;
            continue;
        }
        for (size_t v = 0; v < sizeof vars / sizeof *vars; v++) {
            size_t len = strlen(vars[v]);
            if (strncmp(entry, vars[v], len) != 0 || entry[len] != '=')
                continue;
            if (c->limit_var[0] && strcmp(c->limit_var, vars[v]) == 0)
                return refuse(h, "%s is set twice in the container's environment", vars[v]);
            if (c->limit_var[0])
                return refuse(h, "%s=\"%s\" and %s=\"%s\" are both set in the container's "
                                 "environment; set one of them (a limit in bytes, or a fraction "
                                 "of each device)",
                              c->limit_var, c->limit_value, vars[v],
                              shown(entry + len + 1, b, sizeof b));
            if (options_set(&o, vars[v], entry + len + 1, err, sizeof err) != 0)
                return refuse(h, "in the container's environment: %s", err);
            snprintf(c->limit_var, sizeof c->limit_var, "%s", vars[v]);
            snprintf(c->limit_value, sizeof c->limit_value, "%s", entry + len + 1);
            snprintf(c->limit_origin, sizeof c->limit_origin, "the container's environment");
        }
    }
    int t = json_member(&h->config, annotations, "vram.dev/limit");
    if (t == -2)
        return refuse(h, "config.json has annotation vram.dev/limit twice");
    if (t >= 0) {
        char value[224];
        if (h->config.tok[t].type != JSON_STRING || json_text(&h->config, t, value, sizeof value))
            return refuse(h, "annotation vram.dev/limit is not a size (a string of at most 223 "
                             "bytes)");
        options_clear(&o);
        if (options_set_as(&o, "VRAM_MEMORY_LIMIT", "annotation vram.dev/limit", value, err,
                           sizeof err) != 0)
            return refuse(h, "%s", err);
        if (c->limit_var[0] &&
            (strcmp(c->limit_var, "VRAM_MEMORY_LIMIT") || strcmp(c->limit_value, value)))
            return refuse(h, "annotation vram.dev/limit=\"%s\" and %s=\"%s\" in the container's "
                             "environment disagree; give the budget once",
                          shown(value, b, sizeof b), c->limit_var, c->limit_value);
        if (!c->limit_var[0]) {
            snprintf(c->limit_var, sizeof c->limit_var, "VRAM_MEMORY_LIMIT");
            snprintf(c->limit_value, sizeof c->limit_value, "%s", value);
            snprintf(c->limit_origin, sizeof c->limit_origin, "annotation vram.dev/limit");
        }
    }
    /* One budget for each of the container's GPUs: a list by device index
     * ("0=4GiB,1=2GiB") numbers GPUs as the container's CUDA will, which
     * the hook cannot know. */
    for (int d = 0; d < OPT_MAX_DEVICES; d++)
        if (o.limit[d].kind != LIMIT_NONE)
            return refuse(h, "%s=\"%s\" from %s gives GPUs budgets by index; a container's "
                             "budget is one size or fraction for each of its GPUs "
                             "(VRAM_MEMORY_LIMIT=4GiB, VRAM_MEMORY_FRACTION=0.5)",
                          c->limit_var, shown(c->limit_value, b, sizeof b), c->limit_origin);
    if (o.limit_all.kind == LIMIT_BYTES)
        c->bytes = o.limit_all.bytes;
    else if (o.limit_all.kind == LIMIT_FRACTION)
        c->fraction = o.limit_all.fraction;
    return 0;
}

/* The state's annotations are the bundle's, as a runtime passes them on:
 * one of ours that differs is a forged state. */
static int same_annotations(struct hook *h, int config_annotations)
{
    int state = json_member(&h->state, 0, "annotations");
    for (int k = json_first_member(&h->state, state); k >= 0;
         k = json_next_member(&h->state, state, k)) {
        char key[256], a[512], b[512];
        if (json_text(&h->state, k, key, sizeof key) != 0 || strncmp(key, "vram.dev/", 9) != 0)
            continue;
        int t = json_member(&h->config, config_annotations, key);
        if (h->state.tok[k + 1].type != JSON_STRING || t < 0 ||
            json_text(&h->state, k + 1, a, sizeof a) != 0 ||
            json_text(&h->config, t, b, sizeof b) != 0 || strcmp(a, b) != 0)
            return refuse(h, "the state's annotation %s is not the bundle's config.json's: a "
                             "forged state", key);
    }
    return 0;
}

/* ------------------------------------------------------------- the owner */

/* Whether this process runs in a user namespace of its own (rootless
 * podman runs its runtime, and the runtime its hooks, in one: root there
 * is a user on the host). The host's is the identity over every uid. */
static bool in_user_namespace(void)
{
    FILE *f = fopen("/proc/self/uid_map", "re");
    if (!f)
        return false;
    unsigned long inside, outside, count;
    int lines = 0;
    bool identity = false;
    while (fscanf(f, "%lu %lu %lu", &inside, &outside, &count) == 3) {
        lines++;
        identity = inside == 0 && outside == 0 && count == 4294967295ul;
    }
    fclose(f);
    return !(lines == 1 && identity);
}

/* id through config.json's linux.uidMappings or gidMappings (`key`): the
 * id on the host. 0, or 1 after a refusal. */
static int host_id(struct hook *h, const char *key, int64_t id, int64_t *out)
{
    int maps = config_at(h, JSON_ARRAY, "linux", key);
    if (maps == -2)
        return 1;
    if (maps < 0) {
        *out = id;
        return 0;
    }
    for (int i = 0, t = maps + 1; i < (int)h->config.tok[maps].size;
         i++, t = (int)h->config.tok[t].end) {
        int64_t inside, outside, size;
        if (json_integer(&h->config, json_member(&h->config, t, "containerID"), 0, UINT32_MAX,
                         &inside) != 0 ||
            json_integer(&h->config, json_member(&h->config, t, "hostID"), 0, UINT32_MAX,
                         &outside) != 0 ||
            json_integer(&h->config, json_member(&h->config, t, "size"), 1, UINT32_MAX,
                         &size) != 0)
            return refuse(h, "config.json's linux.%s[%d] is not a mapping (containerID, hostID, "
                             "size)", key, i);
        if (id >= inside && id - inside < size) {
            *out = outside + (id - inside);
            return 0;
        }
    }
    return refuse(h, "config.json's process.user id %lld is not in linux.%s: no user on the "
                     "host runs the container's processes", (long long)id, key);
}

/* Whose the job is. Rootless (a user namespace): vramd takes the kernel's
 * word, the user who runs podman. Rootful: the user the container's
 * processes run as (config.json's process.user, mapped to the host), or
 * the annotation vram.dev/owner (a user name or uid): the word of whoever
 * ran the container as root, worth no more than that. */
static int find_owner(struct hook *h, struct container *c, int annotations)
{
    c->speaks_for = !in_user_namespace();
    if (!c->speaks_for)
        return 0;
    int user = config_at(h, JSON_OBJECT, "process", NULL);
    user = user >= 0 ? json_member(&h->config, user, "user") : user;
    if (user == -2)
        return 1;
    int64_t uid = 0, gid = 0;
    int t;
    if (user >= 0 && (t = json_member(&h->config, user, "uid")) >= 0 &&
        json_integer(&h->config, t, 0, UINT32_MAX - 1, &uid) != 0)
        return refuse(h, "config.json's process.user.uid is not a user id");
    if (user >= 0 && (t = json_member(&h->config, user, "gid")) >= 0 &&
        json_integer(&h->config, t, 0, UINT32_MAX - 1, &gid) != 0)
        return refuse(h, "config.json's process.user.gid is not a group id");
    if (host_id(h, "uidMappings", uid, &uid) || host_id(h, "gidMappings", gid, &gid))
        return 1;
    c->as = c->owner = (uid_t)uid;
    c->group = (gid_t)gid;
    t = json_member(&h->config, annotations, "vram.dev/owner");
    char name[256], b[64];
    if (t >= 0) {
        if (json_text(&h->config, t, name, sizeof name) != 0)
            return refuse(h, "annotation vram.dev/owner is not a user name or id");
        struct passwd *pw = getpwnam(name);
        char *end;
        unsigned long id = strtoul(name, &end, 10);
        if (!pw && name[0] && !*end && id < UINT32_MAX)
            pw = getpwuid((uid_t)id);
        if (!pw)
            return refuse(h, "annotation vram.dev/owner=\"%s\": no such user (a user name or "
                             "uid of this host)", shown(name, b, sizeof b));
        c->owner = pw->pw_uid;
        c->group = pw->pw_gid;
    }
    return 0;
}

int cmd_oci_hook(int argc, char **argv)
{
    const char *help = NULL, *gpu = NULL;
    const struct cli_option table[] = {{"--gpu", CLI_VALUE, &gpu},
                                       {"--help", CLI_FLAG, &help},
                                       {"-h", CLI_FLAG, &help},
                                       {NULL, CLI_FLAG, NULL}};
    char *operand[2];
    int n = cli_parse_operands("oci-hook", table, argc, argv, 2, operand, 2);
    if (n < 0)
        return 2;
    if (help) {
        usage(stdout);
        return 0;
    }
    if (n != 1 || (strcmp(operand[0], "createRuntime") && strcmp(operand[0], "poststop")))
        return cli_usage_error("oci-hook", "the hook's stage is createRuntime or poststop, not "
                                           "%s%s%s (vram oci-hook --help)",
                               n ? "\"" : "", n ? operand[0] : "none", n ? "\"" : "");
    bool index = gpu && gpu[0] && strlen(gpu) < 6 && strspn(gpu, "0123456789") == strlen(gpu);
    if (gpu && !index && strcmp(gpu, "all") != 0 && !cli_gpu_uuid_ok(gpu))
        return cli_usage_error("oci-hook", "--gpu \"%.64s\": not a GPU's index, UUID (GPU-...) "
                                           "nor \"all\"", gpu);
    struct hook h = {.stage = operand[0], .bundle_fd = -1};
    struct container c = {0};
    snprintf(c.gpu, sizeof c.gpu, "%s", gpu ? gpu : "all");
    char bundle[PATH_MAX], why[512] = "";
    bool creating = strcmp(h.stage, "createRuntime") == 0;
    int rc = read_state(&h, &c, bundle, sizeof bundle) || (creating && check_owner(&h, &c)) ||
             read_config(&h, bundle);
    int annotations = rc ? -1 : config_at(&h, JSON_OBJECT, "annotations", NULL);
    if (!rc && annotations == -2)
        rc = 1;
    if (!rc)
        rc = same_annotations(&h, annotations);
    if (!rc && creating) {
        rc = check_process(&h, &c) || find_budget(&h, &c, annotations) ||
             find_owner(&h, &c, annotations);
        if (!rc) {
            find_name(&h, bundle, &c, annotations);
            rc = oci_hook_register(&c, why, sizeof why) ? refuse(&h, "%s", why) : 0;
        }
    } else if (!rc) {
        c.owner = getuid();
        find_name(&h, bundle, &c, annotations);
        rc = oci_hook_end(&c, why, sizeof why) ? refuse(&h, "%s", why) : 0;
    }
    if (h.bundle_fd >= 0)
        close(h.bundle_fd);
    json_free(&h.state);
    json_free(&h.config);
    free(h.state_text);
    free(h.config_text);
    return rc;
}
