/* test_tape_pause.c — vdev_tape_pause and vdev_tape_resume (TensorFlow's
 * GradientTape.stop_recording): ops run while a tape is paused are not
 * recorded and ops after the resume are; a gradient call on a paused tape
 * leaves it paused, so it resumes and records on; every misuse (NULL, an
 * ended tape, pausing twice, resuming a tape that is not paused, a tape a
 * gradient call stopped, another thread, a second tape begun while one is
 * paused) fails with its exact message and leaves the tape as it was; a
 * thread that exits with its tape paused stops it, so another thread can
 * end it. On the cpu backend and on a simulated GPU. */
#define _GNU_SOURCE
#include "check.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

static float value(vdev_tensor_t *t)
{
    float v = -1.0f;
    if (vdev_tensor_to_host(t, &v, sizeof v) != VDEV_OK)
        return -2.0f;
    return v;
}

static vdev_tensor_t *scalar_var(float v)
{
    int64_t s[1] = {1};
    return vdev_variable(vdev_tensor_from_host(&v, s, 1, VDEV_F32));
}

/* loss = x*x (recorded) + y*y (paused) + x*y (after the resume):
 * d/dx = 2x + y, d/dy = x (the paused y*y adds nothing). */
static void test_pause_records_nothing(const char *dev)
{
    CHECK_OK(vdev_device_push(dev));
    vdev_scope_begin();
    vdev_tensor_t *x = scalar_var(3.0f), *y = scalar_var(5.0f);
    vdev_tape_t *t = vdev_tape_begin();
    vdev_tensor_t *a = vdev_mul(x, x);
    CHECK_OK(vdev_tape_pause(t));
    vdev_tensor_t *b = vdev_mul(y, y);
    CHECK_OK(vdev_tape_resume(t));
    vdev_tensor_t *loss = vdev_add(vdev_add(a, b), vdev_mul(x, y));
    vdev_tensor_t *vars[2] = {x, y}, *g[2] = {NULL, NULL};
    CHECK_OK(vdev_tape_gradient(t, loss, vars, 2, g));
    CHECK(value(g[0]) == 11.0f);
    CHECK(value(g[1]) == 3.0f);
    /* b alone was made while paused: the tape does not reach y through it */
    vdev_tensor_t *gy = y;
    CHECK_OK(vdev_tape_gradient_ex(t, b, &y, 1, &gy, VDEV_UNCONNECTED_NONE));
    CHECK(gy == NULL);
    vdev_tape_end(t);
    vdev_scope_end();
    vdev_tensor_free(x);
    vdev_tensor_free(y);
    vdev_device_pop();
}

/* A gradient call on a paused tape: the tape stays paused (the gradient's
 * ops are not recorded), resumes, and records on. */
static void test_gradient_while_paused(void)
{
    vdev_scope_begin();
    vdev_tensor_t *x = scalar_var(2.0f);
    vdev_tape_t *t = vdev_tape_begin();
    vdev_tensor_t *a = vdev_mul(x, x);
    CHECK_OK(vdev_tape_pause(t));
    vdev_tensor_t *g = NULL;
    CHECK_OK(vdev_tape_gradient(t, a, &x, 1, &g));
    CHECK(value(g) == 4.0f);
    CHECK_ERR(vdev_tape_pause(t), VDEV_ERR_INVALID_ARG,
              "vdev_tape_pause: the tape is paused already");
    CHECK_OK(vdev_tape_resume(t));
    vdev_tensor_t *c = vdev_mul(a, x); /* x^3, recorded after the resume */
    CHECK_OK(vdev_tape_gradient(t, c, &x, 1, &g));
    CHECK(value(g) == 12.0f);
    /* that call stopped the tape (it was recording): no pause now */
    CHECK_ERR(vdev_tape_pause(t), VDEV_ERR_INVALID_ARG,
              "vdev_tape_pause: the tape is not recording (a gradient call stopped it, or its "
              "thread ended)");
    CHECK_ERR(vdev_tape_resume(t), VDEV_ERR_INVALID_ARG,
              "vdev_tape_resume: the tape is not recording (a gradient call stopped it, or its "
              "thread ended)");
    vdev_tape_end(t);
    vdev_scope_end();
    vdev_tensor_free(x);
}

