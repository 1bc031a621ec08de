/* vramd's answers, driven without its loop (tests/fake_conns.c): what each
 * message does to the ledger, message by message. Each part names the item
 * of issue 11 it holds to. */
#include "check.h"
#include "fake_conns.h"
#include "../src/ledger/snapshot.h"

static const char *const one_gpu[] = {"GPU-00000000-0000-4000-8000-000000000001", NULL};
#define U0 "GPU-00000000-0000-4000-8000-000000000001"

static uint64_t granted_on(int dev)
{
    struct snapshot s;
    snapshot_init(&s);
    ledger_snapshot(&D.L, 0, &s);
    uint64_t g = s.dev[dev].granted;
    snapshot_free(&s);
    return g;
}

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

static uint64_t used_on(int dev)
{
    struct snapshot s;
    snapshot_init(&s);
    ledger_snapshot(&D.L, 0, &s);
    uint64_t u = s.dev[dev].used;
    snapshot_free(&s);
    return u;
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

int main(void)
{
    test_err_changes_nothing();
    test_report_checked();
    test_learning_without_nvml();
    printf("test_answers: ok\n");
    return 0;
}
