/* vramd's answers, driven without its loop (tests/fake_conns.c): what each
 * message does to the ledger, message by message. Each part names the item
 * of issue 11 it holds to. */
#include "check.h"
#include "fake_conns.h"
#include "../src/daemon/job_keep.h"
#include "../src/protocol/snapshot.h"
#include "../src/view/metrics.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

static const char *const one_gpu[] = {"GPU-00000000-0000-4000-8000-000000000001", NULL};
#define U0 "GPU-00000000-0000-4000-8000-000000000001"

/* The device as root's status shows it. */
static struct snap_device device(int dev)
{
    struct snapshot s;
    snapshot_init(&s);
    ledger_snapshot(&D.L, 0, &s);
    struct snap_device d = s.dev[dev];
    snapshot_free(&s);
    return d;
}

static uint64_t granted_on(int dev) { return device(dev).granted; }
static uint64_t used_on(int dev) { return device(dev).used; }

/* A process that said HELLO. */
static struct fake_conn *process(pid_t pid, uid_t uid)
{
    struct fake_conn *f = fake_open(pid, uid, uid);
    CHECK(fake_say(f, "VRAM/1 HELLO role=process cmd=test") == 0);
    CHECK(fake_answer(f, "VRAM/1 OK client="));
    return f;
}

/* Item 1: a message refused with ERR changes nothing, and the daemon never
 * goes on with a device it could not name. */
static void test_err_changes_nothing(void)
{
    fake_daemon("default-budget 2GiB\n", one_gpu, 12 * GiB);
    struct fake_conn *a = process(100, 1000);
    static const char *const bad[] = {
        "VRAM/1 REQUEST bytes=1048576",                        /* no dev= */
        "VRAM/1 REQUEST dev=GPU-nope total=5 bytes=1",          /* not a GPU of this node */
        "VRAM/1 REQUEST dev=" U0 " total=x bytes=1",            /* a malformed total */
        "VRAM/1 REQUEST dev=bad%uuid bytes=1",                  /* not a name */
        "VRAM/1 REQUEST dev=" U0 " bytes=lots",                 /* a malformed amount */
        "VRAM/1 REQUEST dev=" U0,                               /* no bytes= */
        "VRAM/1 REQUEST dev=" U0 " bytes=1 wait=-1",
        "VRAM/1 REPORT used=5",
        "VRAM/1 RELEASE",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        CHECK(fake_say(a, bad[i]) == 0);
        CHECK(a->sent == 1);
        CHECK(fake_answer(a, "VRAM/1 ERR") || fake_answer(a, "VRAM/1 DENY"));
        CHECK(!fake_answer(a, "GRANT"));
        CHECK(granted_on(0) == 0);
    }
    /* JOB shares the device path: as root, a malformed device is refused too. */
    struct fake_conn *j = fake_open(1, 0, 0);
    CHECK(fake_say(j, "VRAM/1 JOB job=1.0 uid=1000 gid=1000 total=x bytes=1") == 0);
    CHECK(fake_answer(j, "VRAM/1 ERR") && !fake_answer(j, "GRANT") && granted_on(0) == 0);
    CHECK(fake_say(j, "VRAM/1 JOB job=1.0 uid=1000 gid=1000 bytes=1") == 0);
    CHECK(fake_answer(j, "VRAM/1 ERR") && !fake_answer(j, "GRANT") && granted_on(0) == 0);
    /* And a good message after all that is still served. */
    CHECK(fake_say(a, "VRAM/1 REQUEST dev=" U0 " bytes=0") == 0);
    CHECK(fake_answer(a, "VRAM/1 GRANT dev=" U0 " bytes=2147483648"));
    fake_daemon_end();
}

/* Item 16: usage is reported only for a grant held, and only up to the
 * device's size. */
