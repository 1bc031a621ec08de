/* supervise: vram run's life beside the command it runs.
 *
 * vram run does not exec the command: it creates the command's shared
 * budget (src/command/command.h), starts the command as its child, passes
 * on the signals sent to it, and waits, as `time` and `timeout` do. When
 * the command ends it says what the command used (the peak per device) on
 * stderr and, if asked, as JSON, writes its recording (--record), and
 * exits with the command's status (a command killed by signal N: 128 + N,
 * as a shell reports it).
 *
 * The end of the command is one place, command_ended() in supervise.c:
 * whatever else must happen when a command ends (the peak, a recording to
 * finish) is called from there.
 */
#ifndef VRAM_SUPERVISE_H
#define VRAM_SUPERVISE_H

#include "../src/client/job.h"
#include "../src/command/command.h"
#include "../src/record/formats.h"

#include <stdbool.h>

struct supervise_options {
    enum command_mode mode;
    const char *limit_var, *limit_value; /* the budget, as options.c reads it; NULL: vramd's */
    bool report;                         /* the peak lines on stderr (not with --log off) */
    int summary_fd;                      /* --summary FILE, opened; -1 if not asked */
    const char *summary_path;
    const struct command_context_size *context_sizes; /* measured before the command starts */
    int ncontext_sizes;
    const char *record_dir;  /* --record: the recorders' directory (VRAM_RECORD); NULL if not */
    const char *record_path; /* ... and the FILE it becomes at the end, in this form: */
    enum recording_format record_format;
    struct job *grants; /* vramd's grants for the command (grants.h), held meanwhile; or NULL */
};

/* Runs argv[0] with argv under the shared budget. Returns vram run's exit
 * status: the command's, 128 + N if it was killed by signal N, 126/127 if
 * it could not be started, 2 if the budget could not be set up (nothing
 * started; the recorders' directory, still empty, is removed). */
int supervise(char **argv, const struct supervise_options *o);

#endif
