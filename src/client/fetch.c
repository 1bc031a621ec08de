/* fetch.c: a reader's questions to vramd (fetch.h). */
#include "fetch.h"

#include "client.h"

#include "../util/report.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* A connection to the daemon at socket_path, only if it runs as root or as
 * this user (client.h); -1 with err otherwise. */
static int reach(const char *socket_path, char *err, size_t errlen)
{
    int fd = ledger_connect(socket_path);
    if (fd < 0)
        return report_into(err, errlen, "cannot reach vramd at %s: %s", socket_path,
                           strerror(errno));
    char who[256];
    if (!ledger_peer_trusted(fd, who, sizeof who)) {
        close(fd);
        return report_into(err, errlen, "not asking %s: %s", socket_path, who);
    }
    return fd;
}

int snapshot_fetch(const char *socket_path, struct snapshot *s, char *err, size_t errlen)
{
    snapshot_init(s);
    int fd = reach(socket_path, err, errlen);
    if (fd < 0)
        return -1;
    struct proto_writer w;
    struct proto_msg m;
    int rc = -1;
    uint64_t after = 0;
    /* Page after page, each a bounded answer; a cursor that does not move
     * on would be a daemon gone wrong: stop there. */
    for (int pages = 0; rc != 0 && pages < 100000; pages++) {
        proto_begin(&w, VERB_STATUS);
        if (after)
            proto_add_u64(&w, "after", after);
        if (ledger_send(fd, &w) != 0) {
            snprintf(err, errlen, "vramd closed the connection");
            break;
        }
        bool more = false, bad = false;
        while (!bad && ledger_recv(fd, &m, 5000, err, errlen) == 0) {
            if (m.verb == VERB_END) {
                uint64_t next = 0;
                char why[256] = "";
                if (proto_get_u64(&m, "next", UINT64_MAX, &next, why, sizeof why) < 0 ||
                    (next && next <= after)) {
                    snprintf(err, errlen, "a status page that does not move on (%s)", why);
                    bad = true;
                    break;
                }
                if (next)
                    after = next, more = true;
                else
                    rc = 0;
                break;
            }
            char why[256] = "";
            if (((m.verb == VERB_DEV || m.verb == VERB_NODE) && after) ||
                snapshot_decode(s, &m, why, sizeof why) != 0) {
                snprintf(err, errlen, "a status message that cannot be read: %s",
                         why[0] ? why : "NODE or DEV after the first page");
                bad = true;
            }
        }
        if (!more)
            break;
    }
    close(fd);
    if (rc != 0)
        snapshot_free(s);
    return rc;
}

int history_fetch(const char *socket_path, const char *job, bool recent_only,
                  struct history_view *v, char *err, size_t errlen)
{
    history_view_init(v);
    int fd = reach(socket_path, err, errlen);
    if (fd < 0)
        return -1;
    int rc = -1;
    uint64_t after = 0;
    /* A cursor that does not move on would be a daemon gone wrong. */
    for (int pages = 0; pages < 100000; pages++) {
        struct proto_writer w;
        proto_begin(&w, VERB_HISTORY);
        if (job)
            proto_add(&w, "job", job);
        if (recent_only)
            proto_add(&w, "tier", "recent");
        if (after)
            proto_add_u64(&w, "after", after);
        if (ledger_send(fd, &w) != 0) {
            report_into(err, errlen, "vramd closed the connection");
            break;
        }
        struct proto_msg m;
        int r = 0;
        uint64_t next = 0;
        while (r == 0 && ledger_recv(fd, &m, 5000, err, errlen) == 0) {
            if (m.verb == VERB_ERR) {
                const char *text = proto_get(&m, "text");
                report_into(err, errlen, "vramd: %s", text ? text : "refused");
                r = -1;
                break;
            }
            char why[256] = "";
            r = history_view_take(v, &m, &next, why, sizeof why);
            if (r < 0)
                report_into(err, errlen, "a history message that cannot be read: %s", why);
        }
        if (r != 1)
            break;
        if (!next) {
            rc = 0;
            break;
        }
        if (next <= after) {
            report_into(err, errlen, "a history page that does not move on");
            break;
        }
        after = next;
    }
    close(fd);
    if (rc != 0)
        history_view_free(v);
    return rc;
}
