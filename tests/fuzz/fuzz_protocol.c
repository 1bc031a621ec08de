/* libFuzzer: any bytes as a message from a client or from the daemon. The
 * parser must answer "malformed" or give fields that read back safely,
 * and a status message must decode or be refused, never crash. */
#include "../../src/ledger/protocol.h"
#include "../../src/ledger/snapshot.h"

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
    struct snapshot s;
    snapshot_init(&s);
    (void)snapshot_decode(&s, &m, err, sizeof err);
    snapshot_free(&s);
    /* What parses must also be writable again. */
    struct proto_writer w;
    proto_begin(&w, m.verb);
    for (int i = 0; i < m.nfields; i++)
        if (strcmp(m.field[i].key, "text") != 0)
            proto_add(&w, m.field[i].key, m.field[i].value);
    (void)proto_end(&w);
    return 0;
}
