#include "protocol.h"

#include "../util/parse.h"
#include "../util/report.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const char *const verbs[VERB_COUNT] = {
    "HELLO", "REQUEST", "REPORT", "RELEASE", "JOB", "STATUS", "MEMBER",
    "OK", "GRANT", "WAIT", "DENY", "ERR", "NODE", "DEV", "PROC", "END",
    "HISTORY", "SERIES", "SAMPLES", "PLACE", "CONTAINER", "STOPPED", "STATE",
};

const char *proto_verb_name(enum proto_verb v)
{
    return (unsigned)v < VERB_COUNT ? verbs[v] : "?";
}

static void append(struct proto_writer *w, const char *s);

static bool key_ok(const char *k)
{
    size_t n = 0;
    for (; k[n]; n++)
        if (!((k[n] >= 'a' && k[n] <= 'z') || k[n] == '_'))
            return false;
    return n > 0 && n < 16;
}

int proto_parse(const char *data, size_t len, struct proto_msg *m, char *err, size_t errlen)
{
    if (len == 0)
        return report_into(err, errlen, "an empty message");
    if (len > PROTO_MAX)
        return report_into(err, errlen, "a message longer than the %d bytes accepted", PROTO_MAX);
    memcpy(m->buf, data, len);
    m->buf[len] = 0;
    if (len && m->buf[len - 1] == '\n')
        m->buf[--len] = 0;
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)m->buf[i] < 0x20 || (unsigned char)m->buf[i] > 0x7e)
            return report_into(err, errlen, "a message with a byte that is not printable ASCII");
    m->nfields = 0;

    char *p = m->buf;
    char *sp = strchr(p, ' ');
    if (sp)
        *sp = 0;
    char version[32];
    snprintf(version, sizeof version, "VRAM/%d", PROTO_VERSION);
    if (strcmp(p, version) != 0) {
        if (strncmp(p, "VRAM/", 5) == 0)
            return report_into(err, errlen, "protocol version \"%.16s\"; this end speaks VRAM/1",
                               p + 5);
        return report_into(err, errlen, "a message that does not start with VRAM/1 (got \"%.32s\")",
                           p);
    }
    if (!sp)
        return report_into(err, errlen, "a message without a verb");
    p = sp + 1;
    sp = strchr(p, ' ');
    if (sp)
        *sp = 0;
    int verb = -1;
    for (int v = 0; v < VERB_COUNT; v++)
        if (strcmp(p, verbs[v]) == 0)
            verb = v;
    if (verb < 0)
        return report_into(err, errlen, "an unknown verb \"%.32s\"", p);
    m->verb = (enum proto_verb)verb;

    while (sp) {
        p = sp + 1;
        if (strncmp(p, "text=", 5) == 0) { /* the rest of the line */
            if (m->nfields == PROTO_MAX_FIELDS)
                return report_into(err, errlen, "more than %d fields", PROTO_MAX_FIELDS);
            m->field[m->nfields].key = "text";
            m->field[m->nfields++].value = p + 5;
            break;
        }
        sp = strchr(p, ' ');
        if (sp)
            *sp = 0;
        char *eq = strchr(p, '=');
        if (!eq)
            return report_into(err, errlen, "a field \"%.32s\" without '='", p);
        *eq = 0;
        if (!key_ok(p))
            return report_into(err, errlen, "a malformed field name \"%.32s\"", p);
        if (proto_get(m, p))
            return report_into(err, errlen, "the field \"%.32s\" twice", p);
        if (m->nfields == PROTO_MAX_FIELDS)
            return report_into(err, errlen, "more than %d fields", PROTO_MAX_FIELDS);
        m->field[m->nfields].key = p;
        m->field[m->nfields++].value = eq + 1;
    }
    return 0;
}

const char *proto_get(const struct proto_msg *m, const char *key)
{
    for (int i = 0; i < m->nfields; i++)
        if (strcmp(m->field[i].key, key) == 0)
            return m->field[i].value;
    return NULL;
}

int proto_get_u64(const struct proto_msg *m, const char *key, uint64_t max, uint64_t *out,
                  char *err, size_t errlen)
{
    const char *v = proto_get(m, key);
    if (!v)
        return 1;
    parse_why why;
    if (parse_uint(v, max, out, &why) != 0) {
        snprintf(err, errlen, "%s=\"%.40s\": %s", key, v, why.text);
        return -1;
    }
    return 0;
}