static vdev_tape_t *shared_tape;
static enum vdev_status other_status[2]; /* written by the thread, read after the join */
static char other_msg[2][200];

static void *other_thread(void *arg)
{
    (void)arg;
    other_status[0] = vdev_tape_pause(shared_tape);
    snprintf(other_msg[0], sizeof other_msg[0], "%s", vdev_last_error());
    other_status[1] = vdev_tape_resume(shared_tape);
    snprintf(other_msg[1], sizeof other_msg[1], "%s", vdev_last_error());
    return NULL;
}

static vdev_tape_t *exiting_tape;

static void *pause_and_exit(void *arg)
{
    (void)arg;
    exiting_tape = vdev_tape_begin();
    if (exiting_tape)
        vdev_tape_pause(exiting_tape);
    return NULL;
}

static void test_misuse(void)
{
    CHECK_ERR(vdev_tape_pause(NULL), VDEV_ERR_INVALID_ARG, "vdev_tape_pause: tape is NULL");
    CHECK_ERR(vdev_tape_resume(NULL), VDEV_ERR_INVALID_ARG, "vdev_tape_resume: tape is NULL");
    vdev_tape_t *t = vdev_tape_begin();
    CHECK_ERR(vdev_tape_resume(t), VDEV_ERR_INVALID_ARG,
              "vdev_tape_resume: the tape is not paused");
    CHECK_OK(vdev_tape_pause(t));
    /* no second tape while one is paused */
    vdev_clear_error();
    CHECK(vdev_tape_begin() == NULL);
    CHECK_STR(vdev_last_error(), "a tape is paused on this thread (vdev_tape_pause): one tape "
                                 "records on a thread at a time, paused or not");
    /* another thread may neither resume nor pause it */
    shared_tape = t;
    pthread_t th;
    CHECK(pthread_create(&th, NULL, other_thread, NULL) == 0);
    pthread_join(th, NULL);
    CHECK(other_status[0] == VDEV_ERR_INVALID_ARG);
    CHECK_STR(other_msg[0], "vdev_tape_pause: the tape is recording on another thread; only that "
                            "thread may pause or resume it");
    CHECK(other_status[1] == VDEV_ERR_INVALID_ARG);
    CHECK_STR(other_msg[1], "vdev_tape_resume: the tape is recording on another thread; only "
                            "that thread may pause or resume it");
    /* still paused here, and resumes here */
    CHECK_OK(vdev_tape_resume(t));
    vdev_tape_end(t);
    CHECK_ERR(vdev_tape_pause(t), VDEV_ERR_INVALID_ARG,
              "vdev_tape_pause: not a live tape (ended already, or not a tape)");
    CHECK_ERR(vdev_tape_resume(t), VDEV_ERR_INVALID_ARG,
              "vdev_tape_resume: not a live tape (ended already, or not a tape)");
    /* ending a paused tape frees the thread for a new one */
    t = vdev_tape_begin();
    CHECK_OK(vdev_tape_pause(t));
    vdev_tape_end(t);
    t = vdev_tape_begin();
    CHECK(t != NULL);
    vdev_tape_end(t);
    /* a thread that exits with its tape paused stops it: ended here */
    CHECK(pthread_create(&th, NULL, pause_and_exit, NULL) == 0);
    pthread_join(th, NULL);
    CHECK(exiting_tape != NULL);
    vdev_clear_error();
    vdev_tape_end(exiting_tape);
    CHECK(vdev_last_status() == VDEV_OK);
}

int main(void)
{
    check_fresh(NULL);
    CHECK_OK(vdev_init());
    test_pause_records_nothing("CPU:0");
    test_gradient_while_paused();
    test_misuse();
    vdev_shutdown();

    check_fresh("1x1GiB");
    CHECK_OK(vdev_init());
    test_pause_records_nothing("GPU:0");
    vdev_shutdown();
    return check_done();
}
