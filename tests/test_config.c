/* Every way a person can mistype a setting gets a message that names the
 * setting, the value and what is accepted; nothing falls back silently. */
#include "../src/util/parse.h"
#include "check.h"

static void sizes(void)
{
    struct {
        const char *text;
        uint64_t bytes;
    } good[] = {
        {"4096", 4096},          {"4G", 4 * GiB},       {"4GiB", 4 * GiB},
        {"512MiB", 512 * MiB},   {"1.5GiB", 3 * GiB / 2}, {"2GB", 2000000000ull},
        {"1K", 1024},            {"100B", 100},          {"18446744073709551615", UINT64_MAX},
        {"0.5T", 512 * GiB},
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
    const char *bad[] = {"", "4Gb", "-1", "abc", "1.5", "4 G", "0x10", "18446744073709551616",
                         "1e9", "inf", "4GiBs", "G"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        uint64_t v;
        parse_why why = {{0}};
        CHECK(parse_size(bad[i], &v, &why) == -1);
        CHECK(why.text[0] != 0);
    }
    double f;
    parse_why why;
    CHECK(parse_fraction("0.33", &f, &why) == 0 && f == 0.33);
    CHECK(parse_fraction("33%", &f, &why) == 0 && f > 0.329 && f < 0.331);
    CHECK(parse_fraction("1", &f, &why) == 0 && f == 1.0);
    CHECK(parse_fraction("1.5", &f, &why) == -1);
    CHECK(parse_fraction("0", &f, &why) == -1);
    CHECK(parse_fraction("150%", &f, &why) == -1);
    CHECK(strcmp(format_size(12 * GiB).text, "12.00 GiB") == 0);
    CHECK(strcmp(format_size(255).text, "255 B") == 0);
    CHECK(strcmp(format_size(1536 * MiB).text, "1.50 GiB") == 0);
}

/* The environment is read when vram first needs devices; a bad value makes
 * that first use fail, with nothing set up, so the next case can retry. */
static void bad_environment(void)
{
    static const struct {
        const char *var, *value, *expect;
    } cases[] = {
        {"VRAM_MEMORY_LIMIT", "4Gb", "is bits"},
        {"VRAM_MEMORY_LIMIT", "-1", "negative"},
        {"VRAM_MEMORY_LIMIT", "abc", "not a number"},
        {"VRAM_MEMORY_LIMIT", "1.5", "whole number"},
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
        {"VRAM_VIRTUAL_DEVICES", "0:2Gb", "is bits"},
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
    CHECK_STATUS(vram_configure("VRAM_MEMORY_LIMIT", "4Gb"), VRAM_ERROR_CONFIG);
    CHECK_CONTAINS(vram_last_error(), "VRAM_MEMORY_LIMIT=\"4Gb\"");
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
    bad_environment();
    bad_calls();
    vram_shutdown();
    return 0;
}
