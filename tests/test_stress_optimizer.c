/* test_stress_optimizer.c — one optimizer used from several threads at once:
 * two threads update their own variables with it (its slots grow from both)
 * while a third reads its iteration count; every update is counted, every
 * variable ends as one thread alone would leave it, and ThreadSanitizer sees
 * no race (the slot table was reallocated under a reader, the count read
 * while written); settings changed on another thread during updates wait
 * for the update under way (switching clipping off freed the scratch an
 * update was clipping into). A pressure callback met inside an update that
 * asks the same optimizer for its slots, or changes its settings, is
 * refused instead of waiting for itself. */
#define _GNU_SOURCE
#include "check.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#define ROUNDS 20
#define VARS 40
#define STEPS 5

static vdev_optimizer_t *opt;
static atomic_int appliers_done, failures;

/* STEPS updates of VARS new variables (ones, gradient 0.5) on device arg. */
static void *update(void *arg)
{
    static const int64_t shape[1] = {8};
    vdev_tensor_t *v[VARS], *g[VARS];
    int bad = vdev_device_push(arg) != VDEV_OK;
    for (int i = 0; i < VARS; i++) {
        v[i] = vdev_variable(vdev_tensor_fill(shape, 1, VDEV_F32, 1.0));
        g[i] = vdev_tensor_fill(shape, 1, VDEV_F32, 0.5);
        bad += !v[i] || !g[i];
    }
    for (int s = 0; s < STEPS && !bad; s++)
        bad += vdev_optimizer_apply(opt, v, g, VARS) != VDEV_OK;
    /* SGD(0.1, momentum 0.5), gradient 0.5: velocity -0.05, -0.075, -0.0875,
     * -0.09375, -0.096875; the variable 1 - 0.403125 */
    for (int i = 0; i < VARS && !bad; i++) {
        float h[8];
        bad += vdev_tensor_to_host(v[i], h, sizeof h) != VDEV_OK || h[7] < 0.5968f ||
               h[7] > 0.5970f;
    }
    for (int i = 0; i < VARS; i++) {
        vdev_tensor_free(v[i]);
        vdev_tensor_free(g[i]);
    }
    bad += vdev_device_pop() != VDEV_OK;
    atomic_fetch_add(&failures, bad);
    atomic_fetch_add(&appliers_done, 1);
    return NULL;
}

/* Reads the iteration count until both appliers are done: it never goes
 * back. */
static void *read_count(void *arg)
{
    (void)arg;
    int64_t last = 0, n;
    while (atomic_load(&appliers_done) < 2) {
        if (vdev_optimizer_get_iterations(opt, &n) != VDEV_OK || n < last)
            atomic_fetch_add(&failures, 1);
        last = n;
    }
    return NULL;
}

/* Switches clipping and momentum on and off until both appliers are done. */
static void *toggle_settings(void *arg)
{
    (void)arg;
    for (int k = 0; atomic_load(&appliers_done) < 2; k ^= 1)
        if (vdev_optimizer_set_clipping(opt, k ? 100.0f : 0.0f, 0.0f, 0.0f) != VDEV_OK ||
            vdev_sgd_set(opt, 0.1f, 0.5f) != VDEV_OK ||
            vdev_sgd_set_nesterov(opt, false) != VDEV_OK ||
            vdev_optimizer_set_weight_decay(opt, 0.0f) != VDEV_OK)
            atomic_fetch_add(&failures, 1);
    return NULL;
}

static void shared_optimizer(void)
{
    check_fresh("3x16GiB");
    CHECK_OK(vdev_init());
    for (int r = 0; r < ROUNDS; r++) {
        opt = vdev_sgd_new(0.1f, 0.5f);
        CHECK(opt != NULL);
        atomic_store(&appliers_done, 0);
        pthread_t t[4];
        CHECK(pthread_create(&t[0], NULL, update, "GPU:1") == 0);
        CHECK(pthread_create(&t[1], NULL, update, "GPU:2") == 0);
        CHECK(pthread_create(&t[2], NULL, read_count, NULL) == 0);
        /* clipping at 100 leaves a gradient of norm 0.5 * sqrt(8) as it is */
        CHECK(pthread_create(&t[3], NULL, toggle_settings, NULL) == 0);
        for (int i = 0; i < 4; i++)
            pthread_join(t[i], NULL);
        int64_t n = -1;
        CHECK_OK(vdev_optimizer_get_iterations(opt, &n));
        CHECK(n == 2 * STEPS);
        vdev_optimizer_free(opt);
    }
    CHECK(atomic_load(&failures) == 0);
    vdev_shutdown();
}

