/* Every way a person can mistype a setting gets a message that names the
 * setting, the value and what is accepted; nothing falls back silently. */
#include "../src/core/options.h"
#include "../src/ledger/policy.h"
#include "../src/util/parse.h"
#include "check.h"

static void sizes(void)
{
    struct {
        const char *text;
        uint64_t bytes;
    } good[] = {
        {"4096B", 4096},         {"4G", 4 * GiB},       {"4GiB", 4 * GiB},
        {"512MiB", 512 * MiB},   {"1.5GiB", 3 * GiB / 2}, {"2GB", 2000000000ull},
        {"1K", 1024},            {"100B", 100},          {"18446744073709551615", UINT64_MAX},
        {"0.5T", 512 * GiB},     {"4Gi", 4 * GiB},      {"512Mi", 512 * MiB},
        {"1.5Gi", 3 * GiB / 2},  {"1Ti", 1024 * GiB},   {"64Ki", 65536},
        {"1048576", MiB},        {"0", 0},
        /* as people write them: a memory budget is never bits */
        {"4gb", 4000000000ull},  {"4Gb", 4000000000ull}, {"4g", 4 * GiB},
        {"4gib", 4 * GiB},
    };
    for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
        uint64_t v = 0;
        parse_why why;
        if (parse_size(good[i].text, &v, &why) != 0 || v != good[i].bytes) {
            fprintf(stderr, "parse_size(\"%s\") = %llu (%s), expected %llu\n", good[i].text,
                    (unsigned long long)v, why.text, (unsigned long long)good[i].bytes);
            exit(1);
        }
    }
    const char *bad[] = {"", "4Gx", "-1", "abc", "1.5", "4 G", "0x10", "18446744073709551616",
                         "1e9", "inf", "4GiBs", "G", "4Gii", "4iB"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        uint64_t v;
        parse_why why = {{0}};
        CHECK(parse_size(bad[i], &v, &why) == -1);
        CHECK(why.text[0] != 0);
    }
    /* A number without a unit is bytes; below 1 MiB it is a forgotten unit,
     * and the message shows the forms that were probably meant. */
    const char *unitless[] = {"4", "25", "4096", "1048575", "1.5", "0.5"};
    for (size_t i = 0; i < sizeof unitless / sizeof *unitless; i++) {
        uint64_t v;
        parse_why why = {{0}};
        char hint[64];
        snprintf(hint, sizeof hint, "%sGiB", unitless[i]);
        CHECK(parse_size(unitless[i], &v, &why) == -1);
        CHECK_CONTAINS(why.text, "without a unit is bytes");
        CHECK_CONTAINS(why.text, hint);
    }
    double f;
    parse_why why;
    CHECK(parse_fraction("0.33", &f, &why) == 0 && f == 0.33);
    CHECK(parse_fraction("33%", &f, &why) == 0 && f > 0.329 && f < 0.331);
    CHECK(parse_fraction("1", &f, &why) == 0 && f == 1.0);
    CHECK(parse_fraction("1.5", &f, &why) == -1);
    CHECK(parse_fraction("0", &f, &why) == -1);
    CHECK(parse_fraction("150%", &f, &why) == -1);
    /* A percentage written without its sign is told how to write it. */
    CHECK(parse_fraction("33", &f, &why) == -1);
    CHECK_CONTAINS(why.text, "write 33% or 0.33");
    CHECK(strcmp(format_size(12 * GiB).text, "12.00 GiB") == 0);
    CHECK(strcmp(format_size(255).text, "255 B") == 0);
    CHECK(strcmp(format_size(1536 * MiB).text, "1.50 GiB") == 0);
}

/* The environment is read when vram first needs devices; a bad value makes
 * that first use fail, with nothing set up, so the next case can retry. */
/* Durations: bare seconds, as nvidia-smi -l and gpustat -i take them, or
 * a number with a unit. */
