#include "fake_conns.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct fake_conn **all, **spare; /* spare: freed ones, used again */
static int nall, nspare, fds;


int conn_send(struct conn *c, const char *buf, size_t len)
{
    struct fake_conn *f = (struct fake_conn *)c;
    if (f->closed)
        return -1;
    if (f->sent < FAKE_KEEP) {
        memcpy(f->out[f->sent], buf, len);
        f->out[f->sent][len] = 0;
    }
    f->sent++;
    return 0;
}

/* The descriptor is not passed: a fake connection has no socket. */
int conn_send_fd(struct conn *c, const char *buf, size_t len, int fd)
{
    (void)fd;
    return conn_send(c, buf, len);
}

static void drop(struct fake_conn *f)
{
    answers_gone(&f->c);
    f->closed = true;
}

void conns_drop_struck(void)
{
    for (int i = 0; i < nall; i++)
        if (!all[i]->closed && all[i]->c.strikes >= MAX_STRIKES)
            drop(all[i]);
}

static struct policy p;
static const char *const *gpus;
static uint64_t gpu_total;

void fake_daemon(const char *policy_text, const char *const *uuids, uint64_t total)
{
    static const char *parsed;
    gpus = uuids;
    gpu_total = total;
    char err[512];
    if (!policy_text || policy_text != parsed) { /* the fuzzer's is always the same */
        policy_default(&p);
        if (policy_text && policy_parse(policy_text, strlen(policy_text), "fake.conf", &p, err,
                                        sizeof err) != 0) {
            fprintf(stderr, "fake_daemon: %s\n", err);
            abort();
        }
        parsed = policy_text;
    }
    ledger_init(&D.L, &p);
    history_init(&D.history);
    D.ngpus = 0;
    for (int i = 0; uuids && uuids[i]; i++)
        D.ngpus = ledger_device(&D.L, uuids[i], total) + 1;
    D.log_level = getenv("FAKE_LOG") ? L_DEBUG : 0;
}

void fake_restart(void)
{
    static char *text;
    static size_t len;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        abort();
    fill_state(f);
    fclose(f);
    for (int i = 0; i < nall; i++) {
        all[i]->closed = true;
        all[i]->c.client = NULL;
    }
    ledger_destroy(&D.L);
    ledger_init(&D.L, &p);
    history_destroy(&D.history); /* a restarted daemon begins a new history */
    history_init(&D.history);
    D.ngpus = 0;
    for (int i = 0; gpus && gpus[i]; i++)
        D.ngpus = ledger_device(&D.L, gpus[i], gpu_total) + 1;
    D.state_dirty = false;
    f = fmemopen(text, len ? len : 1, "r");
    if (!f)
        abort();
    load_state_from(f);
    fclose(f);
    free(text);
    text = NULL;
}

void fake_daemon_end(void)
{
    fake_free_all();
    ledger_destroy(&D.L);
    history_destroy(&D.history);
}

struct fake_conn *fake_open(pid_t pid, uid_t uid, gid_t gid)
{
    struct fake_conn *f = nspare ? spare[--nspare] : malloc(sizeof *f);
    struct fake_conn **t = realloc(all, (size_t)(nall + 1) * sizeof *t);
    if (!f || !t)
        abort();
    memset(&f->c, 0, sizeof f->c);
    f->closed = false;
    f->sent = 0;
    all = t;
    all[nall++] = f;
    f->c.fd = 1000 + fds++;
    f->c.pid = pid;
    f->c.start = 1000 + (uint64_t)pid; /* as /proc would say */
    f->c.uid = uid;
    f->c.gid = gid;
    return f;
}

int fake_send(struct fake_conn *f, const char *msg, size_t len)
{
    if (f->closed)
        return -1;
    f->sent = 0;
    int rc = answers_handle(&f->c, msg, len);
    if (rc != 0) {
        drop(f);
        answers_admit_waiting();
    }
    return rc;
}

int fake_say(struct fake_conn *f, const char *msg) { return fake_send(f, msg, strlen(msg)); }

void fake_close(struct fake_conn *f)
{
    if (f->closed)
        return;
    drop(f);
    answers_admit_waiting();
}

const char *fake_answer(const struct fake_conn *f, const char *needle)
{
    for (int i = 0; i < f->sent && i < FAKE_KEEP; i++)
        if (strstr(f->out[i], needle))
            return f->out[i];
    return NULL;
}

void fake_free_all(void)
{
    struct fake_conn **t = realloc(spare, (size_t)(nspare + nall) * sizeof *t);
    for (int i = 0; i < nall; i++)
        if (t)
            t[nspare++] = all[i];
        else
            free(all[i]);
    if (t)
        spare = t;
    free(all);
    all = NULL;
    nall = 0;
}
