/* libFuzzer: any bytes as a policy file. It is accepted or refused with a
 * file:line reason; nothing else may happen. */
#include "../../src/ledger/policy.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct policy p;
    char err[512];
    if (policy_parse((const char *)data, size, "fuzz.conf", &p, err, sizeof err) != 0) {
        if (strncmp(err, "fuzz.conf:", 10) != 0)
            abort(); /* every refusal names the file and line */
        return 0;
    }
    for (int i = 0; i < p.nrules; i++)
        (void)policy_on_device(&p.rules[i], 0, "GPU-5a1d0e5a-a000-4000-8000-000000000000");
    return 0;
}
