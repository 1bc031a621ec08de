/* pick_gpus, for vram run --gpus: the GPUs with the most free memory that
 * hold the budget, within what the environment allows, in its own form. */
#include "../tools/pick.h"
#include "check.h"

#define G (1ull << 30)

static const struct pick_gpu two[] = {
    {0, "GPU-a", 80 * G, true, 40 * G, 0}, /* half full */
    {1, "GPU-b", 80 * G, true, 80 * G, 0},
};

int main(void)
{
    char value[256], say[512];

    /* Two GPUs, one half full: the other. */
    CHECK(pick_gpus(two, 2, 1, 10 * G, NULL, value, sizeof value, say, sizeof say, NULL) == 0);
    CHECK(strcmp(value, "1") == 0);
    CHECK(strstr(say, "GPU 1 (GPU-b, 80.00 GiB free of 80.00 GiB)") != NULL);
    CHECK(strstr(say, "CUDA_VISIBLE_DEVICES=1") != NULL);

    /* Both: in the order programs number them. */
    CHECK(pick_gpus(two, 2, 2, 10 * G, NULL, value, sizeof value, say, sizeof say, NULL) == 0);
    CHECK(strcmp(value, "0,1") == 0);

    /* A budget only one can hold: two are refused, naming what each has. */
    CHECK(pick_gpus(two, 2, 2, 50 * G, NULL, value, sizeof value, say, sizeof say, NULL) == -1);
    CHECK(strstr(say, "1 of the 2 GPUs the command may use has 50.00 GiB free") != NULL);
    CHECK(strstr(say, "GPU 0: 40.00 GiB; GPU 1: 80.00 GiB") != NULL);
    CHECK(value[0] == 0);

    /* An inherited CUDA_VISIBLE_DEVICES=1: the command sees one GPU (its
     * ordinal 0, physical 1), the set it picks from; the value is the
     * inherited entry, never an index that would escape it. */
    const struct pick_gpu inherited_one[] = {{0, "GPU-b", 80 * G, true, 80 * G, 0}};
    CHECK(pick_gpus(inherited_one, 1, 1, 10 * G, "1", value, sizeof value, say, sizeof say,
                    NULL) == 0);
    CHECK(strcmp(value, "1") == 0);
    CHECK(pick_gpus(inherited_one, 1, 2, 10 * G, "1", value, sizeof value, say, sizeof say,
                    NULL) == -1);
    CHECK(strstr(say, "--gpus 2: the command may use 1 GPU (CUDA_VISIBLE_DEVICES=\"1\" as "
                      "inherited)") != NULL);

    /* Slurm's "2,3", UUIDs, spaces: the inherited entries as they were. */
    const struct pick_gpu slurm[] = {
        {0, "GPU-c", 80 * G, true, 10 * G, 0},
        {1, "GPU-d", 80 * G, true, 70 * G, 0},
    };
    CHECK(pick_gpus(slurm, 2, 1, 0, "2,3", value, sizeof value, say, sizeof say, NULL) == 0);
    CHECK(strcmp(value, "3") == 0);
    CHECK(pick_gpus(slurm, 2, 1, 0, "GPU-c , GPU-d", value, sizeof value, say, sizeof say,
                    NULL) == 0);
    CHECK(strcmp(value, "GPU-d") == 0);
    CHECK(pick_gpus(slurm, 2, 1, 0, "2", value, sizeof value, say, sizeof say, NULL) == -1);
    CHECK(strstr(say, "has no entry for GPU 1") != NULL);

    /* Ties: the lower ordinal. Unknown free memory: only without a budget,
     * and after those known. */
    const struct pick_gpu tie[] = {
        {0, "GPU-e", 80 * G, false, 0, 0},
        {1, "GPU-f", 80 * G, true, 20 * G, 0},
        {2, "GPU-g", 80 * G, true, 20 * G, 0},
    };
    CHECK(pick_gpus(tie, 3, 1, 0, NULL, value, sizeof value, say, sizeof say, NULL) == 0);
    CHECK(strcmp(value, "1") == 0);
    CHECK(pick_gpus(tie, 3, 3, 0, NULL, value, sizeof value, say, sizeof say, NULL) == 0);
    CHECK(strcmp(value, "0,1,2") == 0);
    CHECK(pick_gpus(tie, 3, 3, G, NULL, value, sizeof value, say, sizeof say, NULL) == -1);
    CHECK(strstr(say, "GPU 0: free unknown") != NULL);

    /* The picked, for vram run to number the command's GPUs by. */
    int chosen[3];
    CHECK(pick_gpus(two, 2, 1, 10 * G, NULL, value, sizeof value, say, sizeof say, chosen) == 0);
    CHECK(chosen[0] == 1);
    CHECK(pick_gpus(tie, 3, 2, 0, NULL, value, sizeof value, say, sizeof say, chosen) == 0);
    CHECK(chosen[0] == 1 && chosen[1] == 2);

    /* Under an inherited CUDA_VISIBLE_DEVICES the line says it picked
     * within it, and a refusal says what each GPU has free. */
    CHECK(pick_gpus(inherited_one, 1, 1, 10 * G, "1", value, sizeof value, say, sizeof say,
                    NULL) == 0);
    CHECK(strstr(say, "--gpus 1 of the 1 GPU CUDA_VISIBLE_DEVICES=\"1\" allows: GPU 0 (GPU-b") !=
          NULL);
    CHECK(pick_gpus(inherited_one, 1, 1, 90 * G, "1", value, sizeof value, say, sizeof say,
                    NULL) == -1);
    CHECK(strstr(say, "0 of the 1 GPU the command may use (CUDA_VISIBLE_DEVICES=\"1\" as "
                      "inherited) have 90.00 GiB free (GPU 0: 80.00 GiB)") != NULL);

    /* A budget that is a share of each GPU: each GPU holds its own. */
    const struct pick_gpu share[] = {
        {0, "GPU-h", 40 * G, true, 30 * G, 20 * G}, /* half of 40 GiB: fits */
        {1, "GPU-i", 80 * G, true, 35 * G, 40 * G}, /* half of 80 GiB: does not */
    };
    CHECK(pick_gpus(share, 2, 1, 0, NULL, value, sizeof value, say, sizeof say, NULL) == 0);
    CHECK(strcmp(value, "0") == 0);
    CHECK(pick_gpus(share, 2, 2, 0, NULL, value, sizeof value, say, sizeof say, NULL) == -1);
    CHECK(strstr(say, "1 of the 2 GPUs the command may use has its budget free (GPU 0: 30.00 "
                      "GiB for 20.00 GiB; GPU 1: 35.00 GiB for 40.00 GiB)") != NULL);

    /* n out of range. */
    CHECK(pick_gpus(two, 2, 0, 0, NULL, value, sizeof value, say, sizeof say, NULL) == -1);
    CHECK(strstr(say, "accepted: 1 to 2") != NULL);
    CHECK(pick_gpus(two, 2, 3, 0, NULL, value, sizeof value, say, sizeof say, NULL) == -1);
    printf("test_pick: ok\n");
    return 0;
}
