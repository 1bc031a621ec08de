/* The ledger's rules, without a daemon: what a user relies on when vramd
 * grants, queues or refuses, and what the policy file and the protocol
 * accept. */
#include "check.h"
#include <fcntl.h>
#include "../src/ledger/ledger.h"
#include "../src/ledger/policy.h"
#include "../src/protocol/protocol.h"
#include "../src/protocol/snapshot.h"

static struct policy P;

static void policy_of(const char *text)
{
    char err[512];
    if (policy_parse(text, strlen(text), "test.conf", &P, err, sizeof err) != 0) {
        fprintf(stderr, "policy refused: %s\n", err);
        exit(1);
    }
}

static void policy_error(const char *text, const char *want)
{
    char err[512] = "";
    struct policy q;
    policy_default(&q);
    q.nrules = 42;
    CHECK(policy_parse(text, strlen(text), "test.conf", &q, err, sizeof err) == -1);
    CHECK_CONTAINS(err, want);
    CHECK(q.nrules == 42); /* a refused file changes nothing */
}

static void test_policy_file(void)
{
    policy_of("# comment\n"
              "default-budget 25%   # a share\n"
              "cap user 1001 8GiB\n"
              "cap group 2000 50% on 1\n"
              "cap user 1002 0.5GiB\n"
              "reserve 2GiB for job critical-* on GPU-5a1d\n"
              "when-full wait 10m\n"
              "over-margin 128MiB\n"
              "reconcile-every 500ms\n");
    CHECK(P.has_default && P.default_budget.is_share && P.default_budget.share == 0.25);
    CHECK(P.nrules == 4);
    CHECK(P.rules[0].kind == RULE_CAP && P.rules[0].who == WHO_USER && P.rules[0].line == 3);
    CHECK(P.rules[0].amount.bytes == 8 * GiB);
    CHECK(P.rules[1].who == WHO_GROUP && strcmp(P.rules[1].device, "1") == 0);
    CHECK(!P.rules[2].amount.is_share && P.rules[2].amount.bytes == 512 * MiB);
    CHECK(P.rules[3].kind == RULE_RESERVE && P.rules[3].who == WHO_JOB);
    CHECK(P.wait && P.wait_ms == 600000 && P.over_margin == 128 * MiB && P.reconcile_ms == 500);
    CHECK(policy_on_device(&P.rules[1], 1, "GPU-0000") && !policy_on_device(&P.rules[1], 0, "GPU-1"));
    CHECK(policy_on_device(&P.rules[3], 3, "GPU-5a1d0e5a-a000") &&
          !policy_on_device(&P.rules[3], 3, "GPU-5a1e"));

    /* Errors name the file, the line and what is accepted. */
    policy_error("cap user 1001 8GiB\ncap user 1001 lots\n", "test.conf:2: \"lots\"");
    policy_error("cap user 1001 lots\n", "accepted: a size");
    /* The accepted forms are printed as written (issue 11, item 20: a '%'
     * in them was once read as a conversion and printed garbage). */
    policy_error("default-budget lots\n",
                 "accepted: a size (4GiB, 512MiB) or a share of the device (25% or 0.25)");
    policy_error("cap user 1001 lots\n",
                 "accepted: a size (4GiB, 512MiB) or a share of the device (25% or 0.25)");
    policy_error("capp user x 1G\n", "test.conf:1: unknown directive \"capp\"");
    policy_error("reserve 1G to user x\n", "reserve takes");
    policy_error("cap job x 1G\n", "expected user or group");
    policy_error("when-full sometimes\n", "when-full takes");
    policy_error("when-full wait forever\n", "accepted: seconds (1, 2.5) or a number with a unit");
    policy_error("default-budget 0\n", "more than 0");
    policy_error("cap user a 1G on\n", "on DEVICE");
    policy_error("default-budget 150%\n", "default-budget \"150%\"");
    policy_error("cap user a\x01 1G\n", "not printable");
    policy_error("connections-per-user 0\n", "connections-per-user \"0\": must be more than 0");
    policy_error("connections-per-user many\n", "accepted: a number from 1 to 1000000");
    policy_error("first-message-within 0\n", "first-message-within \"0\"");
    /* Two caps for one user and the same devices: which was meant? */
    policy_error("cap user 1001 8GiB\ncap group 1001 4GiB\ncap user 1001 4GiB\n",
                 "test.conf:3: a second cap for user 1001 (the first is on line 1)");
    policy_error("cap user 1001 8GiB on 1\ncap user 1001 4GiB on 1\n",
                 "test.conf:2: a second cap for user 1001 on 1 (the first is on line 1)");
    policy_of("cap user 1001 8GiB\ncap user 1001 4GiB on 1\ncap group 1001 2GiB\n");
    CHECK(P.nrules == 3);
    policy_of("connections-per-user 64\nfirst-message-within 2s\n");
    CHECK(P.connections_per_user == 64 && P.silent_ms == 2000);
    /* Issue 27 item 9: whose jobs a job reservation is for. */
    policy_of("reserve 4GiB for job critical-* of user 1001\n"
              "reserve 2GiB for job nightly of group 2000 on 1\n"
              "reserve 1GiB for job slurm-*\n");
    CHECK(P.nrules == 3 && P.rules[0].owner.given && P.rules[0].owner.who == WHO_USER &&
          P.rules[0].owner.numeric && P.rules[0].owner.id == 1001);
    CHECK(P.rules[1].owner.who == WHO_GROUP && P.rules[1].owner.id == 2000 &&
          strcmp(P.rules[1].device, "1") == 0);
    CHECK(!P.rules[2].owner.given);
    char warning[700];
    CHECK(!policy_rule_warning(&P, 0, warning, sizeof warning));
    CHECK(policy_rule_warning(&P, 2, warning, sizeof warning));
    CHECK(strstr(warning, "test.conf:3: \"reserve ... for job slurm-*\" matches only jobs root "
                          "registers (Slurm steps)") &&
          strstr(warning, "\"for job slurm-* of user NAME\""));
    policy_error("reserve 4GiB for user 1001 of group 2\n",
                 "test.conf:1: \"of\" after \"for user 1001\": only a job reservation says whose "
                 "jobs it is for; accepted: reserve AMOUNT for job NAME of user|group OWNER");
    policy_error("reserve 4GiB for job x of\n", "\"of\" takes \"user NAME\" or \"group NAME\"");
    policy_error("reserve 4GiB for job x of users a\n", "\"users\": expected user or group");
    policy_error("reserve 4GiB for job x by user a\n",
                 "unexpected \"by\"; a rule may end with \"on DEVICE\", a job reservation with "
                 "\"of user|group OWNER\" before it");
    policy_error("reserve 4GiB for job x of user a now\n", "unexpected \"now\"; a rule may end with \"on DEVICE\"");
    policy_error("driver-jobs-per-user 0\n", "driver-jobs-per-user \"0\": must be more than 0");
    policy_error("driver-jobs-per-user lots\n", "accepted: a number from 1 to 1000000");
    policy_of("first-message-within 2s\n");
    CHECK(P.driver_jobs_per_user == 32);
    policy_of("driver-jobs-per-user 4\n");
    CHECK(P.driver_jobs_per_user == 4);

    /* Names are resolved when the file is loaded: a typo is an error. */
    char path[] = "/tmp/vram-policy.XXXXXX", err[512];
    int fd = mkstemp(path);
    const char *text = "cap user no-such-user-here 1G\n";
    CHECK(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
    close(fd);
    struct policy q;
    CHECK(policy_load(path, &q, err, sizeof err) == -1);
    CHECK_CONTAINS(err, ":1: no user named \"no-such-user-here\"");
    fd = open(path, O_WRONLY | O_TRUNC);
    text = "reserve 1G for job x of group no-such-group-here\n";
    CHECK(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
    close(fd);
    CHECK(policy_load(path, &q, err, sizeof err) == -1);
    CHECK_CONTAINS(err, ":1: no group named \"no-such-group-here\"");
    unlink(path);
    CHECK(policy_load("/nonexistent/policy.conf", &q, err, sizeof err) == -1);
    CHECK_CONTAINS(err, "/nonexistent/policy.conf: cannot open");
}

/* Item 15: a policy file caught half-written, or not a file at all, is
 * refused (the daemon then keeps the policy it has), never read as a
 * policy with fewer rules. */
static void test_policy_whole_files(void)
{
    char dir[] = "/tmp/vram-policy.XXXXXX", path[300], err[512];
    CHECK(mkdtemp(dir));
    struct policy q;
    q.nrules = 42;
    CHECK(policy_load(dir, &q, err, sizeof err) == -1 && q.nrules == 42);
    CHECK_CONTAINS(err, "not a regular file");
    snprintf(path, sizeof path, "%s/policy.conf", dir);
    static const struct {
        const char *text, *why;
    } bad[] = {
        {"", "empty"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        FILE *f = fopen(path, "w");
        fputs(bad[i].text, f);
        fclose(f);
        err[0] = 0;
        CHECK(policy_load(path, &q, err, sizeof err) == -1 && q.nrules == 42);
        CHECK_CONTAINS(err, bad[i].why);
        CHECK_CONTAINS(err, "rename");
    }
    FILE *f = fopen(path, "w");
    fputs("# only comments: a file that means no rules says so\n", f);
    fclose(f);
    CHECK(policy_load(path, &q, err, sizeof err) == 0 && q.nrules == 0);
    /* A last line without a newline, as an editor may save it, is a line
     * (issue 22, item 11); one cut short mid-word is refused by what it
     * says, with its line. */
    f = fopen(path, "w");
    fputs("cap user 1001 8GiB\ncap user 1002 4GiB", f);
    fclose(f);
    CHECK(policy_load(path, &q, err, sizeof err) == 0 && q.nrules == 2 &&
          q.rules[1].amount.bytes == 4 * GiB);
    f = fopen(path, "w");
    fputs("cap user 1001 8GiB\ncap user", f);
    fclose(f);
    q.nrules = 42;
    CHECK(policy_load(path, &q, err, sizeof err) == -1 && q.nrules == 42);
    CHECK_CONTAINS(err, "policy.conf:2: cap takes");
    unlink(path);

    /* Issue 26 item 10: a link is followed, and what it leads to is what
     * is checked. A Kubernetes ConfigMap: policy.conf -> ..data/policy.conf,
     * ..data -> ..2026_01_01 (swapped whole on an update). */
    char ts[320], data[320], inner[340];
    snprintf(ts, sizeof ts, "%s/..2026_01_01", dir);
    snprintf(data, sizeof data, "%s/..data", dir);
    snprintf(inner, sizeof inner, "%s/policy.conf", ts);
    CHECK(mkdir(ts, 0755) == 0 && symlink("..2026_01_01", data) == 0 &&
          symlink("..data/policy.conf", path) == 0);
    f = fopen(inner, "w");
    fputs("cap user 1001 8GiB\n", f);
    fclose(f);
    CHECK(chmod(inner, 0644) == 0);
    CHECK(policy_load(path, &q, err, sizeof err) == 0 && q.nrules == 1);
    /* What the link leads to must be a file no one else can change. */
    CHECK(chmod(inner, 0666) == 0);
    q.nrules = 42;
    CHECK(policy_load(path, &q, err, sizeof err) == -1 && q.nrules == 42);
    CHECK_CONTAINS(err, "policy.conf (a link to ");
    CHECK_CONTAINS(err, "..2026_01_01/policy.conf): writable by every user (mode 0666)");
    CHECK(chmod(inner, 0644) == 0);
    if (geteuid() == 0) {
        CHECK(chown(inner, 4242, 0) == 0);
        CHECK(policy_load(path, &q, err, sizeof err) == -1 && q.nrules == 42);
        CHECK_CONTAINS(err, "owned by uid 4242; the policy must be root's");
        CHECK(chown(inner, 0, 0) == 0);
    }
    /* A link to a FIFO: refused as one, without blocking. */
    unlink(inner);
    CHECK(mkfifo(inner, 0600) == 0);
    CHECK(policy_load(path, &q, err, sizeof err) == -1);
    CHECK_CONTAINS(err, "not a regular file but a FIFO");
    unlink(inner);
    unlink(path);
    unlink(data);
    rmdir(ts);
    rmdir(dir);
}

/* Item 23: with the node's GPUs known, a rule that cannot hold is an error
 * with its line: a device that is not there, reservations beyond a GPU, a
 * default budget larger than the GPU. What was understood can be printed. */
static void test_policy_against_devices(void)
{
    const char *uuids[] = {"GPU-5a1d0e5a-a000-4000-8000-000000000000"};
    uint64_t totals[] = {12 * GiB};
    char err[512] = "";
    static const struct {
        const char *text, *why;
    } bad[] = {
        {"cap user 0 8GiB on 5\n", "test.conf:1: \"on 5\": this node has 1 GPU"},
        {"reserve 100GiB for user 0 on GPU-ffff\n", "test.conf:1: \"on GPU-ffff\": this node has 1 GPU"},
        {"cap user 0 1G\nreserve 40GiB for user 0\n", "test.conf:2: reservations on GPU 0"},
        {"reserve 8GiB for user 0\nreserve 50% for job x on 0\n", "test.conf:2: reservations on GPU 0"},
        {"default-budget 16GiB\n", "test.conf:1: default-budget 16.00 GiB is more than GPU 0"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        policy_of(bad[i].text);
        err[0] = 0;
        CHECK(policy_check_devices(&P, uuids, totals, 1, err, sizeof err) == -1);
        CHECK_CONTAINS(err, bad[i].why);
    }
    policy_of("default-budget 25%\ncap user 0 20GiB\nreserve 6GiB for job crit-* on GPU-5a1d\n"
              "reserve 50% for user 0 on 0\nwhen-full wait 30m\n");
    CHECK(policy_check_devices(&P, uuids, totals, 1, err, sizeof err) == 0);
    char out[4096];
    FILE *f = fmemopen(out, sizeof out, "w");
    policy_describe(&P, f);
    fclose(f);
    CHECK_CONTAINS(out, "test.conf: 5 directives, 3 rules");
    CHECK_CONTAINS(out, "line 1: default-budget 25% of each GPU");
    CHECK_CONTAINS(out, "line 2: cap user 0: 20.00 GiB on each GPU");
    CHECK_CONTAINS(out, "line 3: reserve 6.00 GiB for job crit-* on GPU-5a1d");
    CHECK_CONTAINS(out, "line 4: reserve 50% for user 0 on 0");
    CHECK_CONTAINS(out, "line 5: when-full wait 30m");
}

static void test_protocol(void)
{
    struct proto_msg m;
    char err[256];
    const char *ok = "VRAM/1 REQUEST dev=GPU-1 total=100 bytes=10 text=free text, with spaces";
    CHECK(proto_parse(ok, strlen(ok), &m, err, sizeof err) == 0);
    CHECK(m.verb == VERB_REQUEST);
    CHECK(strcmp(proto_get(&m, "dev"), "GPU-1") == 0);
    CHECK(strcmp(proto_get(&m, "text"), "free text, with spaces") == 0);
    uint64_t v = 0;
    CHECK(proto_get_u64(&m, "bytes", 100, &v, err, sizeof err) == 0 && v == 10);
    CHECK(proto_get_u64(&m, "wait", 100, &v, err, sizeof err) == 1);
    CHECK(proto_get_u64(&m, "total", 99, &v, err, sizeof err) == -1);
    CHECK_CONTAINS(err, "total=\"100\"");

    static const struct {
        const char *msg, *why;
    } bad[] = {
        {"", "empty"},
        {"VRAM/2 HELLO", "protocol version \"2\""},
        {"HELLO role=process", "does not start with VRAM/1"},
        {"VRAM/1", "without a verb"},
        {"VRAM/1 GIMME", "unknown verb"},
        {"VRAM/1 HELLO role", "without '='"},
        {"VRAM/1 HELLO Role=x", "malformed field name"},
        {"VRAM/1 HELLO a=1 a=2", "twice"},
        {"VRAM/1 HELLO a=\xff", "not printable"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        err[0] = 0;
        CHECK(proto_parse(bad[i].msg, strlen(bad[i].msg), &m, err, sizeof err) == -1);
        CHECK_CONTAINS(err, bad[i].why);
    }
    char big[PROTO_MAX + 10];
    memset(big, 'a', sizeof big);
    CHECK(proto_parse(big, sizeof big, &m, err, sizeof err) == -1);
    CHECK_CONTAINS(err, "longer than");

    /* A writer never produces half a message. */
    struct proto_writer w;
    proto_begin(&w, VERB_HELLO);
    for (int i = 0; i < 200; i++)
        proto_add(&w, "cmd", "xxxxxxxx");
    CHECK(proto_end(&w) == -1);
    CHECK(proto_name_ok("job-1.2_x@y") && !proto_name_ok("a b") && !proto_name_ok(""));
    char clean[64];
    proto_name_clean("py thon\n", clean, sizeof clean);
    CHECK(strcmp(clean, "py_thon_") == 0);

    /* A snapshot survives its trip through messages. */
    struct snapshot s, t;
    snapshot_init(&s);
    snapshot_init(&t);
    s.ndev = 1;
    s.dev[0] = (struct snap_device){.index = 0, .uuid = "GPU-abc", .name = "NVIDIA H100 80GB HBM3",
                                    .pci_bus_id = "00000000:01:00.0", .minor = 0,
                                    .total = 12 * GiB, .reserved = 1 * GiB, .granted = 4 * GiB,
                                    .used = 3 * GiB, .unseen = 5, .waiting = 2, .refused = 3,
                                    .reclaimed = 4, .reclaimed_bytes = 5 * GiB, .waits = 6,
                                    .waited_ms = 7500};
    s.node = (struct snap_node){.host = "gpu01", .driver = "580.65.06", .nvml = "13.580.65.06",
                                .cuda = "13.0"};
    struct snap_entry *e = snapshot_add(&s);
    *e = (struct snap_entry){.dev = 0, .id = 7, .pid = 123, .uid = 1001, .role = 'p',
                             .user = "alice", .cmd = "python", .job = "-", .grant = 4 * GiB,
                             .used = 3 * GiB, .peak = 3 * GiB, .waiting = false, .over = true,
                             .start = 123456, .queue = 2};
    struct snap_entry *ue = snapshot_add(&s);
    *ue = (struct snap_entry){.dev = 0, .uid = 1001, .role = 'u', .user = "alice", .cmd = "-",
                              .job = "-", .grant = 4 * GiB, .used = 5 * GiB, .peak = 7 * GiB,
                              .unseen = 2 * GiB, .procs = 3};
    CHECK(snapshot_encode_node(&s.node, &w) > 0);
    CHECK(proto_parse(w.buf, w.len, &m, err, sizeof err) == 0);
    CHECK(snapshot_decode(&t, &m, err, sizeof err) == 0);
    CHECK(snapshot_encode_device(&s.dev[0], &w) > 0);
    CHECK(proto_parse(w.buf, w.len, &m, err, sizeof err) == 0);
    CHECK(snapshot_decode(&t, &m, err, sizeof err) == 0);
    CHECK(snapshot_encode_entry(e, &w) > 0);
    CHECK(proto_parse(w.buf, w.len, &m, err, sizeof err) == 0);
    CHECK(snapshot_decode(&t, &m, err, sizeof err) == 0);
    CHECK(snapshot_encode_entry(ue, &w) > 0);
    CHECK(proto_parse(w.buf, w.len, &m, err, sizeof err) == 0);
    CHECK(snapshot_decode(&t, &m, err, sizeof err) == 0);
    CHECK(t.ndev == 1 && t.dev[0].total == 12 * GiB && strcmp(t.dev[0].uuid, "GPU-abc") == 0);
    CHECK(strcmp(t.dev[0].name, "NVIDIA H100 80GB HBM3") == 0 && t.dev[0].minor == 0 &&
          strcmp(t.dev[0].pci_bus_id, "00000000:01:00.0") == 0);
    CHECK(t.dev[0].waiting == 2 && t.dev[0].refused == 3 && t.dev[0].reclaimed == 4 &&
          t.dev[0].reclaimed_bytes == 5 * GiB && t.dev[0].waits == 6 && t.dev[0].waited_ms == 7500);
    CHECK(strcmp(t.node.host, "gpu01") == 0 && strcmp(t.node.driver, "580.65.06") == 0 &&
          strcmp(t.node.nvml, "13.580.65.06") == 0 && strcmp(t.node.cuda, "13.0") == 0);
    CHECK(t.n == 2 && t.e[0].pid == 123 && t.e[0].over && strcmp(t.e[0].user, "alice") == 0);
    CHECK(t.e[0].start == 123456 && t.e[0].queue == 2 && t.e[0].role == 'p');
    CHECK(t.e[1].role == 'u' && t.e[1].peak == 7 * GiB && t.e[1].unseen == 2 * GiB &&
          t.e[1].procs == 3);
    snapshot_free(&s);
    snapshot_free(&t);
}

static struct ledger_client *proc(struct ledger *l, pid_t pid, uid_t uid, const char *user)
{
    struct ledger_client *c = ledger_join(l, ROLE_PROCESS, pid, uid, uid);
    CHECK(c);
    c->start = 1000 + (uint64_t)pid; /* as /proc would say */
    snprintf(c->user, sizeof c->user, "%s", user);
    return c;
}

/* The ledger's kept sums agree with a count from scratch. */
static void consistent(const struct ledger *l)
{
    char err[256];
    if (ledger_check(l, err, sizeof err) != 0) {
        fprintf(stderr, "ledger_check: %s\n", err);
        exit(1);
    }
}

static uint64_t granted;
static char why[1024];

static enum verdict ask(struct ledger *l, struct ledger_client *c, uint64_t bytes, bool wait)
{
    return ledger_request(l, c, 0, bytes, wait, 1000, &granted, why, sizeof why);
}

struct answers {
    int n;
    struct ledger_client *who[8];
    bool granted[8];
};

static void note(struct ledger_client *c, int dev, bool ok, uint64_t bytes, const char *text,
                 void *arg)
{
    (void)dev, (void)bytes, (void)text;
    struct answers *a = arg;
    a->who[a->n] = c;
    a->granted[a->n++] = ok;
}

static void test_admission(void)
{
    struct ledger l;
    policy_of("cap user 1001 8GiB\nreserve 4GiB for user 1003\ndefault-budget 2GiB\n");
    ledger_init(&l, &P);
    CHECK(ledger_device(&l, "GPU-a", 16 * GiB) == 0);

    struct ledger_client *a1 = proc(&l, 11, 1001, "alice"), *a2 = proc(&l, 12, 1001, "alice");
    struct ledger_client *b = proc(&l, 21, 1002, "bob"), *c = proc(&l, 31, 1003, "carol");

    /* A cap is per user, across all of the user's processes. */
    CHECK(ask(&l, a1, 6 * GiB, false) == VERDICT_GRANT && granted == 6 * GiB);
    CHECK(ask(&l, a2, 4 * GiB, false) == VERDICT_DENY);
    CHECK_CONTAINS(why, "user 1001 may hold 8.00 GiB");
    CHECK_CONTAINS(why, "it holds 6.00 GiB (alice 6.00 GiB)");
    CHECK(ask(&l, a2, 2 * GiB, false) == VERDICT_GRANT);
    /* More than the cap can never fit: refused even if it could wait. */
    struct ledger_client *a3 = proc(&l, 13, 1001, "alice");
    CHECK(ask(&l, a3, 9 * GiB, true) == VERDICT_DENY);

    /* Bob cannot take what is reserved for carol: 16 - 8 (alice) - 4 (reserved) = 4. */
    CHECK(ask(&l, b, 5 * GiB, false) == VERDICT_DENY);
    CHECK_CONTAINS(why, "4.00 GiB reserved for others");
    CHECK(ask(&l, b, 0, false) == VERDICT_GRANT && granted == 2 * GiB); /* the default budget */
    /* Carol may use her reservation: 16 - 8 - 2 = 6 left, all hers to take. */
    CHECK(ask(&l, c, 6 * GiB, false) == VERDICT_GRANT);

    /* A waiting request is admitted, oldest first, when memory comes back. */
    struct ledger_client *d = proc(&l, 41, 1002, "bob"), *e = proc(&l, 42, 1004, "dave");
    CHECK(ask(&l, d, 3 * GiB, true) == VERDICT_WAIT);
    CHECK(ask(&l, e, 1 * GiB, true) == VERDICT_WAIT);
    struct answers ans = {0};
    ledger_admit_waiting(&l, 0, note, &ans);
    CHECK(ans.n == 0); /* nothing freed yet */
    ledger_leave(&l, a1); /* alice's 6 GiB come back */
    ledger_admit_waiting(&l, 0, note, &ans);
    CHECK(ans.n == 2 && ans.who[0] == d && ans.who[1] == e && ans.granted[0] && ans.granted[1]);
    CHECK(d->use[0].grant == 3 * GiB && !d->use[0].waiting);

    /* A wait that passes its deadline ends with a reason. */
    struct ledger_client *f = proc(&l, 51, 1005, "erin");
    CHECK(ask(&l, f, 8 * GiB, true) == VERDICT_WAIT);
    ans.n = 0;
    ledger_admit_waiting(&l, 999, note, &ans);
    CHECK(ans.n == 0);
    ledger_admit_waiting(&l, 1000, note, &ans);
    CHECK(ans.n == 1 && ans.who[0] == f && !ans.granted[0] && !f->use[0].waiting);

    /* Release returns a grant; usage NVML sees outside grants counts. */
    ledger_release(&l, c, 0);
    struct ledger_nvml_process nv[] = {
        {.pid = 999, .uid = 2001, .start = 5, .used = 3 * GiB, .cmd = "rogue"},
        {.pid = 21, .uid = 1002, .start = 1021, .used = 2 * GiB + 512 * MiB},
        {.pid = 31, .uid = 2002, .start = 77, .used = 1 * GiB}}; /* carol's old pid, a new process */
    struct ledger_client *over[4];
    CHECK(ledger_reconcile(&l, 0, nv, 3, over, 4) == 1 && over[0] == b);
    CHECK(l.dev[0].unseen == 4 * GiB && b->use[0].over);
    /* Usage outside grants is the processes' and their users' (issue 15). */
    CHECK(l.dev[0].nunseen == 2 && l.dev[0].unseen_by[0].pid == 999 &&
          l.dev[0].unseen_by[1].pid == 31);
    CHECK(ledger_user_of(&l, 2001)->in_use[0] == 3 * GiB);
    CHECK(ledger_reconcile(&l, 0, nv, 3, over, 4) == 0); /* reported once */
    consistent(&l);
    ledger_destroy(&l);
}

static void test_jobs_and_privacy(void)
{
    struct ledger l;
    policy_of("");
    ledger_init(&l, &P);
    ledger_device(&l, "GPU-a", 16 * GiB);
    struct ledger_client *job = ledger_join(&l, ROLE_JOB, 1, 1001, 1001);
    snprintf(job->job, sizeof job->job, "1234");
    snprintf(job->user, sizeof job->user, "alice");
    CHECK(ask(&l, job, 8 * GiB, false) == VERDICT_GRANT);
    /* The job's processes draw from its grant; the device counts it once. */
    struct ledger_client *t1 = proc(&l, 11, 1001, "alice"), *t2 = proc(&l, 12, 1001, "alice");
    snprintf(t1->job, sizeof t1->job, "1234");
    snprintf(t2->job, sizeof t2->job, "1234");
    CHECK(ask(&l, t1, 4 * GiB, false) == VERDICT_GRANT);
    CHECK(ask(&l, t2, 5 * GiB, false) == VERDICT_DENY);
    CHECK_CONTAINS(why, "job 1234 was granted 8.00 GiB");
    CHECK(ask(&l, t2, 4 * GiB, false) == VERDICT_GRANT);
    /* Another user naming the same job draws nothing from it. */
    struct ledger_client *m = proc(&l, 21, 1002, "mallory");
    snprintf(m->job, sizeof m->job, "1234");
    CHECK(ledger_job_of(&l, m, 0) == NULL);
    CHECK(ask(&l, m, 8 * GiB, false) == VERDICT_GRANT);
    CHECK(ask(&l, proc(&l, 22, 1002, "mallory"), 1, false) == VERDICT_DENY); /* 16 of 16 */

    /* Root sees every process; a user sees their own processes and, of
     * other users, one total per user and device (item 13). */
    struct snapshot s;
    snapshot_init(&s);
    ledger_snapshot(&l, 0, &s);
    CHECK(s.n == 6 && s.dev[0].granted == 16 * GiB); /* 4 clients, 2 users */
    ledger_snapshot(&l, 1002, &s);
    int totals = 0;
    for (int i = 0; i < s.n; i++) {
        if (s.e[i].uid == 1001) {
            CHECK(s.e[i].role == 'u' && s.e[i].pid == 0 && s.e[i].id == 0);
            CHECK(strcmp(s.e[i].cmd, "-") == 0 && strcmp(s.e[i].job, "-") == 0);
            CHECK(s.e[i].grant == 8 * GiB); /* the job's grant, its processes' within it */
            CHECK(s.e[i].procs == 2);
            totals++;
        } else if (s.e[i].role == 'u') {
            CHECK(s.e[i].uid == 1002 && s.e[i].grant == 8 * GiB);
        } else {
            CHECK(s.e[i].pid == 21 && s.e[i].role == 'p');
        }
    }
    CHECK(totals == 1 && s.n == 3);
    /* A reader with no processes here (the metrics file's) sees totals only. */
    ledger_snapshot(&l, LEDGER_VIEW_ANYONE, &s);
    CHECK(s.n == 2 && s.e[0].role == 'u' && s.e[1].role == 'u');
    snapshot_free(&s);

    /* The job ends: its grant goes, and its processes' with their connections. */
    ledger_leave(&l, job);
    CHECK(ledger_job_of(&l, t1, 0) == NULL);
    consistent(&l);
    ledger_destroy(&l);
}

static struct ledger_client *job_client(struct ledger *l, uid_t uid, const char *name)
{
    struct ledger_client *j = ledger_join(l, ROLE_JOB, 1, uid, uid);
    CHECK(j);
    j->by_root = true; /* as the Slurm plugin's JOB makes it */
    snprintf(j->job, sizeof j->job, "%s", name);
    snprintf(j->user, sizeof j->user, "uid%u", (unsigned)uid);
    return j;
}

/* Item 8: memory reserved "for job NAME" is for jobs root registered (the
 * Slurm plugin); a name a process gives itself is a label. */
static void test_job_reservation_is_for_registered_jobs(void)
{
    struct ledger l;
    policy_of("reserve 8GiB for job critical-*\n");
    ledger_init(&l, &P);
    ledger_device(&l, "GPU-a", 12 * GiB);
    struct ledger_client *m = proc(&l, 11, 1001, "mallory");
    snprintf(m->job, sizeof m->job, "critical-x");
    CHECK(ask(&l, m, 10 * GiB, false) == VERDICT_DENY);
    CHECK_CONTAINS(why, "8.00 GiB reserved for others");
    CHECK(ask(&l, m, 4 * GiB, false) == VERDICT_GRANT);
    struct ledger_client *j = job_client(&l, 1002, "critical-1");
    CHECK(ask(&l, j, 8 * GiB, false) == VERDICT_GRANT);
    consistent(&l);
    ledger_destroy(&l);
}

/* Issue 27 items 8 and 9: "for job NAME of user U" is for U's jobs and
 * processes of that name, whoever registered them (vram run --job,
 * VRAM_JOB), and no one else's; a refusal a reservation makes for good
 * says that waiting cannot help and names the reservation's line; one
 * whose job name matches a reservation only root's jobs may use says so. */
static void test_job_reservation_of_a_user(void)
{
    struct ledger l;
    policy_of("reserve 8GiB for job critical-* of user 1001\nreserve 2GiB for job slurm-*\n");
    ledger_init(&l, &P);
    ledger_device(&l, "GPU-a", 12 * GiB);
    /* A stranger naming a job critical-x cannot take it. */
    struct ledger_client *m = proc(&l, 11, 1002, "mallory");
    snprintf(m->job, sizeof m->job, "critical-x");
    CHECK(ask(&l, m, 4 * GiB, true) == VERDICT_DENY); /* never: even if it may wait */
    CHECK_CONTAINS(why, "10.00 GiB reserved for others (policy line 1: job critical-* of user "
                        "1001, line 2: job slurm-*)");
    CHECK_CONTAINS(why, "requested 4.00 GiB: waiting cannot help, the reservations for others "
                        "(policy line 1: job critical-* of user 1001, line 2: job slurm-*) leave "
                        "at most 2.00 GiB of the GPU to it");
    /* alice's own vram run --job critical-1 (a job she registered). */
    struct ledger_client *cmd = ledger_join(&l, ROLE_JOB, 500, 1001, 1001);
    cmd->start = 1500;
    snprintf(cmd->job, sizeof cmd->job, "critical-1");
    CHECK(ask(&l, cmd, 6 * GiB, false) == VERDICT_GRANT);
    /* and a process of hers with VRAM_JOB=critical-2: the rest of it. */
    struct ledger_client *p = proc(&l, 12, 1001, "alice");
    snprintf(p->job, sizeof p->job, "critical-2");
    CHECK(ask(&l, p, 2 * GiB, false) == VERDICT_GRANT);
    struct snapshot snap;
    snapshot_init(&snap);
    ledger_snapshot(&l, 0, &snap);
    CHECK(snap.dev[0].reserved == 2 * GiB); /* slurm-*'s, unused */
    snapshot_free(&snap);
    consistent(&l);
    /* Her job named slurm-1 is not a Slurm step: the refusal says why. */
    struct ledger_client *s = proc(&l, 13, 1001, "alice");
    snprintf(s->job, sizeof s->job, "slurm-1");
    CHECK(ask(&l, s, 3 * GiB, false) == VERDICT_DENY);
    CHECK_CONTAINS(why, "policy line 2, \"for job slurm-*\", is for jobs root registers (Slurm "
                        "steps), not a user's own vram run --job or VRAM_JOB such as slurm-1: for "
                        "those it would say \"for job slurm-* of user alice\"");
    ledger_destroy(&l);

    /* What waiting can change says nothing of the kind; more than the GPU does. */
    policy_of("reserve 2GiB for user 1009\n");
    ledger_init(&l, &P);
    ledger_device(&l, "GPU-a", 12 * GiB);
    struct ledger_client *b = proc(&l, 31, 1005, "bob"), *c = proc(&l, 32, 1006, "carol");
    CHECK(ask(&l, b, 8 * GiB, false) == VERDICT_GRANT);
    CHECK(ask(&l, c, 4 * GiB, false) == VERDICT_DENY);
    CHECK_CONTAINS(why, "2.00 GiB reserved for others (policy line 1: user 1009)");
    CHECK(strstr(why, "waiting cannot help") == NULL);
    CHECK(ask(&l, c, 13 * GiB, false) == VERDICT_DENY);
    CHECK_CONTAINS(why, "requested 13.00 GiB, more than the GPU has: waiting cannot help");
    ledger_destroy(&l);

    /* "of group G": its members' jobs, primary or supplementary group. */
    policy_of("reserve 8GiB for job nightly of group 3000\n");
    ledger_init(&l, &P);
    ledger_device(&l, "GPU-a", 12 * GiB);
    struct ledger_client *g = proc(&l, 21, 1003, "carol");
    gid_t groups[] = {3000};
    CHECK(ledger_set_groups(&l, g, groups, 1) == 0);
    snprintf(g->job, sizeof g->job, "nightly");
    struct ledger_client *o = proc(&l, 22, 1004, "dave");
    snprintf(o->job, sizeof o->job, "nightly");
    CHECK(ask(&l, o, 8 * GiB, false) == VERDICT_DENY);
    CHECK(ask(&l, g, 8 * GiB, false) == VERDICT_GRANT);
    consistent(&l);
    ledger_destroy(&l);
}

/* A refusal says what a user holds in words a person reads: nothing, when
 * the request alone passes the cap, and no empty "(no one)" for the GPU. */
static void test_refusal_words(void)
{
    struct ledger l;
    policy_of("cap user 1001 1GiB\n");
    ledger_init(&l, &P);
    ledger_device(&l, "GPU-a", 12 * GiB);
    struct ledger_client *a = proc(&l, 11, 1001, "alice");
    CHECK(ask(&l, a, 2 * GiB, false) == VERDICT_DENY);
    CHECK_CONTAINS(why, "user 1001 may hold 1.00 GiB of GPU-a (policy line 1); it holds nothing "
                        "yet; requested 2.00 GiB");
    CHECK(strstr(why, "no one") == NULL && strstr(why, "0 B") == NULL);
    struct ledger_client *b = proc(&l, 21, 1002, "bob");
    CHECK(ask(&l, b, 13 * GiB, false) == VERDICT_DENY);
    CHECK_CONTAINS(why, "GPU-a has 12.00 GiB: 0 B granted, 0 B reserved for others");
    CHECK(strstr(why, "no one") == NULL);
    ledger_destroy(&l);
}

/* Item 9: a grant counts for its user however jobs come and go: a process's
 * grant made before its job was registered does not stop counting then. */
static void test_cap_holds_across_jobs(void)
{
    struct ledger l;
    policy_of("cap user 1001 4GiB\n");
    ledger_init(&l, &P);
    ledger_device(&l, "GPU-a", 12 * GiB);
    struct ledger_client *p1 = proc(&l, 11, 1001, "alice");
    snprintf(p1->job, sizeof p1->job, "7.0");
    CHECK(ask(&l, p1, 3 * GiB, false) == VERDICT_GRANT); /* no job yet: for itself */
    struct ledger_client *j = job_client(&l, 1001, "7.0");
    CHECK(ask(&l, j, 3 * GiB, false) == VERDICT_DENY); /* 3 + 3 > 4 */
    CHECK_CONTAINS(why, "user 1001 may hold 4.00 GiB");
    CHECK(ask(&l, j, 1 * GiB, false) == VERDICT_GRANT);
    struct ledger_client *p2 = proc(&l, 12, 1001, "alice");
    snprintf(p2->job, sizeof p2->job, "7.0");
    CHECK(ask(&l, p2, 0, false) == VERDICT_GRANT && granted == 1 * GiB); /* from the job */
    struct ledger_client *p3 = proc(&l, 13, 1001, "alice");
    CHECK(ask(&l, p3, 1 * GiB, false) == VERDICT_DENY); /* 3 + 1 already */
    struct snapshot s;
    snapshot_init(&s);
    ledger_snapshot(&l, 0, &s);
    CHECK(s.dev[0].granted == 4 * GiB);
    /* The job ends before its process: the process's grant counts for it. */
    ledger_leave(&l, j);
    ledger_snapshot(&l, 0, &s);
    CHECK(s.dev[0].granted == 4 * GiB);
    CHECK(ask(&l, p3, 1 * GiB, false) == VERDICT_DENY);
    snapshot_free(&s);
    consistent(&l);
    ledger_destroy(&l);
}

/* Item 19: first come, first served. A request does not take memory an
 * older waiting request waits for (on the device, or under the same cap);
 * what is reserved for someone stays theirs to take at once. */
static void test_first_come_first_served(void)
{
    struct ledger l;
    policy_of("cap user 1001 4GiB\nreserve 2GiB for user 1003\n");
    ledger_init(&l, &P);
    ledger_device(&l, "GPU-a", 16 * GiB);
    struct ledger_client *a = proc(&l, 11, 1000, "holder"), *w = proc(&l, 12, 1000, "first");
    struct ledger_client *n = proc(&l, 13, 1002, "later"), *c = proc(&l, 14, 1003, "carol");
    CHECK(ask(&l, a, 8 * GiB, false) == VERDICT_GRANT);
    CHECK(ask(&l, w, 7 * GiB, true) == VERDICT_WAIT); /* 16 - 8 - 2 reserved = 6 */
    CHECK(ask(&l, n, 4 * GiB, false) == VERDICT_DENY); /* would fit, but w came first */
    /* And says behind whom: users' names, as anyone may see them (issue 15). */
    CHECK_CONTAINS(why, "1 earlier request for GPU-a waits for this memory (first 7.00 GiB)");
    CHECK(ask(&l, n, 4 * GiB, true) == VERDICT_WAIT);
    CHECK(ask(&l, c, 2 * GiB, false) == VERDICT_GRANT); /* carol's own reservation */
    struct answers ans = {0};
    ledger_leave(&l, a);
    ledger_admit_waiting(&l, 0, note, &ans);
    CHECK(ans.n == 2 && ans.who[0] == w && ans.who[1] == n);
    CHECK(w->use[0].grant == 7 * GiB && n->use[0].grant == 4 * GiB);

    ledger_leave(&l, w);
    ledger_leave(&l, n);
    /* Under one cap: alice's second request waits behind her first. */
    struct ledger_client *a1 = proc(&l, 21, 1001, "alice"), *a2 = proc(&l, 22, 1001, "alice");
    struct ledger_client *a3 = proc(&l, 23, 1001, "alice"), *b = proc(&l, 24, 1004, "bob");
    CHECK(ask(&l, a1, 2 * GiB, false) == VERDICT_GRANT);
    CHECK(ask(&l, a2, 3 * GiB, true) == VERDICT_WAIT);
    CHECK(ask(&l, a3, 1 * GiB, true) == VERDICT_WAIT);
    CHECK(ask(&l, b, 1 * GiB, false) == VERDICT_GRANT); /* another cap's queue is not bob's */
    ans.n = 0;
    ledger_leave(&l, a1);
    ledger_admit_waiting(&l, 0, note, &ans);
    CHECK(ans.n == 2 && ans.who[0] == a2 && ans.who[1] == a3);
    consistent(&l);
    ledger_destroy(&l);
}

/* Item 4: a budget a process took while the daemon was down is registered
 * when the daemon is back. Its memory is in use already, and NVML shows it
 * outside any grant: registering counts it once, not that usage and the
 * budget again. Anyone else's usage, or a reused pid's, still counts. */
static void test_register_counts_usage_once(void)
{
    struct ledger l;
    policy_of("cap user 1002 5GiB\n");
    ledger_init(&l, &P);
    ledger_device(&l, "GPU-a", 12 * GiB);
    struct ledger_client *a = proc(&l, 11, 1001, "alice"), *c = proc(&l, 12, 1002, "carol");
    CHECK(ask(&l, a, 5 * GiB, false) == VERDICT_GRANT);
    /* carol's process holds 4 GiB and a context (NVML: 4.25 GiB, no grant);
     * another of hers, not connected yet, 2 GiB. */
    struct ledger_nvml_process seen[] = {{.pid = 12, .start = 1012, .used = 4 * GiB + GiB / 4, .uid = (uid_t)-1}, {.pid = 13, .start = 1013, .used = 2 * GiB, .uid = (uid_t)-1}};
    struct ledger_client *over[4];
    ledger_reconcile(&l, 0, seen, 2, over, 4);
    CHECK(ask(&l, c, 4 * GiB, false) == VERDICT_DENY); /* as a new request: 5 + 6.25 + 4 > 12 */
    CHECK(ledger_register(&l, c, 0, 4 * GiB, &granted, why, sizeof why) == VERDICT_GRANT);
    CHECK(granted == 4 * GiB && c->use[0].grant == 4 * GiB);
    consistent(&l);
    /* NVML's next look finds carol's memory under her grant. */
    ledger_reconcile(&l, 0, seen, 2, over, 4);
    CHECK(l.dev[0].unseen == 2 * GiB && l.dev[0].excess == GiB / 4);
    /* Not someone else's usage: a process with pid 13 but another start. */
    struct ledger_client *r = proc(&l, 13, 1002, "carol");
    r->start = 99;
    CHECK(ledger_register(&l, r, 0, 1 * GiB, &granted, why, sizeof why) == VERDICT_DENY);
    CHECK_CONTAINS(why, "has 12.00 GiB");
    /* The process itself: what it uses counts once, but caps hold (carol
     * may hold 5 GiB, and has 4). */
    r->start = 1013;
    CHECK(ledger_register(&l, r, 0, 2 * GiB, &granted, why, sizeof why) == VERDICT_DENY);
    CHECK_CONTAINS(why, "may hold 5.00 GiB");
    CHECK(ledger_register(&l, r, 0, 1 * GiB, &granted, why, sizeof why) == VERDICT_GRANT);
    consistent(&l);
    ledger_destroy(&l);
}

/* Issue 10: a vram run command is one job, its processes members of it:
 * no grant of their own, their usage (reported and by NVML) inside the
 * job's grant, shown under it and gone with it. A job a user registered
 * for their own command is a label for "for job" rules, as a process's is. */
static void test_command_is_one_job(void)
{
    struct ledger l;
    policy_of("reserve 4GiB for job train*\nover-margin 0\n");
    ledger_init(&l, &P);
    ledger_device(&l, "GPU-a", 16 * GiB);
    struct ledger_client *cmd = ledger_join(&l, ROLE_JOB, 500, 1001, 1001);
    cmd->start = 1500;
    snprintf(cmd->job, sizeof cmd->job, "train-x");
    snprintf(cmd->user, sizeof cmd->user, "alice");
    CHECK(ask(&l, cmd, 13 * GiB, false) == VERDICT_DENY); /* 16 less 4 reserved for jobs */
    CHECK_CONTAINS(why, "4.00 GiB reserved for others");
    CHECK(ask(&l, cmd, 8 * GiB, false) == VERDICT_GRANT);

    struct ledger_client *m1 = ledger_member(&l, cmd, 501, 1501);
    struct ledger_client *m2 = ledger_member(&l, cmd, 502, 1502);
    CHECK(m1 && m2 && m1 != m2 && ledger_member(&l, cmd, 501, 1501) == m1);
    CHECK(cmd->nmembers == 2 && strcmp(m1->job, "train-x") == 0 && strcmp(m1->user, "alice") == 0);
    ledger_report(&l, m1, 0, 3 * GiB, 3 * GiB);
    ledger_report(&l, m2, 0, 2 * GiB, 2 * GiB);
    ledger_report(&l, cmd, 0, 5 * GiB, 5 * GiB);
    struct snapshot s;
    snapshot_init(&s);
    ledger_snapshot(&l, 0, &s);
    CHECK(s.dev[0].granted == 8 * GiB && s.dev[0].used == 5 * GiB && s.n == 4); /* the job, its two processes, alice's total */
    CHECK(s.e[0].role == 'j' && s.e[0].grant == 8 * GiB && s.e[0].used == 5 * GiB);
    CHECK(s.e[1].role == 'p' && s.e[1].pid == 501 && s.e[1].grant == 0 &&
          s.e[1].used == 3 * GiB && strcmp(s.e[1].job, "train-x") == 0);
    consistent(&l);

    /* NVML: the members' usage is the job's (not unseen), and over its
     * grant it is the job that is over, once. */
    struct ledger_nvml_process nv[] = {{.pid = 501, .start = 1501, .used = 5 * GiB, .uid = (uid_t)-1}, {.pid = 502, .start = 1502, .used = 4 * GiB, .uid = (uid_t)-1},
                                       {.pid = 777, .start = 5, .used = 1 * GiB, .uid = (uid_t)-1}};
    struct ledger_client *over[4];
    CHECK(ledger_reconcile(&l, 0, nv, 3, over, 4) == 1 && over[0] == cmd);
    CHECK(l.dev[0].unseen == 1 * GiB && l.dev[0].excess == 1 * GiB);
    CHECK(cmd->use[0].nvml == 9 * GiB && cmd->use[0].over && !m1->use[0].over);
    CHECK(ledger_reconcile(&l, 0, nv, 3, over, 4) == 0);
    consistent(&l);
    /* Processes its holder has not reported yet, children of a member or
     * of the holder: the job's too, not unseen. */
    struct ledger_nvml_process young[] = {{.pid = 501, .start = 1501, .used = 5 * GiB, .ppid = 0, .uid = (uid_t)-1}, {.pid = 601, .start = 1601, .used = 1 * GiB, .ppid = 501, .uid = (uid_t)-1},
                                          {.pid = 602, .start = 1602, .used = 1 * GiB, .ppid = 500, .uid = (uid_t)-1}, {.pid = 777, .start = 5, .used = 1 * GiB, .ppid = 1, .uid = (uid_t)-1}};
    ledger_reconcile(&l, 0, young, 4, over, 4);
    CHECK(l.dev[0].unseen == 1 * GiB && cmd->use[0].nvml == 7 * GiB);
    consistent(&l);
    ledger_reconcile(&l, 0, nv, 3, over, 4);

    /* Another user sees the command as one total, the job's. */
    ledger_snapshot(&l, 1002, &s);
    CHECK(s.n == 1 && s.e[0].role == 'u' && s.e[0].grant == 8 * GiB);
    /* In use: NVML's figure where larger, each process once. */
    CHECK(s.e[0].used == 9 * GiB && s.e[0].nvml == 9 * GiB);

    /* A pid used again by another process: the old member has left. */
    int id1 = m1->id;
    struct ledger_client *m3 = ledger_member(&l, cmd, 501, 2501);
    CHECK(m3 && m3->id != id1 && m3->start == 2501 && cmd->nmembers == 2);
    CHECK(ledger_find_client(&l, id1) == NULL);
    consistent(&l);

    /* The command ends: its grant, and its members, go with it. */
    ledger_leave(&l, cmd);
    CHECK(l.nclients == 0);
    ledger_snapshot(&l, 0, &s);
    /* Left: the process outside grants, and alice's total (her peak stays). */
    CHECK(s.dev[0].granted == 0 && s.dev[0].used == 1 * GiB && s.n == 2);
    CHECK(s.e[0].role == 'n' && s.e[0].pid == 777 && s.e[1].role == 'u' && s.e[1].used == 0 &&
          s.e[1].peak == 9 * GiB);
    snapshot_free(&s);
    consistent(&l);

    /* A job root registered is what the reservation is for. */
    struct ledger_client *j = job_client(&l, 1001, "train-7");
    CHECK(ask(&l, j, 13 * GiB, false) == VERDICT_GRANT); /* more than the 11 others may have */
    consistent(&l);
    ledger_destroy(&l);
}

/* Issue 15: a user's peak is the most their processes used at once, and
 * one of them ending lowers the use, never the peak; usage outside grants is
 * its process's (seen by root and its owner) and its user's (seen by all);
 * refusals, reclaims and waits are counted. */
/* Issue 22 item 15: what a job's members report is bounded together by
 * the job's grant, not each by the device: a 1 MiB job whose holder says
 * each of its 10 processes uses 12 GiB shows 1 MiB in use, in every view. */
static void test_members_bounded_by_their_job(void)
{
    struct ledger l;
    policy_of("");
    ledger_init(&l, &P);
    ledger_device(&l, "GPU-a", 12 * GiB);
    struct ledger_client *cmd = ledger_join(&l, ROLE_JOB, 500, 1001, 1001);
    cmd->start = 1500;
    CHECK(ask(&l, cmd, 1 * MiB, false) == VERDICT_GRANT);
    struct ledger_client *m[10];
    for (int i = 0; i < 10; i++) {
        m[i] = ledger_member(&l, cmd, 501 + i, 1501 + (uint64_t)i);
        CHECK(m[i]);
        ledger_report(&l, m[i], 0, 12 * GiB, 12 * GiB);
    }
    consistent(&l);
    struct snapshot s;
    snapshot_init(&s);
    ledger_snapshot(&l, 0, &s);
    CHECK(s.dev[0].used == 1 * MiB);
    uint64_t users = 0, members = 0;
    for (int i = 0; i < s.n; i++) {
        if (s.e[i].role == 'u')
            users += s.e[i].used;
        else if (s.e[i].role == 'p')
            members += s.e[i].used;
        CHECK(s.e[i].peak <= 1 * MiB);
    }
    CHECK(users == 1 * MiB && members == 1 * MiB);
    /* What one member gives back, another may report; one leaving frees its share. */
    ledger_report(&l, m[0], 0, 0, 0);
    ledger_report(&l, m[1], 0, 12 * GiB, 12 * GiB);
    CHECK(m[1]->use[0].used == 1 * MiB && l.dev[0].used == 1 * MiB);
    ledger_leave(&l, m[1]);
    ledger_report(&l, m[2], 0, 512 * 1024, 0);
    ledger_report(&l, m[3], 0, 12 * GiB, 0);
    CHECK(m[2]->use[0].used == 512 * 1024 && m[3]->use[0].used == 512 * 1024);
    CHECK(l.dev[0].used == 1 * MiB);
    consistent(&l);
    snapshot_free(&s);
    ledger_destroy(&l);
}

/* Issue 22 item 14: a user's jobs together list at most LEDGER_USER_MEMBERS
 * processes (each is an entry of the daemon's), found by (job, pid); the
 * cap is the user's, not another user's, and a member leaving frees it. */
static void test_members_capped_per_user(void)
{
    struct ledger l;
    policy_of("");
    ledger_init(&l, &P);
    ledger_device(&l, "GPU-a", 80 * GiB);
    struct ledger_client *jobs[5];
    int listed = 0;
    for (int k = 0; k < 5; k++) {
        jobs[k] = ledger_join(&l, ROLE_JOB, 100 + k, 1001, 1001);
        CHECK(ask(&l, jobs[k], 1 * GiB, false) == VERDICT_GRANT);
        /* Pids in no order: the index keeps them sorted. */
        for (int i = 0; i < 1000; i++)
            listed += ledger_member(&l, jobs[k], 10000 + k * 1000 + (i * 7919) % 1000,
                                    1 + (uint64_t)i) != NULL;
    }
    CHECK(listed == LEDGER_USER_MEMBERS);
    CHECK(ledger_find_member(&l, jobs[2], 12000 + 500) != NULL);
    CHECK(ledger_find_member(&l, jobs[2], 13000 + 500) == NULL);
    consistent(&l);
    /* Another user's job is not held back by this one's. */
    struct ledger_client *other = ledger_join(&l, ROLE_JOB, 200, 1002, 1002);
    CHECK(ask(&l, other, 1 * GiB, false) == VERDICT_GRANT);
    CHECK(ledger_member(&l, other, 30000, 1) != NULL);
    /* One leaves: one more may come. */
    ledger_leave(&l, ledger_find_member(&l, jobs[0], 10000));
    CHECK(ledger_member(&l, jobs[4], 20000, 1) != NULL);
    CHECK(ledger_member(&l, jobs[4], 20001, 1) == NULL);
    consistent(&l);
    /* A job ending takes its members, and their share of the cap, along. */
    ledger_leave(&l, jobs[1]);
    CHECK(ledger_member(&l, jobs[4], 20001, 1) != NULL);
    consistent(&l);
    ledger_destroy(&l);
}

static void test_users_unseen_and_counters(void)
{
    struct ledger l;
    policy_of("default-budget 1GiB\n");
    ledger_init(&l, &P);
    ledger_device(&l, "GPU-a", 12 * GiB);
    struct ledger_client *a = proc(&l, 11, 1001, "alice"), *b = proc(&l, 12, 1001, "alice");
    CHECK(ask(&l, a, 4 * GiB, false) == VERDICT_GRANT && ask(&l, b, 4 * GiB, false) == VERDICT_GRANT);
    ledger_report(&l, a, 0, 2 * GiB, 2 * GiB);
    ledger_report(&l, b, 0, 3 * GiB + 512 * MiB, 3 * GiB + 512 * MiB);
    struct ledger_user *alice = ledger_user_of(&l, 1001);
    CHECK(alice->in_use[0] == 5 * GiB + 512 * MiB && alice->peak[0] == 5 * GiB + 512 * MiB);
    ledger_leave(&l, b); /* its connection closes: the grant is reclaimed */
    CHECK(alice->in_use[0] == 2 * GiB && alice->peak[0] == 5 * GiB + 512 * MiB);
    CHECK(l.dev[0].counters.reclaimed == 1 && l.dev[0].counters.reclaimed_bytes == 4 * GiB);
    ledger_report(&l, a, 0, 1 * GiB, 2 * GiB);
    CHECK(alice->peak[0] == 5 * GiB + 512 * MiB);

    /* A process of bob's and one of carol's use the GPU without a grant. */
    struct ledger_nvml_process nv[] = {
        {.pid = 21, .uid = 1002, .start = 5, .used = 3 * GiB, .cmd = "python"},
        {.pid = 31, .uid = 1003, .start = 6, .used = 1 * GiB, .cmd = "a.out"},
        {.pid = 11, .uid = 1001, .start = 1011, .used = 1 * GiB}}; /* alice's a */
    struct ledger_client *over[4];
    ledger_reconcile(&l, 0, nv, 3, over, 4);
    CHECK(l.dev[0].unseen == 4 * GiB && ledger_user_of(&l, 1002)->in_use[0] == 3 * GiB);
    snprintf(ledger_user_of(&l, 1002)->name, 64, "bob");
    consistent(&l);
    struct snapshot s;
    snapshot_init(&s);
    ledger_snapshot(&l, 0, &s); /* root: a, both outside grants, three users */
    int n = 0, u = 0;
    for (int i = 0; i < s.n; i++) {
        const struct snap_entry *e = &s.e[i];
        if (e->role == 'n') {
            n++;
            CHECK((e->pid == 21 && strcmp(e->user, "bob") == 0 && strcmp(e->cmd, "python") == 0 &&
                   e->nvml == 3 * GiB) ||
                  (e->pid == 31 && e->uid == 1003 && e->nvml == 1 * GiB));
        }
        if (e->role == 'u') {
            u++;
            if (e->uid == 1001)
                CHECK(e->peak == 5 * GiB + 512 * MiB && e->procs == 1 && e->grant == 4 * GiB);
            if (e->uid == 1002)
                CHECK(e->unseen == 3 * GiB && e->used == 3 * GiB && e->procs == 1 &&
                      strcmp(e->user, "bob") == 0);
        }
    }
    CHECK(s.n == 6 && n == 2 && u == 3);
    ledger_snapshot(&l, 1002, &s); /* bob: his process outside grants, everyone's totals */
    n = 0;
    for (int i = 0; i < s.n; i++)
        if (s.e[i].role == 'n') {
            n++;
            CHECK(s.e[i].pid == 21);
        }
    CHECK(n == 1 && s.n == 4);
    ledger_snapshot(&l, LEDGER_VIEW_ANYONE, &s);
    CHECK(s.n == 3); /* the users only */
    /* Paged, every entry comes once. */
    uint64_t after = 0, next;
    int seen = 0, pages = 0;
    do {
        ledger_snapshot_page(&l, 0, after, 1, &s, &next);
        seen += s.n;
        after = next;
        pages++;
    } while (next && pages < 20);
    CHECK(seen == 6 && pages == 6);

    /* Refusals and waits, counted; a wait timed by the admission clock. */
    ledger_admit_waiting(&l, 10000, note, &(struct answers){0});
    struct ledger_client *c = proc(&l, 41, 1004, "dave");
    CHECK(ask(&l, c, 20 * GiB, false) == VERDICT_DENY && l.dev[0].counters.refused == 1);
    CHECK(ledger_request(&l, c, 0, 5 * GiB, true, 20000, &granted, why, sizeof why) == VERDICT_WAIT);
    ledger_admit_waiting(&l, 10500, note, &(struct answers){0});
    CHECK(c->use[0].waiting);
    ledger_leave(&l, a);
    struct answers ans = {0};
    ledger_admit_waiting(&l, 11500, note, &ans);
    CHECK(ans.n == 1 && ans.granted[0] && l.dev[0].counters.waits == 1 &&
          l.dev[0].counters.waited_ms == 1500);
    snapshot_free(&s);
    consistent(&l);
    ledger_destroy(&l);
}

/* Issue 27 item 7: a process NVML saw outside any grant that becomes a
 * client (connects, or is reported as a job's member, as after a restart
 * of vramd when its holder comes back) is counted once at every moment,
 * not twice until NVML's next look: its user's peak does not double. */
static void test_unseen_then_client_counts_once(void)
{
    struct ledger l;
    policy_of("");
    ledger_init(&l, &P);
    ledger_device(&l, "GPU-a", 12 * GiB);
    /* A process of alice's, and a process of bob's job, both with memory,
     * neither a client yet (vramd has just started). */
    struct ledger_nvml_process nv[] = {
        {.pid = 11, .uid = 1001, .start = 1011, .used = 3 * GiB, .cmd = "train"},
        {.pid = 21, .uid = 1002, .start = 1021, .used = 2 * GiB, .cmd = "member"}};
    struct ledger_client *over[4];
    ledger_reconcile(&l, 0, nv, 2, over, 4);
    struct ledger_user *alice = ledger_user_of(&l, 1001), *bob = ledger_user_of(&l, 1002);
    CHECK(l.dev[0].unseen == 5 * GiB && alice->peak[0] == 3 * GiB && bob->peak[0] == 2 * GiB);
    /* alice's process connects and says what it uses. */
    struct ledger_client *a = proc(&l, 11, 1001, "alice");
    CHECK(ask(&l, a, 4 * GiB, false) == VERDICT_GRANT);
    ledger_report(&l, a, 0, 3 * GiB, 3 * GiB);
    CHECK(alice->in_use[0] == 3 * GiB && alice->peak[0] == 3 * GiB);
    CHECK(l.dev[0].unseen == 2 * GiB && l.dev[0].used == 5 * GiB);
    consistent(&l);
    /* bob's job comes back and reports its process. */
    struct ledger_client *cmd = ledger_join(&l, ROLE_JOB, 20, 1002, 1002);
    cmd->start = 1020;
    CHECK(ask(&l, cmd, 4 * GiB, false) == VERDICT_GRANT);
    struct ledger_client *m = ledger_member(&l, cmd, 21, 1021);
    CHECK(m);
    ledger_report(&l, m, 0, 2 * GiB, 2 * GiB);
    CHECK(bob->in_use[0] == 2 * GiB && bob->peak[0] == 2 * GiB);
    CHECK(l.dev[0].unseen == 0 && l.dev[0].used == 5 * GiB);
    consistent(&l);
    /* NVML's next look agrees. */
    ledger_reconcile(&l, 0, nv, 2, over, 4);
    CHECK(alice->peak[0] == 3 * GiB && bob->peak[0] == 2 * GiB && l.dev[0].used == 5 * GiB);
    consistent(&l);
    ledger_destroy(&l);
}

/* Issue 26 item 10: a process that left a vram run command's process tree
 * (a new session, a double fork: its parent is init) is the command's job's
 * if it holds the command's state open, inherited from vram run, and is of
 * the job's user; without it, or of another user, its usage is unseen. */
static void test_escaped_by_inherited_state(void)
{
    struct ledger l;
    policy_of("over-margin 0\n");
    ledger_init(&l, &P);
    ledger_device(&l, "GPU-a", 12 * GiB);
    struct ledger_client *cmd = ledger_join(&l, ROLE_JOB, 500, 1001, 1001);
    cmd->start = 1500;
    CHECK(ask(&l, cmd, 4 * GiB, false) == VERDICT_GRANT);
    cmd->state_dev = 7, cmd->state_ino = 4242;
    struct ledger_nvml_process nv[] = {
        {.pid = 601, .start = 1601, .used = 6 * GiB, .ppid = 1, .uid = 1001,
         .state_dev = 7, .state_ino = 4242},                      /* escaped, inherited */
        {.pid = 602, .start = 1602, .used = 1 * GiB, .ppid = 1, .uid = 1002,
         .state_dev = 7, .state_ino = 4242},                      /* another user's: not */
        {.pid = 603, .start = 1603, .used = 1 * GiB, .ppid = 1, .uid = 1001,
         .state_dev = 7, .state_ino = 9999}};                     /* another command's */
    struct ledger_client *over[4];
    CHECK(ledger_reconcile(&l, 0, nv, 3, over, 4) == 0); /* over only with members */
    CHECK(cmd->use[0].nvml == 6 * GiB && l.dev[0].unseen == 2 * GiB);
    CHECK(l.dev[0].excess == 2 * GiB); /* 6 GiB against the job's 4 */
    consistent(&l);
    ledger_destroy(&l);
}

int main(void)
{
    test_policy_file();
    test_policy_whole_files();
    test_policy_against_devices();
    test_protocol();
    test_admission();
    test_jobs_and_privacy();
    test_job_reservation_is_for_registered_jobs();
    test_cap_holds_across_jobs();
    test_refusal_words();
    test_job_reservation_of_a_user();
    test_first_come_first_served();
    test_register_counts_usage_once();
    test_command_is_one_job();
    test_members_bounded_by_their_job();
    test_members_capped_per_user();
    test_users_unseen_and_counters();
    test_unseen_then_client_counts_once();
    test_escaped_by_inherited_state();
    printf("test_ledger: ok\n");
    return 0;
}
