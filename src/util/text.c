/* text: printable text (see text.h). */
#include "text.h"

void text_printable(char *out, size_t n, const char *in)
{
    if (!n)
        return;
    size_t k = 0;
    for (; in && in[k] && k + 1 < n; k++)
        out[k] = in[k] >= 32 && in[k] < 127 ? in[k] : '?';
    out[k] = 0;
}
