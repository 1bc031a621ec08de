/* cli: what the subcommands of `vram` share.
 *
 * Each subcommand lives in its own file (run.c, devices.c, top.c,
 * status.c) and is reached from main.c. They share one way to read
 * options, so that every option of every subcommand is written the same
 * way (`--limit 4GiB` or `--limit=4GiB`), and one way to reach vramd's
 * ledger.
 */
#ifndef VRAM_CLI_H
#define VRAM_CLI_H

#include "../src/protocol/snapshot.h"

#include <stdbool.h>
#include <stdio.h>

/* How an option takes its value. */
enum cli_arg {
    CLI_FLAG,     /* --growth: no value; --growth=x is an error */
    CLI_VALUE,    /* --limit 4GiB or --limit=4GiB */
    CLI_OPTIONAL, /* --wait, --wait=10m, or --wait 10m (the next word is the
                     value only if it starts with a digit) */
};

struct cli_option {
    const char *name; /* "--limit"; NULL ends the table */
    enum cli_arg arg;
    const char **value; /* set when the option is given: its value, or "" */
};

/* Reads the options of `vram CMD` from argv[first], up to the end, "--"
 * or (when `operands` is true) the first word that is not an option.
 * -h/--help is an option like any other when the table has it. Returns the
 * index of the first operand (after "--"), or -1 after printing a message
 * to stderr that names the option, the value and where the forms are
 * listed. */
int cli_parse(const char *cmd, const struct cli_option *table, int argc, char **argv, int first,
              bool operands);

/* Reads options and up to `max` operands in any order from argv[first]
 * (`plot FILE -o OUT` and `plot -o OUT FILE` read the same; after "--"
 * every word is an operand). Returns the number of operands, or -1 after
 * a message. */
int cli_parse_operands(const char *cmd, const struct cli_option *table, int argc, char **argv,
                       int first, char **operands, int max);

/* --device N: a GPU ordinal into *device (left as it is when value is
 * NULL). 0, or -1 after a message naming the value. */
int cli_parse_device(const char *cmd, const char *value, int *device);

/* "vram CMD: MESSAGE" on stderr; returns 2, the exit status of bad usage. */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Why no vramd is asked, in words for a person, naming no socket that
 * VRAM_DAEMON=off said not to use: "vramd is not running (no socket at
 * /run/vram/vramd.sock)" or "vramd is not asked (VRAM_DAEMON=off)". */
void cli_no_daemon(char *out, size_t n);

/* vramd's socket: `socket_path`, or the one found as every client finds
 * it. 0, or 1 after a message on stderr. */
int cli_daemon_socket(const char *cmd, const char *socket_path, char *path, size_t n);

/* The ledger as vramd lets this user see it, from `socket_path` or the
 * socket found as every client finds it, with its history (s->history:
 * the recent ring, or the last hour too) unless NONE. 0, or 1 after a
 * message on stderr (a ledger without its history is said, and is 0). */
enum cli_history { CLI_HISTORY_NONE, CLI_HISTORY_RECENT, CLI_HISTORY_ALL };
int cli_fetch_ledger(const char *cmd, const char *socket_path, struct snapshot *s,
                     enum cli_history history);
/* The same without a word on stderr: 0; 1 for the ledger without its
 * history; -1 for none; the reason in err. */
int cli_take_ledger(const char *socket_path, struct snapshot *s, enum cli_history history,
                    char *err, size_t errlen);

/* The interposer (VRAM_PRELOAD_LIBRARY, else beside this program in a
 * build tree, else where it is installed relative to it, else where the
 * build was configured to install it) into out: 0, or -1 when it is not
 * there to read (out names where it was looked for last). */
int cli_find_preload(char *out, size_t n);

/* Whether s is a GPU's UUID as NVML writes it ("GPU-" or "MIG-", then
 * hexadecimal digits and dashes, under 96 bytes): what a CDI device name
 * and a hook's --gpu may carry. */
bool cli_gpu_uuid_ok(const char *s);

/* The subcommands. argv[0] is "vram", argv[1] the subcommand's name. */
int cmd_run(int argc, char **argv);
int cmd_devices(int argc, char **argv);
int cmd_top(int argc, char **argv);
int cmd_status(int argc, char **argv);
int cmd_record(int argc, char **argv);
int cmd_plot(int argc, char **argv);
int cmd_cdi(int argc, char **argv);
int cmd_oci_hook(int argc, char **argv);
/* argv[first] is the runtime's first argument: vram oci-runtime (2) or
 * vram-oci-runtime (1). */
int cmd_oci_runtime(int argc, char **argv, int first);

#endif
