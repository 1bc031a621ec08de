/* json_read: a strict, bounded JSON reader (json_read.h). */
#include "json_read.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct reader {
    struct json_doc *d;
    size_t at;
    uint32_t cap, max_tokens;
    int depth, max_depth;
    char *err;
    size_t errlen;
};

__attribute__((format(printf, 2, 3))) static int fail(struct reader *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(r->err, r->errlen, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n < r->errlen)
        snprintf(r->err + n, r->errlen - (size_t)n, " (at byte %zu)", r->at);
    return -1;
}

static void skip_space(struct reader *r)
{
    const char *t = r->d->text;
    while (r->at < r->d->len &&
           (t[r->at] == ' ' || t[r->at] == '\t' || t[r->at] == '\n' || t[r->at] == '\r'))
        r->at++;
}

static int new_token(struct reader *r, enum json_type type, size_t start)
{
    struct json_doc *d = r->d;
    if (d->n >= r->max_tokens)
        return fail(r, "more than %u values", r->max_tokens);
    if (d->n == r->cap) {
        uint32_t cap = r->cap ? r->cap * 2 : 64;
        if (cap > r->max_tokens)
            cap = r->max_tokens;
        struct json_token *t = realloc(d->tok, cap * sizeof *t);
        if (!t)
            return fail(r, "out of memory");
        d->tok = t;
        r->cap = cap;
    }
    d->tok[d->n] = (struct json_token){type, (uint32_t)start, 0, 0, 0};
    return (int)d->n++;
}

static int hex4(const char *s, unsigned *out)
{
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char c = s[i];
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            v |= (unsigned)(c - 'A' + 10);
        else
            return -1;
    }
    *out = v;
    return 0;
}

/* The length of the valid UTF-8 sequence at s (at most n bytes), 0 if none. */
static size_t utf8_length(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    size_t len;
    unsigned min;
    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf)
        len = 2, min = 0x80;
    else if (c >= 0xe0 && c <= 0xef)
        len = 3, min = 0x800;
    else if (c >= 0xf0 && c <= 0xf4)
        len = 4, min = 0x10000;
    else
        return 0;
    if (len > n)
        return 0;
    unsigned v = c & (0x7f >> len);
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        v = v << 6 | (s[i] & 0x3f);
    }
    if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
        return 0;
    return len;
}

/* A string at r->at (its opening quote): checked, its span recorded. */
static int read_string(struct reader *r, int t)
{
    const char *s = r->d->text;
    size_t n = r->d->len;
    r->at++;
    size_t start = r->at;
    while (r->at < n && s[r->at] != '"') {
        unsigned char c = (unsigned char)s[r->at];
        if (c < 0x20)
            return fail(r, "a control character (%#x) inside a string", c);
        if (c == '\\') {
            if (r->at + 1 >= n)
                break;
            char e = s[r->at + 1];
            if (e == 'u') {
                unsigned u, low;
                if (r->at + 6 > n || hex4(s + r->at + 2, &u) != 0)
                    return fail(r, "\\u not followed by four hexadecimal digits");
                r->at += 6;
                if (u >= 0xdc00 && u <= 0xdfff)
                    return fail(r, "a lone low surrogate \\u%04x", u);
                if (u >= 0xd800 && u <= 0xdbff) {
                    if (r->at + 6 > n || s[r->at] != '\\' || s[r->at + 1] != 'u' ||
                        hex4(s + r->at + 2, &low) != 0 || low < 0xdc00 || low > 0xdfff)
                        return fail(r, "a high surrogate \\u%04x without its low one", u);
                    r->at += 6;
                }
                continue;
            }
            if (!strchr("\"\\/bfnrt", e) || e == 0)
                return fail(r, "an unknown escape \\%c", e ? e : '0');
            r->at += 2;
            continue;
        }
        size_t len = utf8_length((const unsigned char *)s + r->at, n - r->at);
        if (!len)
            return fail(r, "a byte (%#x) that is not UTF-8 inside a string", c);
        r->at += len;
    }
    if (r->at >= n)
        return fail(r, "a string that does not end");
    r->d->tok[t].start = (uint32_t)start;
    r->d->tok[t].len = (uint32_t)(r->at - start);
    r->at++;
    return 0;
}

