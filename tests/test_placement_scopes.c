/* test_placement_scopes.c — device scopes resolved as TensorFlow resolves
 * them: a scope that soft placement opened on a stand-in for a missing device
 * follows the soft placement switch at each op (turned off, the next op fails
 * with TensorFlow's "unknown device"); a name that gives no device ("", a job,
 * replica or task alone) keeps the enclosing scope, and outside any scope
 * adds no constraint (its ops are placed as unscoped ops); and
 * threads that toggle soft placement while others run ops in such a scope;
 * and the scopes vdev opens itself (a gradient's ops, an optimizer's update)
 * inside the 64 a caller may open. */
#define _GNU_SOURCE
#include "check.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static const int64_t SHAPE[1] = {4};

#define LONG "/job:localhost/replica:0/task:0"
#define GPU7_GONE                                                                                  \
    LONG "/device:GPU:7 unknown device (there are 2 logical GPUs) (the device scope was opened "   \
         "under soft device placement, which is now off)"

static void test_soft_off_in_open_scope(void)
{
    check_fresh("2x1GiB");
    vdev_config_set_soft_device_placement(true);
    check_capture_begin();
    CHECK_OK(vdev_device_push("GPU:7"));
    free(check_capture_end()); /* the soft placement warning: test_soft_placement */
    vdev_tensor_t *a = vdev_tensor_ones(SHAPE, 1, VDEV_F32);
    CHECK_STR(vdev_tensor_device(a), "/device:GPU:0");
    vdev_config_set_soft_device_placement(false);
    /* TensorFlow resolves a scope's device per op: soft placement off, the
     * next op in the scope fails, and so does a new tensor. */
    CHECK(vdev_relu(a) == NULL);
    CHECK_EQ_U64((uint64_t)(vdev_last_status()), (uint64_t)(VDEV_ERR_NOT_FOUND));
    CHECK_STR(vdev_last_error(), GPU7_GONE);
    CHECK(vdev_tensor_ones(SHAPE, 1, VDEV_F32) == NULL);
    CHECK_STR(vdev_last_error(), GPU7_GONE);
    /* the scope still names what it asked for */
    CHECK_STR(vdev_device_current(), LONG "/device:GPU:7");
    /* a scope of no device inside it inherits the failure */
    CHECK_OK(vdev_device_push("/job:localhost"));
    CHECK(vdev_relu(a) == NULL);
    CHECK_STR(vdev_last_error(), GPU7_GONE);
    CHECK_OK(vdev_device_pop());
    /* an explicit device inside it is unaffected */
    CHECK_OK(vdev_device_push("GPU:1"));
    vdev_tensor_t *b = vdev_relu(a);
    CHECK_STR(vdev_tensor_device(b), "/device:GPU:1");
    CHECK_OK(vdev_device_pop());
    /* soft placement on again: GPU:0 again, no new warning */
    vdev_config_set_soft_device_placement(true);
    check_capture_begin();
    vdev_tensor_t *c = vdev_relu(a);
    char *err = check_capture_end();
    CHECK_STR(err, "");
    free(err);
    CHECK_STR(vdev_tensor_device(c), "/device:GPU:0");
    CHECK_OK(vdev_device_pop());
    /* outside the scope, ops run as unscoped ops do, soft placement or not */
    vdev_config_set_soft_device_placement(false);
    vdev_tensor_t *d = vdev_relu(a);
    CHECK_STR(vdev_tensor_device(d), "/device:GPU:0");
    vdev_tensor_free(a);
    vdev_tensor_free(b);
    vdev_tensor_free(c);
    vdev_tensor_free(d);
}

/* A scope on the device it named never depends on soft placement. */
static void test_real_device_ignores_soft(void)
{
    check_fresh("2x1GiB");
    vdev_config_set_soft_device_placement(true);
    CHECK_OK(vdev_device_push("GPU:1"));
    vdev_config_set_soft_device_placement(false);
    vdev_tensor_t *a = vdev_tensor_ones(SHAPE, 1, VDEV_F32);
    CHECK_STR(vdev_tensor_device(a), "/device:GPU:1");
    CHECK_OK(vdev_device_pop());
    vdev_tensor_free(a);
}