static void test_report_checked(void)
{
    fake_daemon("default-budget 2GiB\n", one_gpu, 12 * GiB);
    struct fake_conn *a = process(100, 1000);
    CHECK(fake_say(a, "VRAM/1 REPORT dev=" U0 " used=72057594037927936 peak=0") == 0);
    CHECK(fake_answer(a, "VRAM/1 ERR") && used_on(0) == 0);
    CHECK(fake_say(a, "VRAM/1 REPORT dev=" U0 " used=1048576 peak=1048576") == 0);
    CHECK(fake_answer(a, "VRAM/1 ERR") && used_on(0) == 0); /* no grant */
    CHECK(fake_say(a, "VRAM/1 REQUEST dev=" U0 " bytes=0") == 0 && fake_answer(a, "GRANT"));
    CHECK(fake_say(a, "VRAM/1 REPORT dev=" U0 " used=13958643712 peak=0") == 0);
    CHECK(fake_answer(a, "VRAM/1 ERR") && used_on(0) == 0); /* 13 GiB of 12 */
    CHECK(fake_say(a, "VRAM/1 REPORT dev=" U0 " used=1048576 peak=72057594037927936") == 0);
    CHECK(fake_answer(a, "VRAM/1 ERR") && used_on(0) == 0);
    CHECK(fake_say(a, "VRAM/1 REPORT dev=" U0 " used=1048576 peak=2097152") == 0);
    CHECK(a->sent == 0 && used_on(0) == 1 * MiB); /* a good report is not answered */
    fake_daemon_end();
}

/* Issue 26 item 7: what a client reports is bounded by its grant: ten
 * grants of 1 MiB each saying 12 GiB in use do not make a 12 GiB GPU show
 * 120 GiB, in status, in the history or in Prometheus's figures. */
static void test_report_bounded_by_grant(void)
{
    fake_daemon(NULL, one_gpu, 12 * GiB);
    for (int i = 0; i < 10; i++) {
        struct fake_conn *f = process(400 + i, 1000);
        CHECK(fake_say(f, "VRAM/1 REQUEST dev=" U0 " bytes=1048576") == 0 && fake_answer(f, "GRANT"));
        CHECK(fake_say(f, "VRAM/1 REPORT dev=" U0 " used=12884901888 peak=12884901888") == 0);
        CHECK(f->sent == 0);
    }
    CHECK(used_on(0) == 10 * MiB);
    struct snapshot s;
    snapshot_init(&s);
    ledger_snapshot(&D.L, 0, &s);
    int users = 0;
    for (int i = 0; i < s.n; i++) {
        const struct snap_entry *e = &s.e[i];
        if (e->role == 'u') {
            users++;
            CHECK(e->used == 10 * MiB && e->peak == 10 * MiB);
        } else {
            CHECK(e->used == 1 * MiB && e->peak == 1 * MiB);
        }
    }
    CHECK(users == 1);
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    snapshot_prometheus(&s, out);
    fclose(out);
    const char *line = strstr(text, "\nvram_gpu_memory_used_bytes{");
    CHECK(line && strstr(line, "} 10485760\n") == strchr(line, '}'));
    line = strstr(text, "\nvram_user_peak_bytes{");
    CHECK(line && strstr(line, "} 10485760\n") == strchr(line, '}'));
    free(text);
    snapshot_free(&s);
    for (int i = 0; i < D.history.n; i++) {
        const struct history_series *h = D.history.series[i];
        CHECK(h->last.used <= (h->kind == 'd' ? 10 * MiB : 1 * MiB));
        CHECK(h->recent[h->step % HISTORY_RECENT].used <= (h->kind == 'd' ? 10 * MiB : 1 * MiB));
    }
    CHECK(D.history.n == 11);
    fake_daemon_end();
}

/* Item 18: without NVML, devices are learnt only from root's or the daemon
 * user's own processes: another user cannot set a GPU's size or fill the
 * device table. */
static void test_learning_without_nvml(void)
{
    fake_daemon("default-budget 2GiB\n", NULL, 0);
    uid_t other = geteuid() == 4242 ? 4243 : 4242;
    struct fake_conn *m = process(300, other);
    CHECK(fake_say(m, "VRAM/1 REQUEST dev=GPU-x total=1 bytes=0") == 0);
    CHECK(fake_answer(m, "VRAM/1 DENY") && D.L.ndev == 0);
    for (int i = 0; i < 20; i++) {
        char msg[128];
        snprintf(msg, sizeof msg, "VRAM/1 REQUEST dev=GPU-fake%d total=1099511627776 bytes=1", i);
        CHECK(fake_say(m, msg) == 0 && fake_answer(m, "VRAM/1 DENY"));
    }
    CHECK(D.L.ndev == 0);
    struct fake_conn *r = process(301, geteuid());
    CHECK(fake_say(r, "VRAM/1 REQUEST dev=GPU-x total=12884901888 bytes=4294967296") == 0);
    CHECK(fake_answer(r, "GRANT") && D.L.ndev == 1 && D.L.dev[0].total == 12 * GiB);
    /* Once learnt, the device serves everyone; its size is not theirs to say. */
    CHECK(fake_say(m, "VRAM/1 REQUEST dev=GPU-x total=1 bytes=0") == 0);
    CHECK(fake_answer(m, "VRAM/1 GRANT dev=GPU-x bytes=2147483648") && D.L.dev[0].total == 12 * GiB);
    fake_daemon_end();
}