static int read_number(struct reader *r, int t)
{
    const char *s = r->d->text;
    size_t n = r->d->len, start = r->at;
#define DIGIT(i) ((i) < n && s[i] >= '0' && s[i] <= '9')
    if (r->at < n && s[r->at] == '-')
        r->at++;
    if (!DIGIT(r->at))
        return fail(r, "a number without digits");
    if (s[r->at] == '0' && DIGIT(r->at + 1))
        return fail(r, "a number with a leading zero");
    while (DIGIT(r->at))
        r->at++;
    if (r->at < n && s[r->at] == '.') {
        r->at++;
        if (!DIGIT(r->at))
            return fail(r, "a number without digits after its point");
        while (DIGIT(r->at))
            r->at++;
    }
    if (r->at < n && (s[r->at] == 'e' || s[r->at] == 'E')) {
        r->at++;
        if (r->at < n && (s[r->at] == '+' || s[r->at] == '-'))
            r->at++;
        if (!DIGIT(r->at))
            return fail(r, "a number without digits in its exponent");
        while (DIGIT(r->at))
            r->at++;
    }
#undef DIGIT
    r->d->tok[t].len = (uint32_t)(r->at - start);
    return 0;
}

static int read_value(struct reader *r);

static int read_container(struct reader *r, int t, bool object)
{
    if (++r->depth > r->max_depth)
        return fail(r, "nested more than %d deep", r->max_depth);
    const char *s = r->d->text;
    char close = object ? '}' : ']';
    r->at++;
    skip_space(r);
    if (r->at < r->d->len && s[r->at] == close) {
        r->at++;
        r->depth--;
        return 0;
    }
    for (;;) {
        if (object) {
            skip_space(r);
            if (r->at >= r->d->len || s[r->at] != '"')
                return fail(r, "an object's key that is not a string");
            int k = new_token(r, JSON_STRING, r->at);
            if (k < 0 || read_string(r, k) != 0)
                return -1;
            r->d->tok[k].end = r->d->n;
            skip_space(r);
            if (r->at >= r->d->len || s[r->at] != ':')
                return fail(r, "a key without ':' after it");
            r->at++;
        }
        if (read_value(r) != 0)
            return -1;
        r->d->tok[t].size++;
        skip_space(r);
        if (r->at < r->d->len && s[r->at] == ',') {
            r->at++;
            skip_space(r);
            if (r->at < r->d->len && s[r->at] == close)
                return fail(r, "a comma before '%c'", close);
            continue;
        }
        if (r->at < r->d->len && s[r->at] == close) {
            r->at++;
            r->depth--;
            return 0;
        }
        return fail(r, object ? "an object's member not followed by ',' or '}'"
                              : "an array's element not followed by ',' or ']'");
    }
}

static int read_value(struct reader *r)
{
    skip_space(r);
    const char *s = r->d->text;
    size_t n = r->d->len;
    if (r->at >= n)
        return fail(r, "the text ends where a value should be");
    char c = s[r->at];
    int t;
    static const struct {
        const char *word;
        enum json_type type;
    } literal[] = {{"null", JSON_NULL}, {"true", JSON_BOOL}, {"false", JSON_BOOL}};
    for (size_t i = 0; i < sizeof literal / sizeof *literal; i++) {
        size_t len = strlen(literal[i].word);
        if (c == literal[i].word[0]) {
            if (n - r->at < len || memcmp(s + r->at, literal[i].word, len) != 0)
                return fail(r, "an unknown word where a value should be");
            if ((t = new_token(r, literal[i].type, r->at)) < 0)
                return -1;
            r->d->tok[t].len = (uint32_t)len;
            r->at += len;
            r->d->tok[t].end = r->d->n;
            return 0;
        }
    }
    enum json_type type = c == '"' ? JSON_STRING : c == '{' ? JSON_OBJECT : c == '[' ? JSON_ARRAY
                                                                                  : JSON_NUMBER;
    if (type == JSON_NUMBER && c != '-' && (c < '0' || c > '9'))
        return fail(r, "'%c' where a value should be", c >= 0x20 && c < 0x7f ? c : '?');
    if ((t = new_token(r, type, r->at)) < 0)
        return -1;
    int rc = type == JSON_STRING   ? read_string(r, t)
             : type == JSON_NUMBER ? read_number(r, t)
                                   : read_container(r, t, type == JSON_OBJECT);
    r->d->tok[t].end = r->d->n;
    return rc;
}

int json_parse(struct json_doc *d, const char *text, size_t len, uint32_t max_tokens,
               int max_depth, char *err, size_t errlen)
{
    *d = (struct json_doc){text, len, NULL, 0};
    struct reader r = {d, 0, 0, max_tokens, 0, max_depth, err, errlen};
    if (len > UINT32_MAX)
        return fail(&r, "more than 4 GiB of text");
    if (memchr(text, 0, len))
        return fail(&r, "a NUL byte in the text");
    if (read_value(&r) != 0) {
        json_free(d);
        return -1;
    }
    skip_space(&r);
    if (r.at != len) {
        fail(&r, "more text after the value");
        json_free(d);
        return -1;
    }
    return 0;
}

