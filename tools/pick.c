/* pick: GPUs for vram run --gpus (pick.h). */
#include "pick.h"

#include "../src/util/parse.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PICK_MAX 64

/* The inherited list's entry `k` (its own text, without spaces), or -1. */
static int entry(const char *list, int k, char *out, size_t n)
{
    for (int i = 0; *list; i++) {
        size_t len = strcspn(list, ",");
        if (i == k) {
            while (len && *list == ' ')
                list++, len--;
            while (len && list[len - 1] == ' ')
                len--;
            if (!len || len >= n)
                return -1;
            memcpy(out, list, len);
            out[len] = 0;
            return 0;
        }
        list += len + (list[len] == ',');
    }
    return -1;
}

/* " (CUDA_VISIBLE_DEVICES=\"2,3\" as inherited)", or "" for none. */
static const char *as_inherited(const char *inherited, char *out, size_t n)
{
    if (!inherited)
        return "";
    snprintf(out, n, " (CUDA_VISIBLE_DEVICES=\"%.200s\" as inherited)", inherited);
    return out;
}

int pick_gpus(const struct pick_gpu *gpus, int count, int n, uint64_t budget,
              const char *inherited, char *value, size_t valuelen, char *say, size_t saylen,
              int *picked)
{
    value[0] = say[0] = 0;
    if (count > PICK_MAX)
        count = PICK_MAX;
    if (n < 1 || n > count) {
        char within[256];
        snprintf(say, saylen, "--gpus %d: the command may use %d GPU%s%s; accepted: 1 to %d", n,
                 count, count == 1 ? "" : "s", as_inherited(inherited, within, sizeof within),
                 count);
        return -1;
    }
    /* Those that hold the budget, the most free first (the lower ordinal
     * of two alike). */
    int order[PICK_MAX], fit = 0;
    for (int i = 0; i < count; i++) {
        uint64_t room = gpus[i].free_known ? gpus[i].free : 0;
        uint64_t need = gpus[i].budget ? gpus[i].budget : budget;
        if (need && room < need)
            continue;
        int at = fit++;
        while (at > 0) {
            const struct pick_gpu *o = &gpus[order[at - 1]];
            uint64_t oroom = o->free_known ? o->free : 0;
            if (oroom > room || (oroom == room && o->ordinal < gpus[i].ordinal))
                break;
            order[at] = order[at - 1];
            at--;
        }
        order[at] = i;
    }
    if (fit < n) {
        char within[256];
        int len = snprintf(say, saylen, "--gpus %d: %d of the %d GPU%s the command may use%s ha%s "
                           "%s free (", n, fit, count, count == 1 ? "" : "s",
                           as_inherited(inherited, within, sizeof within),
                           fit == 1 ? "s" : "ve",
                           gpus[0].budget ? "its budget" : format_size(budget).text);
        for (int i = 0; i < count && len < (int)saylen; i++) {
            len += snprintf(say + len, saylen - (size_t)len, "%sGPU %d: %s", i ? "; " : "",
                            gpus[i].ordinal,
                            gpus[i].free_known ? format_size(gpus[i].free).text : "free unknown");
            if (gpus[i].budget && len < (int)saylen)
                len += snprintf(say + len, saylen - (size_t)len, " for %s",
                                format_size(gpus[i].budget).text);
        }
        if (len < (int)saylen)
            snprintf(say + len, saylen - (size_t)len, ")");
        return -1;
    }
    /* The chosen in the order programs number them, so that device 0 of
     * the command is the first of them. */
    int chosen[PICK_MAX];
    for (int i = 0; i < n; i++)
        chosen[i] = order[i];
    for (int i = 1; i < n; i++)
        for (int k = i; k > 0 && gpus[chosen[k]].ordinal < gpus[chosen[k - 1]].ordinal; k--) {
            int t = chosen[k];
            chosen[k] = chosen[k - 1], chosen[k - 1] = t;
        }
    size_t vlen = 0;
    int slen = inherited ? snprintf(say, saylen, "--gpus %d of the %d GPU%s CUDA_VISIBLE_DEVICES="
                                    "\"%.200s\" allows:", n, count, count == 1 ? "" : "s",
                                    inherited)
                         : snprintf(say, saylen, "--gpus %d:", n);
    for (int i = 0; i < n; i++) {
        const struct pick_gpu *g = &gpus[chosen[i]];
        char token[128];
        if (inherited) {
            if (entry(inherited, g->ordinal, token, sizeof token) != 0) {
                snprintf(say, saylen, "--gpus %d: CUDA_VISIBLE_DEVICES=\"%.200s\" has no entry for "
                         "GPU %d", n, inherited, g->ordinal);
                value[0] = 0;
                return -1;
            }
        } else {
            snprintf(token, sizeof token, "%d", g->ordinal);
        }
        int w = snprintf(value + vlen, valuelen - vlen, "%s%s", i ? "," : "", token);
        if (w < 0 || (size_t)w >= valuelen - vlen) {
            snprintf(say, saylen, "--gpus %d: the list of GPUs is too long", n);
            value[0] = 0;
            return -1;
        }
        vlen += (size_t)w;
        if (slen < (int)saylen)
            slen += snprintf(say + slen, saylen - (size_t)slen, "%s GPU %d (%s, %s free of %s)",
                             i ? ";" : "", g->ordinal, g->uuid,
                             g->free_known ? format_size(g->free).text : "?",
                             format_size(g->total).text);
    }
    if (slen < (int)saylen)
        snprintf(say + slen, saylen - (size_t)slen, "; CUDA_VISIBLE_DEVICES=%s", value);
    for (int i = 0; picked && i < n; i++)
        picked[i] = chosen[i];
    return 0;
}