static void fill_hello(FILE *f) { fprintf(f, "hello\n"); }

static bool file_is(const char *path, const char *text)
{
    char buf[256] = "";
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return strcmp(buf, text) == 0;
}

/* Item 12: the daemon's files are written whole, by it, and never through
 * what someone else put where they go: a FIFO does not block it (a child
 * with an alarm holds the old behaviour, which blocked for ever), a link is
 * not followed, and a file another user made beside it is left alone. */
static void test_files_not_hijacked(void)
{
    char dir[] = "/tmp/vram-files.XXXXXX", path[300], other[300], tmp[400];
    CHECK(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/metrics.prom", dir);
    snprintf(other, sizeof other, "%s/theirs", dir);
    /* What the daemon wrote, or whatever name a daemon before used for its
     * temporary file, taken by another: a FIFO and a file. */
    pid_t child = fork();
    if (child == 0) {
        snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
        if (mkfifo(tmp, 0666) != 0)
            _exit(2);
        alarm(5);
        _exit(write_atomically(path, 0644, fill_hello) == 0 ? 0 : 1);
    }
    int st;
    CHECK(waitpid(child, &st, 0) == child);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0); /* not killed by the alarm */
    CHECK(file_is(path, "hello\n"));
    struct stat sb;
    CHECK(lstat(path, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_uid == geteuid() &&
          (sb.st_mode & 0777) == 0644);
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)child);
    unlink(tmp);
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    /* A regular file someone made at the old temporary name stays theirs and
     * never becomes the daemon's file. */
    FILE *f = fopen(tmp, "w");
    fputs("mine\n", f);
    fclose(f);
    CHECK(write_atomically(path, 0600, fill_hello) == 0);
    CHECK(file_is(tmp, "mine\n"));
    CHECK(lstat(path, &sb) == 0 && (sb.st_mode & 0777) == 0600 && sb.st_uid == geteuid());
    unlink(tmp);
    /* The file itself replaced by a link or a FIFO: refused, nothing followed. */
    f = fopen(other, "w");
    fputs("theirs\n", f);
    fclose(f);
    unlink(path);
    CHECK(symlink(other, path) == 0);
    CHECK(write_atomically(path, 0644, fill_hello) != 0);
    CHECK(file_is(other, "theirs\n"));
    unlink(path);
    CHECK(mkfifo(path, 0666) == 0);
    child = fork();
    if (child == 0) {
        alarm(5);
        _exit(write_atomically(path, 0644, fill_hello) != 0 ? 0 : 1);
    }
    CHECK(waitpid(child, &st, 0) == child && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
}

/* Item 2: a status is answered in pages that fit in a socket's ordinary
 * buffer (no buffer is raised for it), and a reader that asks page after
 * page gets every entry once. */
static void test_status_in_pages(void)
{
    fake_daemon("default-budget 1MiB\n", one_gpu, 12 * GiB);
    enum { N = 500 };
    for (int i = 0; i < N; i++) {
        struct fake_conn *p = process(1000 + i, 1000);
        CHECK(fake_say(p, "VRAM/1 REQUEST dev=" U0 " bytes=0") == 0 && fake_answer(p, "GRANT"));
    }
    struct fake_conn *root = fake_open(1, 0, 0);
    int seen = 0, pages = 0, devs = 0;
    char msg[128] = "VRAM/1 STATUS";
    for (;;) {
        CHECK(fake_say(root, msg) == 0);
        CHECK(root->sent <= 1 + LEDGER_MAX_DEVICES + STATUS_PAGE + 1); /* NODE, DEV, PROC, END */
        pages++;
        for (int k = 0; k < root->sent && k < FAKE_KEEP; k++) {
            seen += strncmp(root->out[k], "VRAM/1 PROC ", 12) == 0;
            devs += strncmp(root->out[k], "VRAM/1 DEV ", 11) == 0;
        }
        const char *end = root->out[root->sent - 1], *next = strstr(end, "next=");
        CHECK(strncmp(end, "VRAM/1 END", 10) == 0);
        if (!next)
            break;
        snprintf(msg, sizeof msg, "VRAM/1 STATUS after=%s", next + 5);
        CHECK(pages < 100);
    }
    /* The N processes and their user's total. */
    CHECK(seen == N + 1 && devs == 1 && pages == (N + 1 + STATUS_PAGE - 1) / STATUS_PAGE);
    /* A cursor that is not a number is refused like any bad field. */
    CHECK(fake_say(root, "VRAM/1 STATUS after=x") == 0 && fake_answer(root, "VRAM/1 ERR"));
    fake_daemon_end();
}