static void durations(void)
{
    static const struct {
        const char *text;
        uint64_t ms;
    } good[] = {{"1", 1000},   {"2.5", 2500},    {"0", 0},         {"500ms", 500},
                {"30s", 30000}, {"10m", 600000}, {"1.5h", 5400000}, {"0.5", 500}};
    for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
        uint64_t ms = 12345;
        parse_why why = {{0}};
        if (parse_duration(good[i].text, &ms, &why) != 0 || ms != good[i].ms) {
            fprintf(stderr, "parse_duration(\"%s\") = %llu (%s), expected %llu\n", good[i].text,
                    (unsigned long long)ms, why.text, (unsigned long long)good[i].ms);
            exit(1);
        }
    }
    const char *bad[] = {"", "-1", "1x", "s", "1 s", "1e3", "inf", "10M"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        uint64_t ms;
        parse_why why = {{0}};
        CHECK(parse_duration(bad[i], &ms, &why) == -1);
        CHECK(why.text[0] != 0);
    }
}

/* A size means the same wherever it is written: a vram run flag or a
 * VRAM_* variable (both through options_set) and the policy file. */
static void same_everywhere(void)
{
    static const struct {
        const char *text;
        uint64_t bytes; /* 0: refused */
    } cases[] = {{"4Gi", 4 * GiB},  {"4GiB", 4 * GiB}, {"512Mi", 512 * MiB},
                 {"1073741824", GiB}, {"4", 0},        {"25", 0},
                 {"4096", 0}}; /* (in a policy, 0.5 is a share: not here) */
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        struct options o;
        options_clear(&o);
        char err[2048] = "", perr[1024] = "", text[128];
        int r = options_set(&o, "VRAM_MEMORY_LIMIT", cases[i].text, err, sizeof err);
        snprintf(text, sizeof text, "default-budget %s\ncap user 0 %s\n", cases[i].text,
                 cases[i].text);
        struct policy *p = malloc(sizeof *p);
        CHECK(p);
        int pr = policy_parse(text, strlen(text), "p.conf", p, perr, sizeof perr);
        if (cases[i].bytes) {
            CHECK(r == 0 && o.limit_all.bytes == cases[i].bytes);
            CHECK(pr == 0 && p->default_budget.bytes == cases[i].bytes &&
                  p->rules[0].amount.bytes == cases[i].bytes);
        } else {
            CHECK(r == -1);
            CHECK_CONTAINS(err, "without a unit is bytes");
            CHECK(pr == -1);
            CHECK_CONTAINS(perr, "p.conf:1:");
            CHECK_CONTAINS(perr, "without a unit is bytes");
        }
        free(p);
    }
    /* Policy durations are bare seconds too. */
    struct policy *p = malloc(sizeof *p);
    char err[512];
    const char *text = "when-full wait 30\nreconcile-every 2.5\n";
    CHECK(p && policy_parse(text, strlen(text), "p.conf", p, err, sizeof err) == 0);
    CHECK(p->wait_ms == 30000 && p->reconcile_ms == 2500);
    free(p);
}

