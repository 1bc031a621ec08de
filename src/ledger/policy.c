#include "policy.h"

#include "../util/parse.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#define AMOUNT_FORMS "a size (" "4GiB, 512MiB" ") or a share of the device (25% or 0.25)"

uint64_t amount_of(const struct amount *a, uint64_t device_total)
{
    return a->is_share ? (uint64_t)((double)device_total * a->share) : a->bytes;
}

void policy_default(struct policy *p)
{
    memset(p, 0, sizeof *p);
    p->wait = false;
    p->over_margin = 256ull << 20;
    p->reconcile_ms = 1000;
    p->connections_per_user = 4096;
    p->driver_jobs_per_user = 32;
    p->silent_ms = 10000;
}

static int parse_amount(const char *s, struct amount *a, parse_why *why)
{
    memset(a, 0, sizeof *a);
    /* A share is a percentage or a bare number with a point (0.25, 1.0);
     * anything with a unit, or a whole number, is a size ("0.5GiB", "4096"). */
    bool bare = strspn(s, "0123456789.") == strlen(s) && strchr(s, '.');
    if (strchr(s, '%') || bare) {
        a->is_share = true;
        return parse_fraction(s, &a->share, why);
    }
    if (parse_size(s, &a->bytes, why) != 0)
        return -1;
    if (a->bytes == 0) {
        snprintf(why->text, sizeof why->text, "must be more than 0");
        return -1;
    }
    return 0;
}

#define MAX_WORDS 10

struct line_ctx {
    const char *file;
    int line;
    char *err;
    size_t errlen;
};

