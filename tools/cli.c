/* cli: option reading and the ledger fetch shared by the subcommands. */
#include "cli.h"

#include "../src/client/client.h"
#include "../src/client/fetch.h"
#include "../src/protocol/history_view.h"
#include "../src/util/parse.h"

#include <ctype.h>
#include <limits.h>
#include <stdarg.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "vram %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 2;
}

static const struct cli_option *find(const struct cli_option *table, const char *word, size_t len)
{
    for (const struct cli_option *o = table; o->name; o++)
        if (strlen(o->name) == len && strncmp(o->name, word, len) == 0)
            return o;
    return NULL;
}

int cli_parse(const char *cmd, const struct cli_option *table, int argc, char **argv, int first,
              bool operands)
{
    int i = first;
    for (; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0)
            return i + 1;
        if (a[0] != '-' || a[1] == 0) {
            if (operands)
                return i;
            cli_usage_error(cmd, "unexpected argument \"%s\"; vram %s --help lists the options",
                            a, cmd);
            return -1;
        }
        const char *eq = strchr(a, '=');
        size_t len = eq ? (size_t)(eq - a) : strlen(a);
        const struct cli_option *o = find(table, a, len);
        if (!o) {
            cli_usage_error(cmd, "unknown option \"%.*s\"; vram %s --help lists the options",
                            (int)len, a, cmd);
            return -1;
        }
        if (o->arg == CLI_FLAG) {
            if (eq) {
                cli_usage_error(cmd, "%s takes no value (given \"%s\")", o->name, eq + 1);
                return -1;
            }
            *o->value = "";
        } else if (eq) {
            *o->value = eq + 1;
        } else if (o->arg == CLI_OPTIONAL) {
            /* --wait 10m: a value only if it looks like one, so that
             * `--wait python train.py` still runs python. */
            bool next = i + 1 < argc && argv[i + 1][0] >= '0' && argv[i + 1][0] <= '9';
            *o->value = next ? argv[++i] : "";
        } else {
            if (i + 1 >= argc || strcmp(argv[i + 1], "--") == 0) {
                cli_usage_error(cmd, "%s needs a value; vram %s --help lists the forms", o->name,
                                cmd);
                return -1;
            }
            *o->value = argv[++i];
        }
    }
    return i;
}

void cli_no_daemon(char *out, size_t n)
{
    const char *env = getenv("VRAM_DAEMON");
    if (env && strcmp(env, "off") == 0) {
        snprintf(out, n, "vramd is not asked (VRAM_DAEMON=off)");
        return;
    }
    char user[256];
    ledger_default_socket(user, sizeof user);
    bool one = strcmp(user, LEDGER_SYSTEM_SOCKET) == 0;
    snprintf(out, n, "vramd is not running (no socket at %s%s%s)", LEDGER_SYSTEM_SOCKET,
             one ? "" : " or ", one ? "" : user);
}

/* The daemon's socket, without a word on stderr: 0, or -1 with the reason. */
static int find_daemon(const char *socket_path, char *path, size_t n, char *err, size_t errlen)
{
    if (socket_path) {
        snprintf(path, n, "%s", socket_path);
        return 0;
    }
    int r = ledger_find_socket(path, n, err, errlen);
    if (r > 0) {
        char none[400];
        cli_no_daemon(none, sizeof none);
        snprintf(err, errlen, "%.400s; start one with vramd, or name its socket with --socket "
                 "or VRAM_DAEMON", none);
    }
    return r != 0 ? -1 : 0;
}

int cli_daemon_socket(const char *cmd, const char *socket_path, char *path, size_t n)
{
    char err[512];
    if (find_daemon(socket_path, path, n, err, sizeof err) != 0) {
        fprintf(stderr, "vram %s: %s\n", cmd, err);
        return 1;
    }
    return 0;
}

int cli_take_ledger(const char *socket_path, struct snapshot *s, enum cli_history history,
                    char *err, size_t errlen)
{
    char path[256];
    if (find_daemon(socket_path, path, sizeof path, err, errlen) != 0 ||
        snapshot_fetch(path, s, err, errlen) != 0)
        return -1;
    if (history == CLI_HISTORY_NONE)
        return 0;
    /* Without its history (a vramd from before it kept one) the ledger is
     * still shown, and the reason said. */
    struct history_view *v = malloc(sizeof *v);
    if (v && history_fetch(path, NULL, history == CLI_HISTORY_RECENT, v, err, errlen) == 0) {
        s->history = v;
        return 0;
    }
    if (!v)
        snprintf(err, errlen, "out of memory");
    free(v);
    return 1;
}

int cli_fetch_ledger(const char *cmd, const char *socket_path, struct snapshot *s,
                     enum cli_history history)
{
    char err[512];
    int r = cli_take_ledger(socket_path, s, history, err, sizeof err);
    if (r < 0) {
        fprintf(stderr, "vram %s: %s\n", cmd, err);
        return 1;
    }
    if (r > 0)
        fprintf(stderr, "vram %s: no history: %s\n", cmd, err);
    return 0;
}

int cli_parse_operands(const char *cmd, const struct cli_option *table, int argc, char **argv,
                       int first, char **operands, int max)
{
    int count = 0;
    bool dashes = false; /* after "--" every word is an operand */
    for (int i = first; i < argc;) {
        int next = i;
        if (!dashes) {
            next = cli_parse(cmd, table, argc, argv, i, true);
            if (next < 0)
                return -1;
            dashes = next > i && strcmp(argv[next - 1], "--") == 0;
        }
        if (next >= argc)
            break;
        if (count == max) {
            cli_usage_error(cmd, "unexpected argument \"%s\"; vram %s --help says what it takes",
                            argv[next], cmd);
            return -1;
        }
        operands[count++] = argv[next];
        i = next + 1;
    }
    return count;
}

int cli_parse_device(const char *cmd, const char *value, int *device)
{
    uint64_t v;
    parse_why why;
    if (!value)
        return 0;
    if (parse_uint(value, 254, &v, &why) != 0) {
        cli_usage_error(cmd, "--device \"%s\": %s; expected a GPU ordinal from 0 to 254", value,
                        why.text);
        return -1;
    }
    *device = (int)v;
    return 0;
}

/* The interposer beside this program (build tree), or where it is installed
 * relative to it (any prefix), or where the build was configured to go. */
int cli_find_preload(char *out, size_t n)
{
    const char *env = getenv("VRAM_PRELOAD_LIBRARY");
    if (env && *env) {
        snprintf(out, n, "%s", env);
        return access(out, R_OK) == 0 ? 0 : -1;
    }
    char self[PATH_MAX - 64];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len > 0) {
        self[len] = 0;
        char *slash = strrchr(self, '/');
        if (slash) {
            *slash = 0;
            snprintf(out, n, "%s/libvram-preload.so", self);
            if (access(out, R_OK) == 0)
                return 0;
            snprintf(out, n, "%s/" VRAM_LIBDIR_FROM_BINDIR "/libvram-preload.so", self);
            if (access(out, R_OK) == 0)
                return 0;
        }
    }
    snprintf(out, n, "%s/libvram-preload.so", VRAM_INSTALL_LIBDIR);
    return access(out, R_OK) == 0 ? 0 : -1;
}

bool cli_gpu_uuid_ok(const char *s)
{
    if (strncmp(s, "GPU-", 4) != 0 && strncmp(s, "MIG-", 4) != 0)
        return false;
    size_t n = strlen(s);
    for (size_t i = 4; i < n; i++)
        if (!isxdigit((unsigned char)s[i]) && s[i] != '-')
            return false;
    return n > 4 && n < 96;
}