void json_free(struct json_doc *d)
{
    free(d->tok);
    d->tok = NULL;
    d->n = 0;
}

int json_first_member(const struct json_doc *d, int obj)
{
    if (obj < 0 || d->tok[obj].type != JSON_OBJECT || !d->tok[obj].size)
        return -1;
    return obj + 1;
}

int json_next_member(const struct json_doc *d, int obj, int key)
{
    uint32_t next = d->tok[key + 1].end; /* past the key's value */
    return next < d->tok[obj].end ? (int)next : -1;
}

bool json_is(const struct json_doc *d, int t, const char *s)
{
    char buf[256];
    return t >= 0 && d->tok[t].type == JSON_STRING && strlen(s) < sizeof buf &&
           json_text(d, t, buf, sizeof buf) == 0 && strcmp(buf, s) == 0;
}

int json_member(const struct json_doc *d, int obj, const char *key)
{
    if (obj < 0 || d->tok[obj].type != JSON_OBJECT)
        return -1;
    int found = -1;
    uint32_t k = (uint32_t)obj + 1;
    for (uint32_t i = 0; i < d->tok[obj].size; i++) {
        if (json_is(d, (int)k, key)) {
            if (found >= 0)
                return -2;
            found = (int)k + 1;
        }
        k = d->tok[k + 1].end;
    }
    return found;
}

static size_t put_utf8(char *out, unsigned v)
{
    if (v < 0x80) {
        out[0] = (char)v;
        return 1;
    }
    if (v < 0x800) {
        out[0] = (char)(0xc0 | v >> 6);
        out[1] = (char)(0x80 | (v & 0x3f));
        return 2;
    }
    if (v < 0x10000) {
        out[0] = (char)(0xe0 | v >> 12);
        out[1] = (char)(0x80 | (v >> 6 & 0x3f));
        out[2] = (char)(0x80 | (v & 0x3f));
        return 3;
    }
    out[0] = (char)(0xf0 | v >> 18);
    out[1] = (char)(0x80 | (v >> 12 & 0x3f));
    out[2] = (char)(0x80 | (v >> 6 & 0x3f));
    out[3] = (char)(0x80 | (v & 0x3f));
    return 4;
}

int json_text(const struct json_doc *d, int t, char *out, size_t n)
{
    if (t < 0 || d->tok[t].type != JSON_STRING || n == 0)
        return -1;
    const char *s = d->text + d->tok[t].start;
    size_t len = d->tok[t].len, o = 0;
    for (size_t i = 0; i < len;) {
        char buf[4];
        size_t w = 1;
        if (s[i] != '\\') {
            buf[0] = s[i++];
        } else {
            char e = s[i + 1];
            i += 2;
            if (e == 'u') {
                unsigned u, low;
                hex4(s + i, &u); /* checked when read */
                i += 4;
                if (u >= 0xd800 && u <= 0xdbff) {
                    hex4(s + i + 2, &low);
                    i += 6;
                    u = 0x10000 + ((u - 0xd800) << 10) + (low - 0xdc00);
                }
                if (u == 0)
                    return -1;
                w = put_utf8(buf, u);
            } else {
                buf[0] = e == 'b' ? '\b' : e == 'f' ? '\f' : e == 'n' ? '\n' : e == 'r' ? '\r'
                       : e == 't' ? '\t' : e;
            }
        }
        if (o + w >= n)
            return -1;
        memcpy(out + o, buf, w);
        o += w;
    }
    out[o] = 0;
    return 0;
}

int json_integer(const struct json_doc *d, int t, int64_t min, int64_t max, int64_t *out)
{
    if (t < 0 || d->tok[t].type != JSON_NUMBER)
        return -1;
    const char *s = d->text + d->tok[t].start;
    size_t len = d->tok[t].len, i = s[0] == '-';
    if (len > 20 || memchr(s, '.', len) || memchr(s, 'e', len) || memchr(s, 'E', len))
        return -1;
    int64_t v = 0;
    for (; i < len; i++) {
        int digit = s[i] - '0';
        if (v > (INT64_MAX - digit) / 10)
            return -1;
        v = v * 10 + digit;
    }
    if (s[0] == '-')
        v = -v;
    if (v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

const char *json_type_name(enum json_type t)
{
    static const char *const name[] = {"null", "true or false", "a number", "a string",
                                       "an array", "an object"};
    return t <= JSON_OBJECT ? name[t] : "?";
}
