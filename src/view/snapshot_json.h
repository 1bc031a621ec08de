/* snapshot_json: the ledger as one JSON object, for `vram status --json`
 * (its fields are listed in snapshot_json.c). */
#ifndef VRAM_SNAPSHOT_JSON_H
#define VRAM_SNAPSHOT_JSON_H

#include "../protocol/snapshot.h"

#include <stdio.h>

void snapshot_json(const struct snapshot *s, FILE *out);

#endif