static int bad(struct line_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int bad(struct line_ctx *c, const char *fmt, ...)
{
    char what[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    snprintf(c->err, c->errlen, "%s:%d: %s", c->file, c->line, what);
    return -1;
}

static int parse_who(struct line_ctx *c, const char *w, enum rule_who *who, bool job_ok)
{
    if (strcmp(w, "user") == 0)
        *who = WHO_USER;
    else if (strcmp(w, "group") == 0)
        *who = WHO_GROUP;
    else if (job_ok && strcmp(w, "job") == 0)
        *who = WHO_JOB;
    else
        return bad(c, "\"%s\": expected %s", w, job_ok ? "user, group or job" : "user or group");
    return 0;
}

/* [on DEVICE] at words[i..]: */
static int parse_on(struct line_ctx *c, char **words, int n, int i, struct policy_rule *r)
{
    if (i == n)
        return 0;
    if (i + 2 != n || strcmp(words[i], "on") != 0)
        return bad(c, "unexpected \"%s\"; a rule may end with \"on DEVICE\"%s", words[i],
                   r->kind == RULE_RESERVE && r->who == WHO_JOB && !r->owner.given
                       ? ", a job reservation with \"of user|group OWNER\" before it"
                       : "");
    if (strlen(words[i + 1]) >= sizeof r->device)
        return bad(c, "device \"%.60s\" is too long for an index or a UUID", words[i + 1]);
    snprintf(r->device, sizeof r->device, "%s", words[i + 1]);
    return 0;
}

static int parse_line(struct line_ctx *c, char **w, int n, struct policy *p)
{
    parse_why why = {{0}};
    const char *d = w[0];
    if (strcmp(d, "default-budget") == 0) {
        if (n != 2)
            return bad(c, "default-budget takes one amount: %s", AMOUNT_FORMS);
        if (parse_amount(w[1], &p->default_budget, &why) != 0)
            return bad(c, "default-budget \"%s\": %s; accepted: %s", w[1], why.text, AMOUNT_FORMS);
        p->has_default = true;
        p->default_line = c->line;
        return 0;
    }
    if (strcmp(d, "when-full") == 0) {
        p->wait_line = c->line;
        if (n == 2 && strcmp(w[1], "fail") == 0) {
            p->wait = false;
            return 0;
        }
        if (n == 3 && strcmp(w[1], "wait") == 0) {
            if (parse_duration(w[2], &p->wait_ms, &why) != 0)
                return bad(c, "when-full wait \"%s\": %s; accepted: %s", w[2], why.text,
                           PARSE_DURATION_FORMS);
            p->wait = true;
            return 0;
        }
        return bad(c, "when-full takes \"wait DURATION\" or \"fail\"");
    }
    if (strcmp(d, "over-margin") == 0) {
        p->margin_line = c->line;
        if (n != 2 || parse_size(w[1], &p->over_margin, &why) != 0)
            return bad(c, "over-margin \"%s\": %s; accepted: %s", n > 1 ? w[1] : "",
                       n > 1 ? why.text : "a size is needed", PARSE_SIZE_FORMS);
        return 0;
    }
    if (strcmp(d, "reconcile-every") == 0) {
        p->reconcile_line = c->line;
        if (n != 2 || parse_duration(w[1], &p->reconcile_ms, &why) != 0)
            return bad(c, "reconcile-every \"%s\": %s; accepted: %s", n > 1 ? w[1] : "",
                       n > 1 ? why.text : "a duration is needed", PARSE_DURATION_FORMS);
        return 0;
    }
    if (strcmp(d, "connections-per-user") == 0) {
        p->conns_line = c->line;
        if (n != 2 || parse_uint(w[1], 1000000, &p->connections_per_user, &why) != 0 ||
            p->connections_per_user == 0)
            return bad(c, "connections-per-user \"%s\": %s; accepted: a number from 1 to 1000000",
                       n > 1 ? w[1] : "", n > 1 && why.text[0] ? why.text : "must be more than 0");
        return 0;
    }
    if (strcmp(d, "driver-jobs-per-user") == 0) {
        p->driver_jobs_line = c->line;
        if (n != 2 || parse_uint(w[1], 1000000, &p->driver_jobs_per_user, &why) != 0 ||
            p->driver_jobs_per_user == 0)
            return bad(c, "driver-jobs-per-user \"%s\": %s; accepted: a number from 1 to 1000000",
                       n > 1 ? w[1] : "", n > 1 && why.text[0] ? why.text : "must be more than 0");
        return 0;
    }
    if (strcmp(d, "first-message-within") == 0) {
        p->silent_line = c->line;
        if (n != 2 || parse_duration(w[1], &p->silent_ms, &why) != 0 || p->silent_ms == 0)
            return bad(c, "first-message-within \"%s\": %s; accepted: %s, more than 0",
                       n > 1 ? w[1] : "", n > 1 && why.text[0] ? why.text : "must be more than 0",
                       PARSE_DURATION_FORMS);
        return 0;
    }
    bool cap = strcmp(d, "cap") == 0, reserve = strcmp(d, "reserve") == 0;
    if (!cap && !reserve)
        return bad(c, "unknown directive \"%s\"; accepted: default-budget, cap, reserve, "
                      "when-full, over-margin, reconcile-every, connections-per-user, "
                      "first-message-within, driver-jobs-per-user",
                   d);
    if (p->nrules == POLICY_MAX_RULES)
        return bad(c, "more than %d rules", POLICY_MAX_RULES);
    struct policy_rule *r = &p->rules[p->nrules];
    memset(r, 0, sizeof *r);
    r->line = c->line;
    const char *name, *amount;
    int rest;
    if (cap) { /* cap user|group NAME AMOUNT [on DEVICE] */
        if (n < 4)
            return bad(c, "cap takes: cap user|group NAME AMOUNT [on DEVICE]");
        r->kind = RULE_CAP;
        if (parse_who(c, w[1], &r->who, false) != 0)
            return -1;
        name = w[2], amount = w[3], rest = 4;
    } else { /* reserve AMOUNT for user|group|job NAME [on DEVICE] */
        if (n < 5 || strcmp(w[2], "for") != 0)
            return bad(c, "reserve takes: reserve AMOUNT for user|group|job NAME [on DEVICE]");
        r->kind = RULE_RESERVE;
        if (parse_who(c, w[3], &r->who, true) != 0)
            return -1;
        name = w[4], amount = w[1], rest = 5;
        /* for job NAME of user|group OWNER: whose jobs of that name */
        if (rest < n && strcmp(w[rest], "of") == 0) {
            static const char *const form =
                "reserve AMOUNT for job NAME of user|group OWNER [on DEVICE]";
            if (r->who != WHO_JOB)
                return bad(c, "\"of\" after \"for %s %s\": only a job reservation says whose "
                              "jobs it is for; accepted: %s", w[3], name, form);
            if (rest + 3 > n)
                return bad(c, "\"of\" takes \"user NAME\" or \"group NAME\"; accepted: %s", form);
            if (parse_who(c, w[rest + 1], &r->owner.who, false) != 0)
                return -1;
            const char *owner = w[rest + 2];
            if (strlen(owner) >= sizeof r->owner.name)
                return bad(c, "the name \"%.60s...\" is too long", owner);
            snprintf(r->owner.name, sizeof r->owner.name, "%s", owner);
            uint64_t oid;
            r->owner.numeric = parse_uint(owner, UINT32_MAX - 1, &oid, &why) == 0;
            if (r->owner.numeric)
                r->owner.id = (uint32_t)oid;
            r->owner.given = true;
            rest += 3;
        }
    }
    if (strlen(name) >= sizeof r->name)
        return bad(c, "the name \"%.60s...\" is too long", name);
    snprintf(r->name, sizeof r->name, "%s", name);
    uint64_t id;
    r->numeric = r->who != WHO_JOB && parse_uint(name, UINT32_MAX - 1, &id, &why) == 0;
    if (r->numeric)
        r->id = (uint32_t)id; /* a uid or gid as it is; names are resolved by policy_load */
    if (parse_amount(amount, &r->amount, &why) != 0)
        return bad(c, "\"%s\": %s; accepted: %s", amount, why.text, AMOUNT_FORMS);
    if (parse_on(c, w, n, rest, r) != 0)
        return -1;
    /* Two caps for one user (or group) on the same devices: which one was
     * meant cannot be told, and the second would silently be the one. */
    for (int k = 0; cap && k < p->nrules; k++) {
        const struct policy_rule *o = &p->rules[k];
        if (o->kind == RULE_CAP && o->who == r->who && strcmp(o->name, r->name) == 0 &&
            strcmp(o->device, r->device) == 0)
            return bad(c, "a second cap for %s %s%s%s (the first is on line %d); give one cap "
                          "per %s and device",
                       r->who == WHO_USER ? "user" : "group", r->name, r->device[0] ? " on " : "",
                       r->device, o->line, r->who == WHO_USER ? "user" : "group");
    }
    p->nrules++;
    return 0;
}

int policy_parse(const char *text, size_t len, const char *file, struct policy *out, char *err,
                 size_t errlen)
{
    struct policy *p = malloc(sizeof *p); /* large: not on the stack */
    if (!p) {
        snprintf(err, errlen, "%s: out of memory", file);
        return -1;
    }
    policy_default(p);
    snprintf(p->file, sizeof p->file, "%s", file);
    struct line_ctx c = {file, 0, err, errlen};
    size_t i = 0;
    while (i < len) {
        c.line++;
        size_t start = i;
        while (i < len && text[i] != '\n')
            i++;
        size_t n = i - start;
        i++;
        char line[512];
        if (n >= sizeof line) {
            bad(&c, "a line longer than %d characters", 511);
            goto refused;
        }
        memcpy(line, text + start, n);
        line[n] = 0;
        for (size_t k = 0; k < n; k++) {
            if (line[k] == '\0') {
                bad(&c, "a NUL byte");
                goto refused;
            }
            if (line[k] == '#') {
                line[k] = 0;
                break;
            }
            if (line[k] == '\t' || line[k] == '\r')
                line[k] = ' ';
            else if ((unsigned char)line[k] < 0x20 || (unsigned char)line[k] > 0x7e) {
                bad(&c, "a byte that is not printable ASCII");
                goto refused;
            }
        }
        char *words[MAX_WORDS + 1];
        int nw = 0;
        char *save = NULL;
        for (char *s = strtok_r(line, " ", &save); s; s = strtok_r(NULL, " ", &save)) {
            if (nw == MAX_WORDS) {
                bad(&c, "too many words");
                goto refused;
            }
            words[nw++] = s;
        }
        if (nw && parse_line(&c, words, nw, p) != 0)
            goto refused;
        p->ndirectives += nw > 0;
    }
    memcpy(out, p, sizeof *p);
    free(p);
    return 0;
refused:
    free(p);
    return -1;
}

/* User and group names to ids: a name that does not exist is an error. */
static int resolve_names(struct policy *q, const char *path, char *err, size_t errlen)
{
    for (int i = 0; i < q->nrules; i++) {
        struct policy_rule *r = &q->rules[i];
        if (r->owner.given && !r->owner.numeric) {
            struct passwd *pw = r->owner.who == WHO_USER ? getpwnam(r->owner.name) : NULL;
            struct group *gr = r->owner.who == WHO_GROUP ? getgrnam(r->owner.name) : NULL;
            if (!pw && !gr) {
                snprintf(err, errlen, "%s:%d: no %s named \"%s\" on this machine", path, r->line,
                         r->owner.who == WHO_USER ? "user" : "group", r->owner.name);
                return -1;
            }
            r->owner.id = pw ? pw->pw_uid : gr->gr_gid;
        }
        if (r->who == WHO_JOB || r->numeric)
            continue;
        if (r->who == WHO_USER) {
            struct passwd *pw = getpwnam(r->name);
            if (!pw) {
                snprintf(err, errlen, "%s:%d: no user named \"%s\" on this machine", path, r->line,
                         r->name);
                return -1;
            }
            r->id = pw->pw_uid;
        } else {
            struct group *gr = getgrnam(r->name);
            if (!gr) {
                snprintf(err, errlen, "%s:%d: no group named \"%s\" on this machine", path,
                         r->line, r->name);
                return -1;
            }
            r->id = gr->gr_gid;
        }
    }
    return 0;
}

/* What was opened, for messages: " (a link to REAL)" when path is a
 * link, "" when it is the file itself. */
static void opened_as(int fd, const char *path, char *out, size_t n)
{
    char link[64], real[300];
    struct stat st;
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t len = lstat(path, &st) == 0 && S_ISLNK(st.st_mode)
                      ? readlink(link, real, sizeof real - 1)
                      : -1;
    out[0] = 0;
    if (len > 0) {
        real[len] = 0;
        snprintf(out, n, " (a link to %s)", real);
    }
}

/* Whether the file opened may be a policy: a regular file that only root
 * (or the daemon's own user) can change. Checked on what was opened, not
 * on the name: a link (Kubernetes ConfigMaps are ..data/ links, config
 * management keeps links too) is followed, and its target is what counts. */
static int trusted(int fd, const struct stat *st, const char *path, char *err, size_t errlen)
{
    char as[320];
    opened_as(fd, path, as, sizeof as);
    mode_t m = st->st_mode;
    if (!S_ISREG(m)) {
        snprintf(err, errlen, "%s%s: not a regular file but %s; the policy is a plain file", path,
                 as, S_ISFIFO(m) ? "a FIFO" : S_ISDIR(m) ? "a directory" : S_ISSOCK(m) ? "a socket"
                 : S_ISCHR(m) || S_ISBLK(m) ? "a device" : "something else");
        return -1;
    }
    if (st->st_uid != 0 && st->st_uid != geteuid()) {
        snprintf(err, errlen, "%s%s: owned by uid %u; the policy must be root's%s, so that no "
                 "one else can change it", path, as, (unsigned)st->st_uid,
                 geteuid() ? " or the daemon's own user's" : "");
        return -1;
    }
    if ((m & S_IWOTH) || ((m & S_IWGRP) && st->st_gid != 0 && st->st_gid != getegid())) {
        snprintf(err, errlen, "%s%s: writable by %s (mode %04o); the policy must be writable by "
                 "its owner only (chmod go-w)", path, as,
                 m & S_IWOTH ? "every user" : "its group", (unsigned)(m & 07777));
        return -1;
    }
    return 0;
}

int policy_load(const char *path, struct policy *p, char *err, size_t errlen)
{
    /* How to change a policy without the daemon ever reading half of one. */
    static const char *const atomically =
        "write the new policy to another file and rename it over this one";
    /* Non-blocking until it is known to be a regular file: a FIFO put in
     * its place would block the daemon in open or read. A link is followed;
     * what was opened is then checked (trusted). */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errlen, "%s: cannot open the policy file: %s", path, strerror(errno));
        return -1;
    }
    struct stat before, after;
    if (fstat(fd, &before) != 0) {
        snprintf(err, errlen, "%s: cannot read the policy file: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    if (trusted(fd, &before, path, err, errlen) != 0) {
        close(fd);
        return -1;
    }
    FILE *f = fcntl(fd, F_SETFL, 0) == 0 ? fdopen(fd, "r") : NULL;
    if (!f) {
        snprintf(err, errlen, "%s: cannot read the policy file: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    enum { MAX_TEXT = 1 << 16 };
    char *text = malloc(MAX_TEXT);
    struct policy *q = malloc(sizeof *q);
    size_t len = 0;
    int rc = -1;
    if (!text || !q) {
        snprintf(err, errlen, "%s: out of memory", path);
    } else if ((len = fread(text, 1, MAX_TEXT, f)) == MAX_TEXT) {
        snprintf(err, errlen, "%s: longer than the 64 KiB a policy file may be", path);
    } else if (ferror(f) || fstat(fileno(f), &after) != 0 || (off_t)len != after.st_size ||
               after.st_size != before.st_size ||
               after.st_mtim.tv_nsec != before.st_mtim.tv_nsec ||
               after.st_mtim.tv_sec != before.st_mtim.tv_sec) {
        snprintf(err, errlen, "%s: the file changed while it was read; %s", path, atomically);
    } else if (len == 0) {
        snprintf(err, errlen, "%s: the file is empty (a file meaning no rules says so in a "
                 "comment); if it is being written, %s", path, atomically);
    } else if (policy_parse(text, len, path, q, err, errlen) == 0 &&
               resolve_names(q, path, err, errlen) == 0) {
        memcpy(p, q, sizeof *q);
        rc = 0;
    }
    fclose(f);
    free(text);
    free(q);
    return rc;
}

bool policy_on_device(const struct policy_rule *r, int index, const char *uuid)
{
    if (!r->device[0])
        return true;
    /* All digits: an index. Anything else: a UUID prefix, "GPU-" optional. */
    if (strspn(r->device, "0123456789") == strlen(r->device))
        return strlen(r->device) <= 5 && atoi(r->device) == index;
    size_t n = strlen(r->device);
    return strncasecmp(uuid, r->device, n) == 0 ||
           (strncasecmp(uuid, "GPU-", 4) == 0 && strncasecmp(uuid + 4, r->device, n) == 0);
}

static bool on_some_device(const struct policy_rule *r, const char *const *uuids, int n)
{
    for (int d = 0; d < n; d++)
        if (policy_on_device(r, d, uuids[d]))
            return true;
    return false;
}

int policy_check_devices(const struct policy *p, const char *const *uuids,
                         const uint64_t *totals, int n, char *err, size_t errlen)
{
    for (int i = 0; i < p->nrules; i++) {
        const struct policy_rule *r = &p->rules[i];
        if (r->device[0] && !on_some_device(r, uuids, n)) {
            snprintf(err, errlen, "%s:%d: \"on %s\": this node has %d GPU%s (%s%s)", p->file,
                     r->line, r->device, n, n == 1 ? "" : "s",
                     n ? "index 0 is " : "none is listed by NVML", n ? uuids[0] : "");
            return -1;
        }
    }
    for (int d = 0; d < n; d++) {
        if (p->has_default && amount_of(&p->default_budget, totals[d]) > totals[d]) {
            snprintf(err, errlen, "%s:%d: default-budget %s is more than GPU %d (%s) has, %s",
                     p->file, p->default_line,
                     format_size(amount_of(&p->default_budget, totals[d])).text, d, uuids[d],
                     format_size(totals[d]).text);
            return -1;
        }
        uint64_t reserved = 0;
        for (int i = 0; i < p->nrules; i++) {
            const struct policy_rule *r = &p->rules[i];
            if (r->kind != RULE_RESERVE || !policy_on_device(r, d, uuids[d]))
                continue;
            reserved += amount_of(&r->amount, totals[d]);
            if (reserved > totals[d]) {
                snprintf(err, errlen, "%s:%d: reservations on GPU %d (%s) add up to %s, more "
                         "than its %s", p->file, r->line, d, uuids[d],
                         format_size(reserved).text, format_size(totals[d]).text);
                return -1;
            }
        }
    }
    return 0;
}

static void print_amount(FILE *out, const struct amount *a)
{
    if (a->is_share)
        fprintf(out, "%g%%", a->share * 100);
    else
        fprintf(out, "%s", format_size(a->bytes).text);
}

static void print_duration(FILE *out, uint64_t ms)
{
    if (ms && ms % 3600000 == 0)
        fprintf(out, "%lluh", (unsigned long long)(ms / 3600000));
    else if (ms && ms % 60000 == 0)
        fprintf(out, "%llum", (unsigned long long)(ms / 60000));
    else if (ms && ms % 1000 == 0)
        fprintf(out, "%llus", (unsigned long long)(ms / 1000));
    else
        fprintf(out, "%llums", (unsigned long long)ms);
}

void policy_describe(const struct policy *p, FILE *out)
{
    static const char *const who[] = {"user", "group", "job"};
    fprintf(out, "%s: %d directive%s, %d rule%s\n", p->file[0] ? p->file : "(no policy file)",
            p->ndirectives, p->ndirectives == 1 ? "" : "s", p->nrules, p->nrules == 1 ? "" : "s");
    /* In the file's order: settings and rules by line. */
    int last = 0;
    for (;;) {
        int next = 0;
        const int lines[] = {p->default_line, p->wait_line,  p->margin_line,
                             p->reconcile_line, p->conns_line, p->silent_line,
                             p->driver_jobs_line};
        for (size_t k = 0; k < sizeof lines / sizeof *lines; k++)
            if (lines[k] > last && (!next || lines[k] < next))
                next = lines[k];
        for (int i = 0; i < p->nrules; i++)
            if (p->rules[i].line > last && (!next || p->rules[i].line < next))
                next = p->rules[i].line;
        if (!next)
            break;
        last = next;
        fprintf(out, "  line %d: ", next);
        if (next == p->default_line) {
            fprintf(out, "default-budget ");
            print_amount(out, &p->default_budget);
            fprintf(out, " of each GPU, for a process that asks for none\n");
        } else if (next == p->wait_line) {
            if (p->wait) {
                fprintf(out, "when-full wait ");
                print_duration(out, p->wait_ms);
                fprintf(out, ": a request that does not fit waits at most that long\n");
            } else {
                fprintf(out, "when-full fail: a request that does not fit is refused at once\n");
            }
        } else if (next == p->margin_line) {
            fprintf(out, "over-margin %s: NVML usage beyond a budget by more is reported\n",
                    format_size(p->over_margin).text);
        } else if (next == p->conns_line) {
            fprintf(out, "connections-per-user %llu: more from one user (not root) are refused\n",
                    (unsigned long long)p->connections_per_user);
        } else if (next == p->driver_jobs_line) {
            fprintf(out, "driver-jobs-per-user %llu: where the driver holds job grants, more jobs "
                    "of one user's own are refused\n", (unsigned long long)p->driver_jobs_per_user);
        } else if (next == p->silent_line) {
            fprintf(out, "first-message-within ");
            print_duration(out, p->silent_ms);
            fprintf(out, ": a connection that says nothing for that long is closed\n");
        } else if (next == p->reconcile_line) {
            fprintf(out, "reconcile-every ");
            print_duration(out, p->reconcile_ms);
            fprintf(out, "%s\n", p->reconcile_ms ? ": usage is read from NVML that often" : ": never");
        } else {
            for (int i = 0; i < p->nrules; i++) {
                const struct policy_rule *r = &p->rules[i];
                if (r->line != next)
                    continue;
                char id[32] = "";
                if (r->who != WHO_JOB && !r->numeric)
                    snprintf(id, sizeof id, " (%s %u)", r->who == WHO_USER ? "uid" : "gid",
                             (unsigned)r->id);
                if (r->kind == RULE_CAP) {
                    fprintf(out, "cap %s %s%s: ", who[r->who], r->name, id);
                    print_amount(out, &r->amount);
                } else {
                    fprintf(out, "reserve ");
                    print_amount(out, &r->amount);
                    fprintf(out, " for %s %s%s", who[r->who], r->name, id);
                    if (r->owner.given && r->owner.numeric)
                        fprintf(out, " of %s %s", who[r->owner.who], r->owner.name);
                    else if (r->owner.given)
                        fprintf(out, " of %s %s (%s %u)", who[r->owner.who], r->owner.name,
                                r->owner.who == WHO_USER ? "uid" : "gid", (unsigned)r->owner.id);
                }
                if (r->device[0])
                    fprintf(out, " on %s", r->device);
                else
                    fprintf(out, " on each GPU");
                bool root_only = r->kind == RULE_RESERVE && r->who == WHO_JOB && !r->owner.given;
                fprintf(out, "%s\n", root_only ? " (jobs root registers only: Slurm steps)" : "");
            }
        }
    }
    if (!p->wait_line)
        fprintf(out, "  (default) when-full fail\n");
    if (!p->reconcile_line) {
        fprintf(out, "  (default) reconcile-every ");
        print_duration(out, p->reconcile_ms);
        fprintf(out, "\n");
    }
    if (!p->margin_line)
        fprintf(out, "  (default) over-margin %s\n", format_size(p->over_margin).text);
    if (!p->conns_line)
        fprintf(out, "  (default) connections-per-user %llu\n",
                (unsigned long long)p->connections_per_user);
    if (!p->driver_jobs_line)
        fprintf(out, "  (default) driver-jobs-per-user %llu\n",
                (unsigned long long)p->driver_jobs_per_user);
    if (!p->silent_line) {
        fprintf(out, "  (default) first-message-within ");
        print_duration(out, p->silent_ms);
        fprintf(out, "\n");
    }
}

bool policy_rule_warning(const struct policy *p, int i, char *out, size_t n)
{
    const struct policy_rule *r = &p->rules[i];
    if (r->kind != RULE_RESERVE || r->who != WHO_JOB || r->owner.given)
        return false;
    snprintf(out, n, "%s:%d: \"reserve ... for job %s\" matches only jobs root registers (Slurm "
             "steps), never a user's own vram run --job %s or VRAM_JOB=%s; for those, say whose "
             "they are: \"for job %s of user NAME\" or \"of group NAME\"",
             p->file, r->line, r->name, r->name, r->name, r->name);
    return true;
}
