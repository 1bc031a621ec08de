/* libFuzzer: any bytes as a message from a client or from the daemon. The
 * parser must answer "malformed" or give fields that read back safely,
 * a list in runs must read within its bounds or be refused, and a status
 * or history message must decode or be refused, never crash. */
#include "../../src/protocol/history_view.h"
#include "../../src/protocol/protocol.h"
#include "../../src/protocol/snapshot.h"

#include <stdint.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct proto_msg m;
    char err[256];
    if (proto_parse((const char *)data, size, &m, err, sizeof err) != 0)
        return 0;
    static const char *keys[] = {"dev", "bytes", "total", "wait", "restore", "uid", "text"};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
        uint64_t v;
        const char *s = proto_get(&m, keys[i]);
        if (s)
            (void)proto_name_ok(s);
        (void)proto_get_u64(&m, keys[i], UINT64_MAX, &v, err, sizeof err);
    }
    static const char *lists[] = {"used", "budget"};
    for (size_t i = 0; i < 2; i++) {
        uint64_t v[64];
        int n = -1;
        if (proto_get_runs(&m, lists[i], UINT64_MAX, v, 64, &n, err, sizeof err) == 0 &&
            (n < 1 || n > 64))
            __builtin_trap(); /* read beyond the bound it was given */
    }
    struct snapshot s;
    snapshot_init(&s);
    (void)snapshot_decode(&s, &m, err, sizeof err);
    snapshot_free(&s);
    /* A history reply: a SERIES first, so that SAMPLES have one to follow. */
    struct history_view hv;
    history_view_init(&hv);
    static const char series[] = "VRAM/1 SERIES key=1 dev=0 kind=device begin=0";
    struct proto_msg first;
    uint64_t next;
    if (proto_parse(series, sizeof series - 1, &first, err, sizeof err) != 0 ||
        history_view_take(&hv, &first, &next, err, sizeof err) != 0)
        __builtin_trap();
    (void)history_view_take(&hv, &m, &next, err, sizeof err);
    (void)history_view_take(&hv, &m, &next, err, sizeof err); /* twice: a following page */
    history_view_free(&hv);
    /* What parses must also be writable again. */
    struct proto_writer w;
    proto_begin(&w, m.verb);
    for (int i = 0; i < m.nfields; i++)
        if (strcmp(m.field[i].key, "text") != 0)
            proto_add(&w, m.field[i].key, m.field[i].value);
    (void)proto_end(&w);
    return 0;
}
