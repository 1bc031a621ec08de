/* options: every setting of libvram, from the environment or from calls.
 *
 * One table lists every VRAM_* variable any part of vram reads, with the
 * forms it accepts; parsing and the error messages live here and nowhere
 * else. Settings come in two layers, the environment and the program's own
 * calls; for each device, a setting made by a call wins.
 *
 * Checks that need the devices (an index that does not exist, a limit
 * larger than the device) are made when the devices are set up
 * (device.c), with the setting's origin in the message.
 */
#ifndef VRAM_OPTIONS_H
#define VRAM_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define OPT_MAX_DEVICES 64
#define OPT_MAX_VIRTUAL 16

enum limit_kind { LIMIT_NONE = 0, LIMIT_BYTES, LIMIT_FRACTION };

struct limit_setting {
    enum limit_kind kind;
    uint64_t bytes;
    double fraction;
    char origin[96]; /* e.g. VRAM_MEMORY_LIMIT="0=4GiB" */
};

struct virtual_setting {
    bool set;
    int count;
    uint64_t limits[OPT_MAX_VIRTUAL];
    char origin[96];
};

/* One layer of settings. */
struct options {
    bool visible_set;
    char visible[512];
    char visible_origin[96];
    struct limit_setting limit_all, limit[OPT_MAX_DEVICES];
    int growth; /* -1 unset */
    char growth_origin[96];
    struct virtual_setting virt[OPT_MAX_DEVICES];
    int log_level; /* -1 unset */
};

void options_clear(struct options *o);

/* Parses one setting by variable name into the layer. On a bad name or
 * value returns -1 with a message naming the variable, the value and the
 * accepted forms in err. `origin` says where the value came from (the
 * variable itself, or a call). */
int options_set(struct options *o, const char *name, const char *value, char *err, size_t errlen);
/* The same for a setting given under another name (a flag of vram run:
 * "--limit"), which its messages then name instead of the variable's. */
int options_set_as(struct options *o, const char *name, const char *shown, const char *value,
                   char *err, size_t errlen);

/* Reads every VRAM_* variable of the environment into the layer, and
 * TF_FORCE_GPU_ALLOW_GROWTH when VRAM_ALLOW_GROWTH is unset. 0, or -1 with
 * the first error in err. */
int options_from_environment(struct options *o, char *err, size_t errlen);
/* Warns (LOG_WARN) of each VRAM_* variable of the environment that no part
 * of vram reads. Once for a process's environment: by vram run for its
 * command, by the interposer outside one, by libvram where neither did. */
void options_warn_unknown(void);

/* The setting in force for visible physical device `dev`. */
const struct limit_setting *options_limit(const struct options *call, const struct options *env,
                                          int dev);
const struct virtual_setting *options_virtual(const struct options *call,
                                              const struct options *env, int dev);

/* True if `name` is a VRAM_* variable some part of vram reads. */
bool options_known(const char *name);

#endif
