#include "recording.h"

#include <errno.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

const char *record_family_name(unsigned family)
{
    static const char *const names[RECORD_FAMILIES] = {
        "none", "plain", "pitched", "managed", "pool", "vmm", "array", "graph", "context", "module",
        "driver", "reported",
    };
    return family < RECORD_FAMILIES ? names[family] : "?";
}

const char *record_action_name(unsigned action)
{
    static const char *const names[RECORD_ACTIONS] = {
        "?",     "allocate", "free",   "resize", "map",  "unmap",
        "release", "refuse", "budget", "context", "exit", "nvml",
    };
    return action < RECORD_ACTIONS ? names[action] : "?";
}

const char *record_reason_name(unsigned reason)
{
    static const char *const names[RECORD_REASONS] = {
        "?", "over budget", "not granted by vramd", "bad budget settings", "too many pools",
        "too many VMM handles", "budget unavailable",
    };
    return reason < RECORD_REASONS ? names[reason] : "?";
}

uint64_t record_checksum(const void *data, size_t len)
{
    const unsigned char *p = data;
    uint64_t h = 0x9e3779b97f4a7c15ull ^ len;
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        h = (h ^ w) * 0xff51afd7ed558ccdull;
        h ^= h >> 29;
    }
    uint64_t tail = 0;
    memcpy(&tail, p + i, len - i);
    h = (h ^ tail) * 0xc4ceb9fe1a85ec53ull;
    return h ^ (h >> 32);
}

/* Writes all of iov, resuming after short writes and signals. */
static int write_all(int fd, struct iovec *iov, int n)
{
    while (n > 0) {
        ssize_t w = writev(fd, iov, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        while (n > 0 && (size_t)w >= iov->iov_len) {
            w -= (ssize_t)iov->iov_len;
            iov++;
            n--;
        }
        if (n > 0) {
            iov->iov_base = (char *)iov->iov_base + w;
            iov->iov_len -= (size_t)w;
        }
    }
    return 0;
}

int record_write_file_header(int fd)
{
    struct record_file_header h = {.version = RECORD_VERSION,
                                   .event_size = sizeof(struct record_event),
                                   .byte_order = 0x01020304u};
    memcpy(h.magic, RECORD_FILE_MAGIC, 8);
    struct iovec iov = {&h, sizeof h};
    return write_all(fd, &iov, 1);
}

int record_write_block(int fd, enum record_block_kind kind, uint32_t pid, uint64_t image,
                       const void *payload, uint32_t length)
{
    struct record_block_header h = {.magic = RECORD_BLOCK_MAGIC,
                                    .kind = (uint16_t)kind,
                                    .pid = pid,
                                    .length = length,
                                    .image = image,
                                    .checksum = record_checksum(payload, length)};
    struct iovec iov[2] = {{&h, sizeof h}, {(void *)payload, length}};
    return write_all(fd, iov, 2);
}
