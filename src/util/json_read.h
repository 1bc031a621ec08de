/* json_read: a strict reader of JSON (RFC 8259) from another program, for
 * input that may be hostile: the OCI state a container runtime gives a
 * hook, and the bundle's config.json.
 *
 * The text is read whole into a flat array of tokens (no allocation per
 * value), bounded in tokens and in depth, and refused at the first thing
 * RFC 8259 does not allow: a trailing comma, a control character or an
 * invalid UTF-8 sequence in a string, a bad escape, a lone surrogate, a
 * number with a leading zero, anything after the value. Every refusal says
 * where (the byte offset) and what. Values are looked up by key; a key
 * present twice in one object is reported as such, never silently taken
 * once (a forged duplicate "pid" must not win over the real one).
 */
#ifndef VRAM_JSON_READ_H
#define VRAM_JSON_READ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum json_type { JSON_NULL, JSON_BOOL, JSON_NUMBER, JSON_STRING, JSON_ARRAY, JSON_OBJECT };

struct json_token {
    enum json_type type;
    uint32_t start, len; /* the text of a number, of a string between its quotes, of a literal */
    uint32_t size;       /* an array's elements, an object's members */
    uint32_t end;        /* the index just past this value's tokens (its next sibling) */
};

struct json_doc {
    const char *text;
    size_t len;
    struct json_token *tok;
    uint32_t n;
};

/* Reads text[0, len) into d (tokens malloc()ed; json_free releases them):
 * at most max_tokens values and keys, nested at most max_depth deep. 0, or
 * -1 with what is wrong and where in err. */
int json_parse(struct json_doc *d, const char *text, size_t len, uint32_t max_tokens,
               int max_depth, char *err, size_t errlen);
void json_free(struct json_doc *d);

/* The value of member `key` of object token `obj`: its index, -1 when the
 * object has no such member (or `obj` is not an object), -2 when it has
 * it more than once. */
int json_member(const struct json_doc *d, int obj, const char *key);

/* An object's members in order: the first key's index (-1: none), then
 * each next key's (-1 after the last); a key's value is key + 1. */
int json_first_member(const struct json_doc *d, int obj);
int json_next_member(const struct json_doc *d, int obj, int key);

/* A string token's value, unescaped, into out (NUL-terminated): 0, or -1
 * when it does not fit in n bytes or holds a NUL (\u0000), which no C
 * string can carry. */
int json_text(const struct json_doc *d, int t, char *out, size_t n);
/* Whether string token t is exactly `s`. */
bool json_is(const struct json_doc *d, int t, const char *s);

/* A number token that is a whole number (no fraction, no exponent) in
 * [min, max], into *out: 0, or -1. */
int json_integer(const struct json_doc *d, int t, int64_t min, int64_t max, int64_t *out);

/* "a string", "a number", ... for messages. */
const char *json_type_name(enum json_type t);

#endif