static void test_names_without_device(void)
{
    check_fresh("2x1GiB");
    /* inside a scope: the enclosing scope's device */
    CHECK_OK(vdev_device_push("GPU:1"));
    const char *keep[] = {"", "/", "/job:localhost", "/job:localhost/replica:0/task:0",
                          "/task:0/", "/job:*/replica:*"};
    for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++) {
        CHECK_OK(vdev_device_push(keep[i]));
        CHECK_STR(vdev_device_current(), LONG "/device:GPU:1");
        vdev_tensor_t *t = vdev_tensor_ones(SHAPE, 1, VDEV_F32);
        CHECK_STR(vdev_tensor_device(t), "/device:GPU:1");
        vdev_tensor_free(t);
        CHECK_OK(vdev_device_pop());
    }
    /* a type alone takes the index of the enclosing (merged) scope */
    CHECK_OK(vdev_device_push("/job:localhost"));
    CHECK_OK(vdev_device_push("GPU"));
    CHECK_STR(vdev_device_current(), LONG "/device:GPU:1");
    CHECK_OK(vdev_device_pop());
    CHECK_OK(vdev_device_pop());
    CHECK_OK(vdev_device_pop());
    CHECK(vdev_device_current() == NULL);
    /* outside any scope: no constraint; ops are placed as unscoped ops */
    vdev_tensor_t *g1 = NULL;
    CHECK_OK(vdev_device_push("GPU:1"));
    g1 = vdev_tensor_ones(SHAPE, 1, VDEV_F32);
    CHECK_OK(vdev_device_pop());
    CHECK_OK(vdev_device_push("/job:localhost"));
    CHECK(vdev_device_current() == NULL);
    vdev_tensor_t *t = vdev_tensor_ones(SHAPE, 1, VDEV_F32);
    CHECK_STR(vdev_tensor_device(t), "/device:GPU:0");
    vdev_tensor_t *r = vdev_relu(g1); /* follows its input */
    CHECK_STR(vdev_tensor_device(r), "/device:GPU:1");
    CHECK_OK(vdev_device_push("CPU")); /* a type alone: index 0 */
    CHECK_STR(vdev_device_current(), LONG "/device:CPU:0");
    CHECK_OK(vdev_device_pop());
    CHECK_STATUS(vdev_device_push("GPU"), VDEV_OK);
    CHECK_STR(vdev_device_current(), LONG "/device:GPU:0");
    CHECK_OK(vdev_device_pop());
    /* a missing device's message says nothing of an enclosing scope */
    CHECK_STATUS(vdev_device_push("CPU:3"), VDEV_ERR_NOT_FOUND);
    CHECK_STR(vdev_last_error(), LONG "/device:CPU:3 unknown device (there is 1 CPU device)");
    vdev_tensor_free(t);
    vdev_tensor_free(r);
    vdev_tensor_free(g1);
    CHECK_OK(vdev_device_pop());
    CHECK(vdev_device_current() == NULL);
    /* another job, or a malformed part: the name itself in the message */
    CHECK_STATUS(vdev_device_push("/job:worker"), VDEV_ERR_NOT_FOUND);
    CHECK_STR(vdev_last_error(), "/job:worker unknown device: only " LONG " is local");
    CHECK_STATUS(vdev_device_push("/job:localhost/replica:x"), VDEV_ERR_INVALID_ARG);
    CHECK_STR(vdev_last_error(), "Unknown attribute 'replica' is encountered while parsing the "
                                 "device spec: '/job:localhost/replica:x'.");
    CHECK(vdev_device_current() == NULL);
}

/* ---- threads: soft placement toggled under ops in a soft-placed scope ---- */

static atomic_int stop;

static void *toggler(void *arg)
{
    (void)arg;
    for (int i = 0; !atomic_load(&stop); i++)
        vdev_config_set_soft_device_placement(i & 1);
    return NULL;
}

