#include "json.h"

void json_string(FILE *out, const char *s)
{
    fputc('"', out);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(out, "\\%c", *p);
        else if (*p < 0x20 || *p == '<' || *p == '>' || *p == '&') /* also safe in HTML */
            fprintf(out, "\\u%04x", *p);
        else if (*p >= 0x7f) /* may not be UTF-8: never make the file invalid */
            fputc('?', out);
        else
            fputc(*p, out);
    }
    fputc('"', out);
}
