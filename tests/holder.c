/* A process that holds device memory through libvram until it is killed or
 * its stdin closes: the other process in the multi-process tests.
 *   holder SIZE   allocates SIZE on device 0, prints "held", then waits;
 *                 each line on stdin allocates SIZE more ("held" or "oom") */
#include "../src/util/parse.h"
#include "check.h"

int main(int argc, char **argv)
{
    uint64_t size;
    parse_why why;
    if (argc != 2 || parse_size(argv[1], &size, &why) != 0) {
        fprintf(stderr, "usage: holder SIZE\n");
        return 2;
    }
    void *p;
    if (vram_malloc(0, size, NULL, &p) != VRAM_OK) {
        printf("oom %s\n", vram_last_error());
        return 1;
    }
    printf("held\n");
    fflush(stdout);
    char c;
    while (read(0, &c, 1) > 0) {
        if (c != '\n')
            continue;
        if (vram_malloc(0, size, NULL, &p) == VRAM_OK)
            printf("held\n");
        else
            printf("oom %s\n", vram_last_error());
        fflush(stdout);
    }
    return 0;
}
