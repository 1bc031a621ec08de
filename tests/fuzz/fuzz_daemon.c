/* libFuzzer: vramd's message handling end to end, without its loop.
 *
 * The input is a script, one line per step, against a fresh daemon (one
 * policy with caps, a reservation and waits; two GPUs). A line's first
 * byte picks who acts and how: its low two bits the connection (root, two
 * processes of one user, another user), and
 *   '!' + n   connection n closes (its grants come back)
 *   '~'       the timer ticks (waiters admitted or timed out, the history
 *             sampled)
 *   '^'       the daemon restarts: its state file written and read back,
 *             every connection gone and made again by the same processes
 *   '%'       NVML's reading of a GPU comes in: the next byte picks the
 *             GPU, then each pair of bytes is a process (the script's four,
 *             one with a reused pid, or processes the daemon does not know)
 *             and what it uses, in 128 MiB steps
 *   else      the rest of the line is one message from that connection.
 * After every step:
 *   - every answer the daemon sent is a well-formed message;
 *   - a message answered with ERR changed nothing in the ledger or its
 *     history;
 *   - no device is granted more than its total, and the ledger's kept sums
 *     agree with a count from scratch (ledger_check).
 */
#include "../fake_conns.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const gpus[] = {"GPU-00000000-0000-4000-8000-000000000001",
                                   "GPU-00000000-0000-4000-8000-000000000002", NULL};

/* A fingerprint of everything the ledger holds: equal prints, equal
 * ledgers (as far as a 64-bit hash tells). Checks the ledger's invariants
 * on the way. */
static uint64_t mix(uint64_t h, uint64_t v) { return (h ^ v) * 0x100000001b3ull; }

static uint64_t fingerprint(void)
{
    uint64_t h = 0xcbf29ce484222325ull;
    h = mix(h, (uint64_t)D.L.ndev);
    h = mix(h, (uint64_t)D.L.nclients);
    for (int d = 0; d < D.L.ndev; d++) {
        h = mix(mix(h, D.L.dev[d].total), D.L.dev[d].unseen);
        for (int i = 0; i < D.L.nclients; i++) {
            const struct ledger_client *c = D.L.clients[i];
            const struct ledger_use *u = &c->use[d];
            h = mix(mix(mix(h, (uint64_t)c->id), (uint64_t)c->role), c->uid);
            h = mix(mix(mix(mix(h, u->grant), u->used), u->peak), u->nvml);
            h = mix(mix(mix(h, u->want), u->waiting), u->deadline_ms);
        }
        if (D.L.dev[d].granted > D.L.dev[d].total)
            abort(); /* overcommitted */
    }
    h = mix(mix(mix(h, (uint64_t)D.history.n), D.history.bytes), (uint64_t)D.history.nended);
    for (int i = 0; i < D.history.n; i++) {
        const struct history_series *s = D.history.series[i];
        h = mix(mix(mix(mix(h, s->key), s->end_ms), s->last.used), s->last.budget);
    }
    if (D.history.bytes != (size_t)D.history.n * HISTORY_SERIES_BYTES ||
        D.history.nended > HISTORY_ENDED_MAX)
        abort(); /* the history's memory is its series', and bounded */
    char err[256];
    if (history_check(&D.history, err, sizeof err) != 0) {
        fprintf(stderr, "history_check: %s\n", err);
        abort(); /* what the history keeps as series come and go differs from a recount */
    }
    if (ledger_check(&D.L, err, sizeof err) != 0) {
        fprintf(stderr, "ledger_check: %s\n", err);
        abort(); /* the kept sums differ from a count made from scratch */
    }
    return h;
}

static void answers_are_messages(const struct fake_conn *f)
{
    for (int i = 0; i < f->sent && i < FAKE_KEEP; i++) {
        struct proto_msg m;
        char err[256];
        if (proto_parse(f->out[i], strlen(f->out[i]), &m, err, sizeof err) != 0)
            abort();
    }
}

/* NVML's reading of one GPU, as the daemon's reconcile thread hands it
 * over: then waiters are admitted, as usage outside grants may have gone. */
static void nvml_reading(const uint8_t *p, size_t n, const pid_t *who_pid)
{
    struct ledger_nvml_process procs[64];
    int np = 0;
    if (n == 0)
        return;
    int dev = p[0] & 1;
    for (size_t i = 1; i + 1 < n && np < 64; i += 2) {
        int k = p[i] & 7;
        pid_t pid = k < 4 ? who_pid[k] : k == 4 ? who_pid[p[i] >> 3 & 3] : 300 + k;
        /* As fake_open says /proc would; a reused pid has another start. */
        uint64_t start = 1000 + (uint64_t)pid + (k == 4);
        procs[np++] = (struct ledger_nvml_process){pid, start, (uint64_t)p[i + 1] << 27};
    }
    struct ledger_client *over[16];
    ledger_reconcile(&D.L, dev, procs, np, over, 16);
    answers_admit_waiting();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fake_daemon("default-budget 2GiB\n"
                "cap user 1000 6GiB\n"
                "cap group 2000 8GiB on 1\n"
                "reserve 2GiB for user 1001\n"
                "reserve 1GiB for job crit-*\n"
                "when-full wait 1s\n",
                gpus, 12ull << 30);
    struct fake_conn *c[4];
    static const struct {
        pid_t pid;
        uid_t uid;
        gid_t gid;
    } who[4] = {{1, 0, 0}, {100, 1000, 1000}, {101, 1000, 2000}, {200, 1001, 1001}};
    static const pid_t who_pid[4] = {1, 100, 101, 200};
    for (int k = 0; k < 4; k++)
        c[k] = fake_open(who[k].pid, who[k].uid, who[k].gid);
    size_t i = 0;
    while (i < size) {
        size_t start = i;
        while (i < size && data[i] != '\n')
            i++;
        size_t n = i - start;
        i++;
        if (n == 0)
            continue;
        uint8_t op = data[start];
        struct fake_conn *f = c[op & 3];
        if (op == '~') {
            answers_admit_waiting();
            history_tick(&D.history, &D.L, now_ms());
        } else if (op == '^') {
            fake_restart();
            for (int k = 0; k < 4; k++)
                c[k] = fake_open(who[k].pid, who[k].uid, who[k].gid);
        } else if (op == '%') {
            nvml_reading(data + start + 1, n - 1, who_pid);
        } else if (op == '!') {
            fake_close(n > 1 ? c[data[start + 1] & 3] : f);
        } else if (!f->closed) {
            uint64_t before = fingerprint();
            int rc = fake_send(f, (const char *)data + start + 1, n - 1);
            answers_are_messages(f);
            /* Item 1: an ERR changes nothing (unless the client was dropped for it). */
            if (rc == 0 && f->sent == 1 && strncmp(f->out[0], "VRAM/1 ERR", 10) == 0 &&
                fingerprint() != before)
                abort();
        }
        fingerprint();
    }
    fake_daemon_end();
    return 0;
}