/* Issue 10: vram run's command is one job of its user's own: HELLO
 * role=command, its grants by REQUEST, its processes by MEMBER (processes
 * of its user only, as the kernel says, with the kernel's start time and
 * name), gone with it; and it is held across a restart as any grant is. */
static void test_command_job(void)
{
    fake_daemon("when-full fail\nreserve 1GiB for job run-*\n", one_gpu, 12 * GiB);
    uid_t me = getuid();
    pid_t self = getpid();
    struct fake_conn *v = fake_open(self, me, getgid());
    CHECK(fake_say(v, "VRAM/1 HELLO role=command cmd=train") == 0 && fake_answer(v, "VRAM/1 OK"));
    CHECK(fake_say(v, "VRAM/1 REQUEST dev=" U0 " total=12884901888 bytes=12348030976") == 0);
    CHECK(fake_answer(v, "VRAM/1 DENY") && fake_answer(v, "1.00 GiB reserved for others"));
    CHECK(fake_say(v, "VRAM/1 REQUEST dev=" U0 " total=12884901888 bytes=4294967296") == 0);
    CHECK(fake_answer(v, "VRAM/1 GRANT dev=" U0 " bytes=4294967296"));
    struct ledger_client *job = v->c.client;
    char name[32], msg[256];
    snprintf(name, sizeof name, "run-%d", (int)self);
    CHECK(job->role == ROLE_JOB && !job->by_root && strcmp(job->job, name) == 0);
    CHECK(strcmp(job->cmd, "train") == 0 && granted_on(0) == 4 * GiB);

    /* A process of the user's: a member, with no answer to the holder. */
    pid_t kid = fork();
    if (kid == 0) {
        pause();
        _exit(0);
    }
    snprintf(msg, sizeof msg, "VRAM/1 MEMBER pid=%d dev=" U0 " used=1073741824 peak=2147483648",
             (int)kid);
    CHECK(fake_say(v, msg) == 0 && v->sent == 0);
    CHECK(job->nmembers == 1 && used_on(0) == 1 * GiB && granted_on(0) == 4 * GiB);
    struct ledger_client *m = D.L.clients[D.L.nclients - 1];
    CHECK(m->member_of == job && m->pid == kid && m->start == start_time(kid));
    CHECK(strcmp(m->cmd, "test_answers") == 0 && m->use[0].grant == 0 && m->use[0].peak == 2 * GiB);
    /* Again: the same member, its figure updated. */
    snprintf(msg, sizeof msg, "VRAM/1 MEMBER pid=%d dev=" U0 " used=0 peak=2147483648", (int)kid);
    CHECK(fake_say(v, msg) == 0 && job->nmembers == 1 && used_on(0) == 0);

    /* Someone else's process is not the job's: passed over. */
    struct fake_conn *o = fake_open(self + 1, me + 1, me + 1);
    CHECK(fake_say(o, "VRAM/1 HELLO role=command") == 0);
    CHECK(fake_say(o, "VRAM/1 REQUEST dev=" U0 " total=12884901888 bytes=1073741824") == 0);
    CHECK(fake_answer(o, "GRANT"));
    snprintf(msg, sizeof msg, "VRAM/1 MEMBER pid=%d dev=" U0 " used=1 peak=1", (int)kid);
    CHECK(fake_say(o, msg) == 0 && o->c.client->nmembers == 0);

    /* What is not a job's to say is refused. */
    struct fake_conn *p = process(100, me);
    CHECK(fake_say(p, msg) == 0 && fake_answer(p, "VRAM/1 ERR text=MEMBER before JOB"));
    CHECK(fake_say(v, "VRAM/1 MEMBER pid=0 dev=" U0 " used=1 peak=1") == 0);
    CHECK(fake_answer(v, "VRAM/1 ERR text=MEMBER: pid= (more than 0)"));
    CHECK(fake_say(v, "VRAM/1 MEMBER pid=5 dev=GPU-nope used=1 peak=1") == 0);
    CHECK(fake_answer(v, "VRAM/1 ERR text=MEMBER: dev= is not a device this job holds"));
    snprintf(msg, sizeof msg, "VRAM/1 MEMBER pid=%d dev=" U0 " used=72057594037927936", (int)kid);
    CHECK(fake_say(v, msg) == 0 && fake_answer(v, "VRAM/1 ERR text=MEMBER: used="));
    struct fake_conn *r = fake_open(1, 0, 0);
    CHECK(fake_say(r, "VRAM/1 JOB job=9.0 uid=1000 gid=1000 dev=" U0 " bytes=1073741824") == 0);
    CHECK(fake_answer(r, "GRANT"));
    CHECK(fake_say(r, "VRAM/1 REQUEST dev=" U0 " bytes=1") == 0 && fake_answer(r, "VRAM/1 ERR"));
    CHECK(r->c.client->by_root);

    /* It left the job. */
    snprintf(msg, sizeof msg, "VRAM/1 MEMBER pid=%d", (int)kid);
    CHECK(fake_say(v, msg) == 0 && job->nmembers == 0 && v->sent == 0);
    snprintf(msg, sizeof msg, "VRAM/1 MEMBER pid=%d dev=" U0 " used=5 peak=5", (int)kid);
    CHECK(fake_say(v, msg) == 0 && job->nmembers == 1);

    /* A restart: the command's grant is held for it, then taken back. */
    fake_restart();
    CHECK(granted_on(0) == 6 * GiB);
    v = fake_open(self, me, getgid());
    CHECK(fake_say(v, "VRAM/1 HELLO role=command cmd=train") == 0);
    CHECK(fake_say(v, "VRAM/1 REQUEST dev=" U0 " total=12884901888 bytes=4294967296 "
                      "restore=4294967296") == 0);
    CHECK(fake_answer(v, "VRAM/1 GRANT dev=" U0 " bytes=4294967296"));
    CHECK(granted_on(0) == 6 * GiB && !v->c.client->by_root);
    /* Its members are said again (vram run's holder resends everything). */
    snprintf(msg, sizeof msg, "VRAM/1 MEMBER pid=%d dev=" U0 " used=5 peak=5", (int)kid);
    CHECK(fake_say(v, msg) == 0 && v->c.client->nmembers == 1);
    /* The holder goes (vram run killed) while a process of the job lives:
     * the job is kept for it (issue 26 item 1), until it is gone too. */
    struct ledger_client *kept = v->c.client;
    fake_close(v);
    CHECK(granted_on(0) == 6 * GiB && kept->kept && !kept->owner && kept->nmembers == 1);
    char err[256];
    CHECK(ledger_check(&D.L, err, sizeof err) == 0);
    job_keep_tick(&D.L, now_ms() + KEEP_CHECK_MS, answers_job_over);
    CHECK(granted_on(0) == 6 * GiB);
    kill(kid, SIGKILL);
    waitpid(kid, NULL, 0);
    job_keep_tick(&D.L, now_ms() + 2 * KEEP_CHECK_MS, answers_job_over);
    CHECK(granted_on(0) == 2 * GiB && used_on(0) == 0 && D.L.nkept == 0);
    CHECK(ledger_check(&D.L, err, sizeof err) == 0);
    fake_daemon_end();
}