static void *worker(void *arg)
{
    int *bad = arg;
    vdev_config_set_soft_device_placement(true); /* the push needs it on */
    while (vdev_device_push("GPU:5") != VDEV_OK)
        vdev_config_set_soft_device_placement(true);
    vdev_tensor_t *a = NULL;
    for (int i = 0; i < 2000; i++) {
        vdev_tensor_t *t = vdev_tensor_ones(SHAPE, 1, VDEV_F32);
        /* each op either ran on GPU:0 or failed with the scope's error */
        if (t)
            *bad += strcmp(vdev_tensor_device(t), "/device:GPU:0") != 0;
        else
            *bad += strstr(vdev_last_error(), "device:GPU:5 unknown device") == NULL;
        vdev_tensor_free(a);
        a = t;
    }
    vdev_tensor_free(a);
    vdev_device_pop();
    return NULL;
}

static void test_threads(void)
{
    check_fresh("1x1GiB");
    check_capture_begin();
    pthread_t tg, tw[2];
    int bad[2] = {0, 0};
    atomic_store(&stop, 0);
    CHECK_EQ_U64((uint64_t)(pthread_create(&tg, NULL, toggler, NULL)), (uint64_t)(0));
    for (int i = 0; i < 2; i++)
        CHECK_EQ_U64((uint64_t)(pthread_create(&tw[i], NULL, worker, &bad[i])), (uint64_t)(0));
    for (int i = 0; i < 2; i++)
        pthread_join(tw[i], NULL);
    atomic_store(&stop, 1);
    pthread_join(tg, NULL);
    free(check_capture_end());
    CHECK_EQ_U64((uint64_t)(bad[0] + bad[1]), (uint64_t)(0));
}

/* With the 64 device scopes a caller may open, the 65th is the nesting
 * error, and what pushes a scope of its own (each gradient op runs in one on
 * its forward op's device, an optimizer's new slots in one on the variable's)
 * still works: it used to stop the process on an assertion. */
static void test_internal_scopes_at_depth_64(void)
{
    check_fresh("1x1GiB");
    vdev_tensor_t *v = vdev_variable(vdev_tensor_fill(SHAPE, 1, VDEV_F32, 3.0));
    for (int d = 0; d < 64; d++)
        CHECK_OK(vdev_device_push("/device:CPU:0"));
    CHECK_STATUS(vdev_device_push("/device:CPU:0"), VDEV_ERR_INVALID_ARG);
    CHECK_STR(vdev_last_error(), "device scopes nested deeper than 64");
    CHECK_STATUS(vdev_device_push(NULL), VDEV_ERR_INVALID_ARG);
    CHECK_STATUS(vdev_device_push(""), VDEV_ERR_INVALID_ARG);
    vdev_tape_t *t = vdev_tape_begin();
    vdev_tensor_t *y = vdev_mul(v, v), *g = NULL;
    CHECK_OK(vdev_tape_gradient(t, y, &v, 1, &g));
    vdev_tape_end(t);
    float h[4];
    CHECK_OK(vdev_tensor_to_host(g, h, sizeof h));
    CHECK(h[0] == 6.0f && h[3] == 6.0f);
    vdev_optimizer_t *opt = vdev_adam_new(0.1f, 0.9f, 0.999f, 1e-7f);
    CHECK_OK(vdev_optimizer_apply(opt, &v, &g, 1));
    vdev_optimizer_free(opt);
    vdev_tensor_free(g);
    vdev_tensor_free(y);
    for (int d = 0; d < 64; d++)
        CHECK_OK(vdev_device_pop());
    CHECK_STATUS(vdev_device_pop(), VDEV_ERR_INVALID_ARG);
    vdev_tensor_free(v);
}

int main(void)
{
    test_soft_off_in_open_scope();
    test_real_device_ignores_soft();
    test_names_without_device();
    test_threads();
    test_internal_scopes_at_depth_64();
    check_fresh(NULL);
    return check_done();
}
