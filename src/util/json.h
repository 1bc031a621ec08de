/* json: a JSON string literal, for every JSON vram writes from recordings
 * (trace events, the summary, vram plot's page, vram run's summary). */
#ifndef VRAM_JSON_H
#define VRAM_JSON_H

#include <stdio.h>

/* A JSON string literal of s (quotes included; control characters and
 * < > & escaped, so it is also safe inside an HTML page; bytes outside
 * ASCII replaced by '?', as they may not be UTF-8). */
void json_string(FILE *out, const char *s);

#endif