/* One item of a list: "V" or "V*COUNT", up to `end`. */
static int read_run(const char *p, const char *end, uint64_t max_value, uint64_t *value,
                    uint64_t *count, char *item, size_t itemlen, parse_why *why)
{
    size_t len = (size_t)(end - p);
    if (len == 0 || len >= itemlen) {
        snprintf(why->text, sizeof why->text, len ? "an item longer than a number and a count"
                                                  : "an empty item");
        return -1;
    }
    memcpy(item, p, len);
    item[len] = 0;
    char *star = strchr(item, '*');
    *count = 1;
    if (star) {
        *star = 0;
        if (parse_uint(star + 1, PROTO_MAX, count, why) != 0)
            return -1;
        if (*count == 0) {
            snprintf(why->text, sizeof why->text, "a count of 0");
            return -1;
        }
    }
    return parse_uint(item, max_value, value, why);
}

int proto_get_runs(const struct proto_msg *m, const char *key, uint64_t max_value, uint64_t *out,
                   int max, int *n, char *err, size_t errlen)
{
    const char *v = proto_get(m, key);
    if (!v)
        return 1;
    *n = 0;
    for (const char *p = v;;) {
        const char *comma = strchr(p, ',');
        const char *end = comma ? comma : p + strlen(p);
        char item[48];
        uint64_t value, count;
        parse_why why;
        if (read_run(p, end, max_value, &value, &count, item, sizeof item, &why) != 0) {
            snprintf(err, errlen, "%s=: item %d (\"%.*s\"): %s", key, *n + 1,
                     (int)(end - p < 40 ? end - p : 40), p, why.text);
            return -1;
        }
        if (count > (uint64_t)(max - *n)) {
            snprintf(err, errlen, "%s=: more than the %d numbers accepted", key, max);
            return -1;
        }
        for (uint64_t k = 0; k < count; k++)
            out[(*n)++] = value;
        if (!comma)
            return 0;
        p = comma + 1;
    }
}

static size_t digits(uint64_t v)
{
    size_t d = 1;
    while (v >= 10)
        v /= 10, d++;
    return d;
}

size_t proto_runs_length(const uint64_t *v, int n)
{
    size_t len = 0;
    for (int i = 0; i < n;) {
        int k = i + 1;
        while (k < n && v[k] == v[i])
            k++;
        len += (i ? 1 : 0) + digits(v[i]) + (k - i > 1 ? 1 + digits((uint64_t)(k - i)) : 0);
        i = k;
    }
    return len;
}

void proto_add_runs(struct proto_writer *w, const char *key, const uint64_t *v, int n)
{
    append(w, " ");
    append(w, key);
    append(w, "=");
    for (int i = 0; i < n;) {
        int k = i + 1;
        while (k < n && v[k] == v[i])
            k++;
        char item[48];
        if (k - i > 1)
            snprintf(item, sizeof item, "%s%llu*%d", i ? "," : "", (unsigned long long)v[i], k - i);
        else
            snprintf(item, sizeof item, "%s%llu", i ? "," : "", (unsigned long long)v[i]);
        append(w, item);
        i = k;
    }
}

static bool name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           strchr("._:@+/-", c) != NULL;
}

bool proto_name_ok(const char *s)
{
    size_t n = 0;
    for (; s[n]; n++)
        if (!name_char(s[n]))
            return false;
    return n > 0 && n < PROTO_NAME_MAX;
}

void proto_name_clean(const char *s, char *out, size_t n)
{
    size_t i = 0;
    for (; s && s[i] && i + 1 < n && i + 1 < PROTO_NAME_MAX; i++)
        out[i] = name_char(s[i]) ? s[i] : '_';
    if (i == 0 && n > 1)
        out[i++] = '-';
    out[i] = 0;
}

static void append(struct proto_writer *w, const char *s)
{
    size_t n = strlen(s);
    if (w->overflow || w->len + n > PROTO_MAX) {
        w->overflow = true;
        return;
    }
    memcpy(w->buf + w->len, s, n + 1);
    w->len += n;
}

void proto_begin(struct proto_writer *w, enum proto_verb v)
{
    w->len = 0;
    w->overflow = false;
    w->buf[0] = 0;
    char head[32];
    snprintf(head, sizeof head, "VRAM/%d %s", PROTO_VERSION, proto_verb_name(v));
    append(w, head);
}

void proto_add(struct proto_writer *w, const char *key, const char *value)
{
    append(w, " ");
    append(w, key);
    append(w, "=");
    append(w, value);
}

void proto_add_u64(struct proto_writer *w, const char *key, uint64_t value)
{
    char num[24];
    snprintf(num, sizeof num, "%llu", (unsigned long long)value);
    proto_add(w, key, num);
}

void proto_add_text(struct proto_writer *w, const char *fmt, ...)
{
    char text[PROTO_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    for (char *c = text; *c; c++) /* one line of printable text */
        if ((unsigned char)*c < 0x20 || (unsigned char)*c > 0x7e)
            *c = ' ';
    append(w, " text=");
    append(w, text);
}

int proto_end(struct proto_writer *w) { return w->overflow ? -1 : (int)w->len; }