/* A process of `uid` in job `job` holding `used` of a 32 MiB grant. */
static struct fake_conn *reporting(pid_t pid, uid_t uid, const char *job, const char *used)
{
    struct fake_conn *f = fake_open(pid, uid, uid);
    char msg[200];
    snprintf(msg, sizeof msg, "VRAM/1 HELLO role=process cmd=train job=%s", job);
    CHECK(fake_say(f, msg) == 0 && fake_answer(f, "VRAM/1 OK"));
    CHECK(fake_say(f, "VRAM/1 REQUEST dev=" U0 " bytes=33554432") == 0 && fake_answer(f, "GRANT"));
    snprintf(msg, sizeof msg, "VRAM/1 REPORT dev=" U0 " used=%s peak=%s", used, used);
    CHECK(fake_say(f, msg) == 0 && f->sent == 0);
    return f;
}

/* How many answers name `needle`. */
static int count(const struct fake_conn *f, const char *needle)
{
    int n = 0;
    for (int k = 0; k < f->sent && k < FAKE_KEEP; k++)
        n += strstr(f->out[k], needle) != NULL;
    return n;
}

/* HISTORY: a reader gets the devices' series and their own clients', never
 * another user's (root: everyone's); a job's after it ended; a bad field is
 * an ERR that changes nothing; the answer comes in pages of at most
 * HISTORY_PAGE messages. */
