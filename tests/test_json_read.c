/* json_read: what a container runtime's hook is given is read exactly as
 * RFC 8259 says, and anything else, however it is made, is refused with
 * where and what: the reader vram oci-hook trusts with a state that may be
 * forged. */
#include "../src/util/json_read.h"
#include "check.h"

static struct json_doc doc;
static char err[256];

static bool reads(const char *text) { return json_parse(&doc, text, strlen(text), 1000, 8, err, sizeof err) == 0; }

/* Refused, with a message that says `what`. */
static void refused(const char *text, const char *what)
{
    if (reads(text) || !strstr(err, what) || !strstr(err, "(at byte ")) {
        fprintf(stderr, "%s: read, or refused with \"%s\", not \"%s\"\n", text, err, what);
        exit(1);
    }
}

int main(void)
{
    /* An OCI state, as runc gives it. */
    const char *state = "{\"ociVersion\":\"1.0.2-dev\",\"id\":\"7fb2\",\"status\":\"creating\","
                        "\"pid\":14817,\"bundle\":\"/var/lib/b\",\"annotations\":{\"a\":\"x\","
                        "\"vram.dev/limit\":\"2GiB\"}}";
    CHECK(reads(state));
    char text[64];
    int64_t pid;
    CHECK(json_integer(&doc, json_member(&doc, 0, "pid"), 1, INT32_MAX, &pid) == 0 && pid == 14817);
    CHECK(json_text(&doc, json_member(&doc, 0, "status"), text, sizeof text) == 0);
    CHECK(strcmp(text, "creating") == 0);
    int a = json_member(&doc, 0, "annotations");
    CHECK(json_is(&doc, json_member(&doc, a, "vram.dev/limit"), "2GiB"));
    CHECK(json_member(&doc, 0, "missing") == -1);
    CHECK(json_member(&doc, a, "id") == -1); /* only a's own members */
    int k = json_first_member(&doc, a), n = 0;
    for (; k >= 0; k = json_next_member(&doc, a, k))
        n++;
    CHECK(n == 2); /* and not on into the next member of the state */
    json_free(&doc);

    /* A key given twice is never taken once: which "pid" would win? */
    CHECK(reads("{\"pid\":1,\"pid\":2}"));
    CHECK(json_member(&doc, 0, "pid") == -2);
    json_free(&doc);

    /* Escapes and UTF-8, decoded. */
    CHECK(reads("[\"a\\\"b\\\\c\\/\\n\\u00e9\\ud83d\\ude00\", -0.5e3, true, false, null, []]"));
    CHECK(json_text(&doc, 1, text, sizeof text) == 0);
    CHECK(strcmp(text, "a\"b\\c/\n\xc3\xa9\xf0\x9f\x98\x80") == 0);
    CHECK(doc.tok[0].size == 6);
    CHECK(json_integer(&doc, 2, INT64_MIN, INT64_MAX, &pid) == -1); /* not whole */
    json_free(&doc);
    CHECK(reads("\"\\u0000\""));
    CHECK(json_text(&doc, 0, text, sizeof text) == -1); /* no C string carries a NUL */
    json_free(&doc);
    CHECK(reads("\"abcdef\""));
    CHECK(json_text(&doc, 0, text, 4) == -1); /* does not fit: never cut short */
    json_free(&doc);
    CHECK(reads("99999999999999999999"));
    CHECK(json_integer(&doc, 0, INT64_MIN, INT64_MAX, &pid) == -1); /* beyond 64 bits */
    json_free(&doc);

    /* Everything RFC 8259 does not allow. */
    refused("{\"a\":1,}", "a comma before '}'");
    refused("[1,]", "a comma before ']'");
    refused("{\"a\" 1}", "a key without ':'");
    refused("{a:1}", "key that is not a string");
    refused("[1 2]", "not followed by ',' or ']'");
    refused("\"a\nb\"", "a control character");
    refused("\"\\x\"", "an unknown escape");
    refused("\"\\u12g4\"", "four hexadecimal digits");
    refused("\"\\udc00\"", "a lone low surrogate");
    refused("\"\\ud800x\"", "without its low one");
    refused("\"\xff\"", "not UTF-8");
    refused("\"\xc0\xaf\"", "not UTF-8");         /* an overlong '/' */
    refused("\"\xed\xa0\x80\"", "not UTF-8");     /* a surrogate, encoded */
    refused("\"abc", "does not end");
    refused("012", "leading zero");
    refused("1.", "after its point");
    refused("1e", "exponent");
    refused("-", "without digits");
    refused("tru", "unknown word");
    refused("nul", "unknown word");
    refused("{} {}", "more text after the value");
    refused("", "ends where a value should be");
    refused("[[[[[[[[[1]]]]]]]]]", "nested more than 8 deep");
    char big[4100] = "[";
    for (int i = 0; i < 1001; i++)
        strcat(big, i ? ",1" : "1");
    strcat(big, "]");
    refused(big, "more than 1000 values");
    CHECK(json_parse(&doc, "1\0 2", 4, 10, 4, err, sizeof err) == -1 && strstr(err, "NUL"));
    printf("test_json_read: ok\n");
    return 0;
}
