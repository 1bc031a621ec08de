#define _POSIX_C_SOURCE 200809L
/* vram-demo-job: a training job that allocates the way a framework does.
 *
 * It keeps weights and optimizer state for the whole run and, every step,
 * allocates activations layer by layer and frees them in reverse (the
 * backward pass). Its configuration comes from the environment, as any
 * libvram program's does: with VRAM_ALLOW_GROWTH=false it reserves its whole
 * limit at the first allocation, like TensorFlow by default.
 *
 * Prints one line for the demo's table on stdout:
 *   RESULT <name> <budget bytes> <peak bytes> ok|OOM
 * and on failure the reason on stderr.
 */
#include <vram.h>

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define MiB (1024ull * 1024)
#define LAYERS 10

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static int finish(const char *name, const char *result)
{
    vram_device_info info;
    vram_stats st;
    unsigned long long budget = 0, peak = 0;
    if (vram_device_get_info(0, &info) == VRAM_OK)
        budget = info.limit;
    if (vram_get_stats(0, &st) == VRAM_OK)
        peak = st.peak_bytes_in_use;
    printf("RESULT %s %llu %llu %s\n", name, budget, peak, result);
    return result[0] == 'o' ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: vram-demo-job NAME STEPS\n");
        return 2;
    }
    const char *name = argv[1];
    int steps = atoi(argv[2]);
    void *weights, *optimizer, *act[LAYERS];
    if (vram_malloc(0, 1024 * MiB, NULL, &weights) != VRAM_OK ||
        vram_malloc(0, 512 * MiB, NULL, &optimizer) != VRAM_OK) {
        fprintf(stderr, "job %s: %s\n", name, vram_last_error());
        return finish(name, "OOM");
    }
    for (int s = 0; s < steps; s++) {
        for (int l = 0; l < LAYERS; l++)
            if (vram_malloc(0, 180 * MiB, NULL, &act[l]) != VRAM_OK) {
                fprintf(stderr, "job %s step %d: %s\n", name, s, vram_last_error());
                return finish(name, "OOM");
            }
        sleep_ms(100);
        for (int l = LAYERS - 1; l >= 0; l--)
            vram_free(act[l], NULL);
    }
    vram_free(optimizer, NULL);
    vram_free(weights, NULL);
    return finish(name, "ok");
}
