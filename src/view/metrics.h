/* metrics: the ledger in Prometheus's text format, for `vram status
 * --prometheus` and vramd's --metrics-file (its families are listed in
 * metrics.c). */
#ifndef VRAM_METRICS_H
#define VRAM_METRICS_H

#include "../protocol/snapshot.h"

#include <stdio.h>

/* At most METRICS_MAX_PROCESSES per-process series: the processes that use
 * the most, the rest left out and counted in vram_process_series_omitted
 * (users' totals count them all). */
#define METRICS_MAX_PROCESSES 256
void snapshot_prometheus(const struct snapshot *s, FILE *out);

#endif