/* ---- a pressure callback inside the optimizer's own update ---- */

static vdev_tensor_t *var;
static atomic_int calls;
static enum vdev_status cb_status, cb_set_status[2];
static int cb_n;
static char cb_msg[256], cb_set_msg[2][256];

static void on_pressure(const char *device, enum vdev_pressure what, uint64_t bytes, void *user)
{
    (void)device, (void)bytes, (void)user;
    if (what != VDEV_PRESSURE_CARD_FULL || atomic_fetch_add(&calls, 1))
        return;
    vdev_tensor_t *slot = NULL;
    cb_n = vdev_optimizer_slots(opt, var, &slot, NULL, 1);
    cb_status = vdev_last_status();
    snprintf(cb_msg, sizeof cb_msg, "%s", vdev_last_error());
    cb_set_status[0] = vdev_optimizer_set_clipping(opt, 1.0f, 0.0f, 0.0f);
    snprintf(cb_set_msg[0], sizeof cb_set_msg[0], "%s", vdev_last_error());
    cb_set_status[1] = vdev_sgd_set(opt, 0.2f, 0.0f);
    snprintf(cb_set_msg[1], sizeof cb_set_msg[1], "%s", vdev_last_error());
}

static void callback_inside_update(void)
{
    check_fresh("1x64MiB");
    setenv("VDEV_LOGICAL_DEVICES", "0:..,..", 1); /* GPU:0 and GPU:1 share the card */
    CHECK_OK(vdev_init());
    static const int64_t big[1] = {(3 << 20) / 8}, mib[1] = {1 << 18};
    CHECK_OK(vdev_device_push("GPU:0"));
    var = vdev_variable(vdev_tensor_fill(big, 1, VDEV_F32, 1.0));
    vdev_tensor_t *grad = vdev_tensor_fill(big, 1, VDEV_F32, 0.5);
    CHECK_OK(vdev_device_pop());
    CHECK(var && grad);
    /* GPU:1 holds 16 MiB live, GPU:0 the rest of the card: GPU:0 is under its
     * ceiling but the card is full, and GPU:1 has nothing to lend */
    vdev_tensor_t *held[80];
    int n = 0;
    CHECK_OK(vdev_device_push("GPU:1"));
    while (n < 16 && (held[n] = vdev_tensor_fill(mib, 1, VDEV_F32, 0.0)))
        n++;
    CHECK_OK(vdev_device_pop());
    CHECK_OK(vdev_device_push("GPU:0"));
    while (n < 80 && (held[n] = vdev_tensor_fill(mib, 1, VDEV_F32, 0.0)))
        n++;
    CHECK_OK(vdev_device_pop());
    CHECK(n > 16 && n < 80);
    opt = vdev_sgd_new(0.1f, 0.5f);
    CHECK_OK(vdev_memory_set_pressure_callback("GPU:0", on_pressure, NULL));
    CHECK_STATUS(vdev_optimizer_apply(opt, &var, &grad, 1), VDEV_ERR_OOM);
    CHECK(atomic_load(&calls) >= 1);
    CHECK(cb_n == -1);
    CHECK(cb_status == VDEV_ERR_INVALID_ARG);
    CHECK_STR(cb_msg, "vdev_optimizer_slots: called during an update by the same optimizer on "
                      "this thread (a pressure callback)");
    CHECK(cb_set_status[0] == VDEV_ERR_INVALID_ARG && cb_set_status[1] == VDEV_ERR_INVALID_ARG);
    CHECK_STR(cb_set_msg[0], "vdev_optimizer_set_clipping: called during an update by the same "
                             "optimizer on this thread (a pressure callback)");
    CHECK_STR(cb_set_msg[1], "vdev_sgd_set: called during an update by the same optimizer on "
                             "this thread (a pressure callback)");
    /* outside the update the slots are the optimizer's as before */
    while (n > 0)
        vdev_tensor_free(held[--n]);
    vdev_tensor_t *slot = NULL;
    CHECK(vdev_optimizer_slots(opt, var, &slot, NULL, 1) == 1 && slot);
    CHECK_OK(vdev_optimizer_apply(opt, &var, &grad, 1));
    vdev_optimizer_free(opt);
    vdev_tensor_free(grad);
    vdev_tensor_free(var);
    vdev_shutdown();
}

int main(void)
{
    shared_optimizer();
    callback_inside_update();
    return check_done();
}
