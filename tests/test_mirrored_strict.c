/* test_mirrored_strict.c — the mirrored strategy under the strict placement
 * policy, which refuses an op whose inputs are on another device: the
 * strategy's own moves between devices (splitting a batch of the host over
 * the replicas, broadcasting variables, all-reducing gradients, reducing the
 * replicas' values to the current device or the host) are explicit copies,
 * as TensorFlow's strategy makes them under any device policy, so a
 * training step and a reduce give what they give under the copy policy,
 * while the user's own op on two replicas' values is still refused. Runs on
 * three simulated GPUs. */
#define _GNU_SOURCE
#include "mirrored_model.h"

static const char *const gpus[3] = {"GPU:0", "GPU:1", "GPU:2"};

/* One SGD step on three replicas under `policy`: the losses reduced with
 * SUM to the host and with MEAN to GPU:1, and every parameter of replica
 * 0 after the step into params. */
static void step_and_reduce(enum vdev_placement_policy policy, float *sum, float *mean,
                            float *params)
{
    check_fresh("3x1GiB");
    CHECK_OK(vdev_set_placement_policy(policy));
    CHECK_OK(vdev_init());
    vdev_strategy_t *s = NULL;
    CHECK_OK(vdev_mirrored_strategy_new(gpus, 3, &s));
    struct mm m = {.seed = 11, .lr = 0.25f};
    mm_batch(&m, 30, 5);
    CHECK_OK(vdev_strategy_run(s, mm_build, &m, NULL));
    vdev_tensor_t *losses[3] = {NULL, NULL, NULL};
    CHECK_OK(vdev_strategy_run(s, mm_step, &m, losses));
    for (int r = 0; r < 3; r++)
        CHECK_STR(vdev_tensor_device(losses[r]), vdev_strategy_device(s, r));

    vdev_tensor_t *total = vdev_strategy_reduce(s, VDEV_REDUCE_SUM, losses);
    CHECK(total != NULL);
    if (!total)
        fprintf(stderr, "  reduce SUM: %s\n", vdev_last_error());
    CHECK_STR(vdev_tensor_device(total), "/device:CPU:0"); /* no scope: the host */
    *sum = vdev_tensor_item(total);
    float each = 0;
    for (int r = 0; r < 3; r++)
        each += vdev_tensor_item(losses[r]);
    CHECK(fabsf(*sum - each) <= 1e-6f * fabsf(each));

    CHECK_OK(vdev_device_push("GPU:1"));
    vdev_tensor_t *avg = vdev_strategy_reduce(s, VDEV_REDUCE_MEAN, losses);
    CHECK_OK(vdev_device_pop());
    CHECK(avg != NULL);
    if (!avg)
        fprintf(stderr, "  reduce MEAN: %s\n", vdev_last_error());
    CHECK_STR(vdev_tensor_device(avg), "/device:GPU:1");
    *mean = vdev_tensor_item(avg);
    mm_read(m.vars[0], params);

    if (policy == VDEV_PLACEMENT_STRICT) {
        /* the policy is in force: the user's own op across replicas is refused */
        CHECK_OK(vdev_device_push("CPU:0"));
        CHECK(vdev_add(losses[0], losses[1]) == NULL);
        CHECK_OK(vdev_device_pop());
        CHECK(vdev_last_status() == VDEV_ERR_PLACEMENT);
        CHECK_MSG("Tensors on conflicting devices: cannot compute AddV2 as input #0 was "
                  "expected to be on /job:localhost/replica:0/task:0/device:CPU:0 but is "
                  "actually on /job:localhost/replica:0/task:0/device:GPU:0");
    }
    vdev_tensor_free(total);
    vdev_tensor_free(avg);
    for (int r = 0; r < 3; r++)
        vdev_tensor_free(losses[r]);
    mm_free(&m, 3);
    vdev_strategy_free(s);
    vdev_shutdown();
}

int main(void)
{
    float sum_copy = NAN, mean_copy = NAN, sum_strict = NAN, mean_strict = NAN;
    float p_copy[MM_PARAMS], p_strict[MM_PARAMS];
    step_and_reduce(VDEV_PLACEMENT_COPY, &sum_copy, &mean_copy, p_copy);
    step_and_reduce(VDEV_PLACEMENT_STRICT, &sum_strict, &mean_strict, p_strict);
    /* the same step, bit for bit: the copies are the ones the copy policy makes */
    CHECK(memcmp(&sum_copy, &sum_strict, sizeof sum_copy) == 0);
    CHECK(memcmp(&mean_copy, &mean_strict, sizeof mean_copy) == 0);
    CHECK(memcmp(p_copy, p_strict, sizeof p_copy) == 0);
    CHECK(fabsf(mean_strict * 3 - sum_strict) <= 1e-6f * fabsf(sum_strict));
    return check_done();
}