static void bad_environment(void)
{
    static const struct {
        const char *var, *value, *expect;
    } cases[] = {
        {"VRAM_MEMORY_LIMIT", "4Gx", "unknown unit"},
        {"VRAM_MEMORY_LIMIT", "-1", "negative"},
        {"VRAM_MEMORY_LIMIT", "abc", "not a number"},
        {"VRAM_MEMORY_LIMIT", "1.5", "without a unit is bytes"},
        {"VRAM_MEMORY_LIMIT", "4", "less than 1 MiB"},
        {"VRAM_MEMORY_LIMIT", "0=4", "less than 1 MiB"},
        {"VRAM_MEMORY_LIMIT", "0", "more than 0"},
        {"VRAM_MEMORY_LIMIT", "20GiB", "more than its total memory"},
        {"VRAM_MEMORY_LIMIT", "3=1GiB", "no visible device 3"},
        {"VRAM_MEMORY_LIMIT", "0=1GiB,0=2GiB", "given twice"},
        {"VRAM_MEMORY_LIMIT", "0=1GiB,2GiB", "has no device"},
        {"VRAM_MEMORY_FRACTION", "1.5", "more than 1"},
        {"VRAM_MEMORY_FRACTION", "0", "greater than 0"},
        {"VRAM_MEMORY_FRACTION", "half", "not a number"},
        {"VRAM_ALLOW_GROWTH", "maybe", "not a boolean"},
        {"VRAM_VISIBLE_DEVICES", "5", "no device \"5\""},
        {"VRAM_VISIBLE_DEVICES", "GPU-ffff", "no device \"GPU-ffff\""},
        {"VRAM_VISIBLE_DEVICES", "0,0", "listed twice"},
        {"VRAM_VISIBLE_DEVICES", "GPU-5a1d", "more than one device"},
        {"VRAM_VIRTUAL_DEVICES", "0:8GiB,8GiB", "add up to 16.00 GiB"},
        {"VRAM_VIRTUAL_DEVICES", "0", "no DEVICE:"},
        {"VRAM_VIRTUAL_DEVICES", "0:2GiB;0:1GiB", "given twice"},
        {"VRAM_VIRTUAL_DEVICES", "0:2Gx", "unknown unit"},
        {"VRAM_VIRTUAL_DEVICES", "0:512,512", "less than 1 MiB"},
        {"VRAM_LOG", "loud", "unknown level"},
        {"TF_FORCE_GPU_ALLOW_GROWTH", "yes", "TensorFlow accepts only"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        setenv(cases[i].var, cases[i].value, 1);
        vram_status st = vram_init();
        unsetenv(cases[i].var);
        if (st != VRAM_ERROR_CONFIG) {
            fprintf(stderr, "%s=%s: vram_init returned %s, expected VRAM_ERROR_CONFIG\n",
                    cases[i].var, cases[i].value, vram_status_name(st));
            exit(1);
        }
        const char *msg = vram_last_error();
        CHECK_CONTAINS(msg, cases[i].var);
        CHECK_CONTAINS(msg, cases[i].value);
        CHECK_CONTAINS(msg, cases[i].expect);
    }
    /* Two forms of limit at once is ambiguous. */
    setenv("VRAM_MEMORY_LIMIT", "1GiB", 1);
    setenv("VRAM_MEMORY_FRACTION", "0.5", 1);
    CHECK_STATUS(vram_init(), VRAM_ERROR_CONFIG);
    CHECK_CONTAINS(vram_last_error(), "both set");
    unsetenv("VRAM_MEMORY_LIMIT");
    unsetenv("VRAM_MEMORY_FRACTION");
    /* A split device takes no limit of its own. */
    setenv("VRAM_VIRTUAL_DEVICES", "0:1GiB", 1);
    setenv("VRAM_MEMORY_LIMIT", "0=2GiB", 1);
    CHECK_STATUS(vram_init(), VRAM_ERROR_CONFIG);
    CHECK_CONTAINS(vram_last_error(), "also limited");
    unsetenv("VRAM_VIRTUAL_DEVICES");
    unsetenv("VRAM_MEMORY_LIMIT");
}

static void bad_calls(void)
{
    CHECK_STATUS(vram_set_memory_fraction(0, 1.5), VRAM_ERROR_INVALID_ARGUMENT);
    CHECK_CONTAINS(vram_last_error(), "1.5");
    CHECK_STATUS(vram_set_memory_limit(0, 0), VRAM_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(vram_set_memory_limit(-2, GiB), VRAM_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(vram_configure("VRAM_MEMORY_LIMT", "1GiB"), VRAM_ERROR_CONFIG);
    CHECK_CONTAINS(vram_last_error(), "unknown option \"VRAM_MEMORY_LIMT\"");
    CHECK_STATUS(vram_configure("VRAM_MEMORY_LIMIT", "4Gx"), VRAM_ERROR_CONFIG);
    CHECK_CONTAINS(vram_last_error(), "VRAM_MEMORY_LIMIT=\"4Gx\"");
    uint64_t none[1] = {0};
    CHECK_STATUS(vram_set_virtual_devices(0, 1, none), VRAM_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(vram_set_virtual_devices(0, 99, none), VRAM_ERROR_INVALID_ARGUMENT);
    /* After first use, configuration is frozen, and says so. */
    CHECK_OK(vram_init());
    CHECK_STATUS(vram_set_allow_growth(1), VRAM_ERROR_FROZEN);
    CHECK_CONTAINS(vram_last_error(), "after first use");
    CHECK_STATUS(vram_set_memory_limit(0, GiB), VRAM_ERROR_FROZEN);
    uint64_t two[2] = {GiB, GiB};
    CHECK_STATUS(vram_set_virtual_devices(0, 2, two), VRAM_ERROR_FROZEN);
}

int main(void)
{
    private_gpu("12GiB,12GiB");
    sizes();
    durations();
    same_everywhere();
    bad_environment();
    bad_calls();
    vram_shutdown();
    return 0;
}
