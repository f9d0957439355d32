/* test_host_oom_replica.c — refusals on a replica's own thread, in the middle of
 * a mirrored training step.
 *
 * The other refusal tests refuse the calling thread's allocations; a mirrored
 * step runs on the replicas' threads. Here replica 0's step function sets the
 * countdown on its own thread (host memory, then tensors' device memory) for the
 * first of three steps (in which the optimizers make their slots) or the second,
 * n = 1, 2, ... until a step no longer reaches its n-th allocation: the forward
 * pass, the tape, the average loss, the gradients, the all-reduce, the slots;
 * then replica 1's, in the first step. A step that fails must
 * fail as a whole (vdev_strategy_run says VDEV_ERR_OOM, naming that replica) with no
 * replica's variables, slots or step count changed, so the same step made again
 * succeeds, and the three steps end with the losses and the variables of both
 * replicas the same to the bit as the run without a refusal. Two simulated GPUs,
 * the MLP of mirrored_model.h with Adam. */
#define _GNU_SOURCE
#include "host_oom.h"
#include "mirrored_model.h"

#include <string.h>

static long arm_n;  /* the allocation replica 0 refuses in this step; 0: none */
static int fired;   /* it came, in this step */
static int came;    /* it came, in this run */
static int kind;    /* 0: host memory, 1: tensors' device memory */
static int at_step; /* the step whose allocation n is refused */
static int target;  /* the replica whose allocation n is refused */

static enum vdev_status armed_step(vdev_replica_context_t *ctx, void *u)
{
    int mine = vdev_replica_id(ctx) == target && arm_n > 0;
    if (mine) {
        if (kind)
            vdev_device_fail_at(arm_n);
        else
            vdev_host_fail_at(arm_n);
    }
    enum vdev_status st = mm_step(ctx, u);
    if (mine) {
        fired = kind ? !vdev_device_fail_pending() : !vdev_host_fail_pending();
        vdev_device_fail_at(0);
        vdev_host_fail_at(0);
    }
    return st;
}

/* Three steps, step at_step with allocation n of replica 0 refused (n = 0: none).
 * The digest: both replicas' losses and variables. */
static uint64_t three_steps(long n)
{
    check_fresh("2x64MiB");
    const char *devs[2] = {"GPU:0", "GPU:1"};
    vdev_strategy_t *s = NULL;
    CHECK_OK(vdev_mirrored_strategy_new(devs, 2, &s));
    struct mm m;
    memset(&m, 0, sizeof m);
    m.seed = 7;
    m.lr = 0.01f;
    m.adam = 1;
    const int64_t xs[2] = {8, MM_IN}, ys[2] = {8, MM_OUT};
    CHECK_OK(vdev_device_push("CPU:0"));
    m.x = vdev_tensor_uniform(xs, 2, -1, 1, 31);
    m.y = vdev_tensor_uniform(ys, 2, -1, 1, 32);
    CHECK_OK(vdev_device_pop());
    arm_n = 0;
    CHECK_OK(vdev_strategy_run(s, mm_build, &m, NULL));
    uint64_t h = 0;
    came = 0;
    for (int step = 0; step < 3; step++) {
        vdev_tensor_t *loss[2] = {NULL, NULL};
        arm_n = step == at_step ? n : 0;
        fired = 0;
        enum vdev_status st = vdev_strategy_run(s, armed_step, &m, loss);
        arm_n = 0;
        came |= fired;
        if (st != VDEV_OK) {
            /* the refusal's doing, reported as such, and nothing changed */
            CHECK(fired);
            CHECK_STATUS(st, VDEV_ERR_OOM);
            char who[16];
            snprintf(who, sizeof who, "replica %d (", target);
            CHECK(!strncmp(vdev_last_error(), who, strlen(who)));
            CHECK(strstr(vdev_last_error(), "memory") ||
                  strstr(vdev_last_error(), "OOM when allocating"));
            refused++;
            CHECK_OK(vdev_strategy_run(s, armed_step, &m, loss));
        }
        h = tensors_digest(h, loss, 2);
        vdev_tensor_free(loss[0]);
        vdev_tensor_free(loss[1]);
    }
    for (int r = 0; r < 2; r++)
        h = tensors_digest(h, m.vars[r], MM_NV);
    for (int r = 0; r < 2; r++) {
        vdev_optimizer_free(m.opt[r]);
        vdev_mlp_free(m.mlp[r]);
    }
    vdev_tensor_free(m.x);
    vdev_tensor_free(m.y);
    vdev_strategy_free(s);
    vdev_shutdown();
    return h;
}

static void sweep_replica(int k, int step, int replica)
{
    kind = k;
    at_step = step;
    target = replica;
    const char *what = k ? "device" : "host";
    refused = 0;
    uint64_t want = three_steps(0);
    long n = 1, failures = 0;
    for (; n < 100000; n++) {
        int bad = check_failed;
        refused = 0;
        uint64_t got = three_steps(n);
        if (!came)
            break;
        failures += refused;
        CHECK_EQ_U64(got, want);
        if (check_failed != bad) {
            fprintf(stderr, "  (replica %d's %s allocation %ld refused in step %d)\n", replica,
                    what, n, step);
            return;
        }
    }
    CHECK(n > 1 && failures > 0);
    printf("a mirrored step on two GPUs (%s): replica %d's %ld %s allocations each refused in "
           "turn, %ld steps failed and were made again\n",
           step ? "the second, slots made" : "the first, slots made in it", replica, n - 1, what,
           failures);
}

int main(void)
{
    for (int step = 0; step < 2; step++) {
        sweep_replica(0, step, 0);
        sweep_replica(1, step, 0);
    }
    /* the other replica: the failure is named by the replica it struck */
    sweep_replica(0, 0, 1);
    sweep_replica(1, 0, 1);
    return check_done();
}