static void test_history(void)
{
    fake_daemon(NULL, one_gpu, 12 * GiB);
    struct fake_conn *a = reporting(100, 1000, "train", "16777216");
    struct fake_conn *b = reporting(200, 1001, "train", "8388608");
    struct fake_conn *root = fake_open(1, 0, 0);
    CHECK(fake_say(a, "VRAM/1 HISTORY") == 0);
    CHECK(count(a, "VRAM/1 SERIES ") == 2 && count(a, "kind=device") == 1 &&
          count(a, "pid=100 uid=1000 user=") == 1 && count(a, "pid=200") == 0);
    CHECK(count(a, "VRAM/1 SAMPLES ") >= 4 && count(a, "used=16777216") == 2);
    CHECK(strncmp(a->out[a->sent - 1], "VRAM/1 END now=", 15) == 0 &&
          strstr(a->out[a->sent - 1], " wall="));
    CHECK(fake_say(b, "VRAM/1 HISTORY job=train") == 0);
    CHECK(count(b, "VRAM/1 SERIES ") == 1 && count(b, "pid=200") == 1 && count(b, "device") == 0);
    CHECK(fake_say(root, "VRAM/1 HISTORY job=train tier=recent") == 0);
    CHECK(count(root, "VRAM/1 SERIES ") == 2 && count(root, "tier=hour") == 0);

    /* Refused, and nothing changes. */
    static const char *const bad[] = {
        "VRAM/1 HISTORY tier=week", "VRAM/1 HISTORY after=x", "VRAM/1 HISTORY job=a$b",
        "VRAM/1 HISTORY job=", "VRAM/1 HISTORY after=-1",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        int n = D.history.n;
        size_t bytes = D.history.bytes;
        uint64_t used = used_on(0);
        CHECK(fake_say(a, bad[i]) == 0 && a->sent == 1 && fake_answer(a, "VRAM/1 ERR text=HISTORY: "));
        CHECK(D.history.n == n && D.history.bytes == bytes && used_on(0) == used);
    }
    CHECK(fake_say(a, "VRAM/1 HISTORY tier=week") == 0 && fake_answer(a, "tier=\"week\": expected recent or all"));

    /* The job ended: its history stays, for its user. */
    fake_close(a);
    struct fake_conn *again = fake_open(101, 1000, 1000);
    CHECK(fake_say(again, "VRAM/1 HISTORY job=train") == 0);
    CHECK(count(again, "VRAM/1 SERIES ") == 1 && count(again, "pid=100") == 1 &&
          count(again, " end=") == 1);
    CHECK(fake_say(again, "VRAM/1 HISTORY") == 0 && count(again, "pid=100") == 0);
    fake_close(b);
    fake_daemon_end();

    /* Pages: 200 reporting processes, every series once. */
    fake_daemon(NULL, one_gpu, 12 * GiB);
    enum { N = 200 };
    for (int i = 0; i < N; i++)
        reporting(1000 + i, 1000, "many", i % 2 ? "1048576" : "2097152");
    root = fake_open(1, 0, 0);
    int series = 0, pages = 0;
    char msg[128] = "VRAM/1 HISTORY";
    for (;;) {
        CHECK(fake_say(root, msg) == 0);
        CHECK(root->sent <= HISTORY_PAGE && root->sent <= FAKE_KEEP);
        pages++;
        series += count(root, "VRAM/1 SERIES ");
        const char *end = root->out[root->sent - 1], *next = strstr(end, "next=");
        CHECK(strncmp(end, "VRAM/1 END", 10) == 0);
        if (!next)
            break;
        snprintf(msg, sizeof msg, "VRAM/1 HISTORY after=%.*s", (int)strcspn(next + 5, " "),
                 next + 5);
        CHECK(pages < 100);
    }
    CHECK(series == N + 1 && pages > 1);
    fake_daemon_end();
}

int main(void)
{
    test_err_changes_nothing();
    test_report_checked();
    test_report_bounded_by_grant();
    test_learning_without_nvml();
    test_files_not_hijacked();
    test_status_in_pages();
    test_command_job();
    test_history();
    printf("test_answers: ok\n");
    return 0;
}
