/* test_tape_watch.c — a tape that watches only the variables it is given
 * (vdev_tape_begin_ex with VDEV_TAPE_WATCH_EXPLICIT, vdev_tape_watch: as
 * TensorFlow's watch_accessed_variables=False). Ops before a variable's
 * watch do not count for it; ops on unwatched variables alone are not
 * recorded, so what they compute does not reach them; an unwatched
 * variable asked for is unconnected (NULL, or zeros), even the loss itself;
 * a variable copied to another device counts through its copy only when
 * watched; watching twice, or on a tape that watches everything, is a no-op;
 * the errors (unknown flags, a tensor that is not a variable, NULL, an ended
 * tape, a stopped one, another thread) with their exact messages; the tape
 * holds a watched variable freed by the caller until it ends; the list of
 * what a tape watches (vdev_tape_watched_variables). On the cpu
 * backend and on two simulated GPUs. */
#define _GNU_SOURCE
#include "check.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

static float value(vdev_tensor_t *t)
{
    float v = -1.0f;
    if (!t || vdev_tensor_to_host(t, &v, sizeof v) != VDEV_OK)
        return -2.0f;
    return v;
}

static vdev_tensor_t *scalar_var(float v)
{
    int64_t s[1] = {1};
    return vdev_variable(vdev_tensor_from_host(&v, s, 1, VDEV_F32));
}

/* x = 3, y = 5: loss = x*x (before x's watch) + x*y + y*y.
 * Watching x after the first op: d/dx = y = 5 (x*x is a constant), y
 * unwatched: NULL with VDEV_UNCONNECTED_NONE, zeros with _ZERO. */
static void test_watch_order(void)
{
    vdev_scope_begin();
    vdev_tensor_t *x = scalar_var(3.0f), *y = scalar_var(5.0f);
    vdev_tape_t *t = vdev_tape_begin_ex(VDEV_TAPE_WATCH_EXPLICIT);
    CHECK(t != NULL);
    vdev_tensor_t *a = vdev_mul(x, x);
    CHECK_OK(vdev_tape_watch(t, x));
    CHECK_OK(vdev_tape_watch(t, x)); /* twice: a no-op */
    vdev_tensor_t *loss = vdev_add(vdev_add(a, vdev_mul(x, y)), vdev_mul(y, y));
    vdev_tensor_t *vars[2] = {x, y}, *g[2] = {NULL, NULL};
    CHECK_OK(vdev_tape_gradient_ex(t, loss, vars, 2, g, VDEV_UNCONNECTED_NONE));
    CHECK(value(g[0]) == 5.0f);
    CHECK(g[1] == NULL);
    CHECK_OK(vdev_tape_gradient_ex(t, loss, vars, 2, g, VDEV_UNCONNECTED_ZERO));
    CHECK(value(g[0]) == 5.0f);
    CHECK(value(g[1]) == 0.0f);
    /* y*y alone was not recorded: it does not reach x either */
    vdev_tensor_t *gx = x;
    CHECK_OK(vdev_tape_gradient_ex(t, vdev_mul(y, y), &x, 1, &gx, VDEV_UNCONNECTED_NONE));
    CHECK(gx == NULL);
    /* an unwatched variable as the loss itself: unconnected */
    vdev_tensor_t *gy = x;
    CHECK_OK(vdev_tape_gradient_ex(t, y, &y, 1, &gy, VDEV_UNCONNECTED_NONE));
    CHECK(gy == NULL);
    vdev_tape_end(t);
    vdev_scope_end();
    vdev_tensor_free(x);
    vdev_tensor_free(y);
}

/* The default tape watches every variable: the same loss reaches both, and
 * vdev_tape_watch is a no-op. */
static void test_default_watches_all(void)
{
    vdev_scope_begin();
    vdev_tensor_t *x = scalar_var(3.0f), *y = scalar_var(5.0f);
    vdev_tape_t *t = vdev_tape_begin();
    vdev_tensor_t *a = vdev_mul(x, x);
    CHECK_OK(vdev_tape_watch(t, x));
    vdev_tensor_t *loss = vdev_add(vdev_add(a, vdev_mul(x, y)), vdev_mul(y, y));
    vdev_tensor_t *vars[2] = {x, y}, *g[2] = {NULL, NULL};
    CHECK_OK(vdev_tape_gradient(t, loss, vars, 2, g));
    CHECK(value(g[0]) == 11.0f); /* 2x + y */
    CHECK(value(g[1]) == 13.0f); /* x + 2y */
    vdev_tape_end(t);
    vdev_scope_end();
    vdev_tensor_free(x);
    vdev_tensor_free(y);
}

/* A watched variable used on another device reaches its gradient through
 * the copy; an unwatched one's copy is not recorded. */
static void test_copies(void)
{
    vdev_scope_begin();
    vdev_tensor_t *x = NULL, *y = NULL;
    CHECK_OK(vdev_device_push("GPU:0"));
    x = scalar_var(3.0f);
    y = scalar_var(5.0f);
    vdev_device_pop();
    vdev_tape_t *t = vdev_tape_begin_ex(VDEV_TAPE_WATCH_EXPLICIT);
    CHECK_OK(vdev_tape_watch(t, x));
    vdev_tensor_t *cx = vdev_tensor_to(x, "GPU:1"), *cy = vdev_tensor_to(y, "GPU:1");
    vdev_tensor_t *loss = vdev_mul(cx, cy);
    vdev_tensor_t *vars[2] = {x, y}, *g[2] = {NULL, NULL};
    CHECK_OK(vdev_tape_gradient_ex(t, loss, vars, 2, g, VDEV_UNCONNECTED_NONE));
    CHECK(value(g[0]) == 5.0f);
    CHECK_STR(vdev_tensor_device(g[0]), "/device:GPU:0");
    CHECK(g[1] == NULL);
    vdev_tape_end(t);
    vdev_scope_end();
    vdev_tensor_free(x);
    vdev_tensor_free(y);
}

static vdev_tape_t *shared_tape;
static vdev_tensor_t *shared_var;
static enum vdev_status other_status;
static char other_msg[200];

static int other_count;

static void *list_elsewhere(void *arg)
{
    (void)arg;
    vdev_tensor_t *out[2];
    other_count = vdev_tape_watched_variables(shared_tape, out, 2);
    snprintf(other_msg, sizeof other_msg, "%s", vdev_last_error());
    return NULL;
}

static void *watch_elsewhere(void *arg)
{
    (void)arg;
    other_status = vdev_tape_watch(shared_tape, shared_var);
    snprintf(other_msg, sizeof other_msg, "%s", vdev_last_error());
    return NULL;
}

static void test_errors(void)
{
    vdev_clear_error();
    CHECK(vdev_tape_begin_ex(6) == NULL);
    CHECK_STR(vdev_last_error(), "vdev_tape_begin_ex: unknown flags 0x6");
    vdev_scope_begin();
    vdev_tensor_t *x = scalar_var(2.0f);
    int64_t s[1] = {1};
    vdev_tensor_t *c = vdev_tensor_ones(s, 1, VDEV_F32);
    CHECK_ERR(vdev_tape_watch(NULL, x), VDEV_ERR_INVALID_ARG, "vdev_tape_watch: tape is NULL");
    vdev_tape_t *t = vdev_tape_begin_ex(VDEV_TAPE_WATCH_EXPLICIT);
    CHECK_ERR(vdev_tape_watch(t, c), VDEV_ERR_INVALID_ARG,
              "vdev_tape_watch: not a variable (the tape differentiates with respect to "
              "variables; a tensor it computes from watched ones needs no watch)");
    CHECK_STATUS(vdev_tape_watch(t, NULL), VDEV_ERR_INVALID_ARG);
    shared_tape = t;
    shared_var = x;
    pthread_t th;
    CHECK(pthread_create(&th, NULL, watch_elsewhere, NULL) == 0);
    pthread_join(th, NULL);
    CHECK(other_status == VDEV_ERR_INVALID_ARG);
    CHECK_STR(other_msg, "vdev_tape_watch: the tape is recording on another thread; only that "
                         "thread may watch variables for it");
    /* paused: a watch still counts from the resume on */
    CHECK_OK(vdev_tape_pause(t));
    CHECK_OK(vdev_tape_watch(t, x));
    CHECK_OK(vdev_tape_resume(t));
    vdev_tensor_t *loss = vdev_mul(x, x), *g = NULL;
    CHECK_OK(vdev_tape_gradient(t, loss, &x, 1, &g));
    CHECK(value(g) == 4.0f);
    CHECK_ERR(vdev_tape_watch(t, x), VDEV_ERR_INVALID_ARG,
              "vdev_tape_watch: the tape is not recording (a gradient call stopped it, or its "
              "thread ended)");
    vdev_tape_end(t);
    CHECK_ERR(vdev_tape_watch(t, x), VDEV_ERR_INVALID_ARG,
              "vdev_tape_watch: not a live tape (ended already, or not a tape)");
    /* the tape holds a watched variable the caller frees */
    t = vdev_tape_begin_ex(VDEV_TAPE_WATCH_EXPLICIT);
    vdev_tensor_t *w = scalar_var(7.0f);
    CHECK_OK(vdev_tape_watch(t, w));
    vdev_tensor_t *l2 = vdev_mul(w, w);
    vdev_tensor_free(w);
    vdev_tensor_t *none = NULL;
    CHECK_OK(vdev_tape_gradient(t, l2, NULL, 0, &none));
    vdev_tape_end(t);
    vdev_scope_end();
    vdev_tensor_free(x);
}

/* vdev_tape_watched_variables: the explicit tape's watched variables in
 * order of their watch; the default tape's variables in order of their
 * first recorded read (each once; a plain tensor never); a variable the
 * caller freed is left out; a short out gets the first cap and the count;
 * bad arguments and another thread are refused. */
static void test_watched_variables(void)
{
    vdev_scope_begin();
    vdev_tensor_t *x = scalar_var(1.0f), *y = scalar_var(2.0f), *z = scalar_var(3.0f);
    int64_t s[1] = {1};
    vdev_tensor_t *c = vdev_tensor_ones(s, 1, VDEV_F32), *out[4] = {NULL, NULL, NULL, NULL};
    vdev_tape_t *t = vdev_tape_begin();
    CHECK(vdev_tape_watched_variables(t, out, 4) == 0);
    vdev_mul(y, c);
    vdev_add(vdev_mul(x, y), vdev_mul(c, x));
    CHECK(vdev_tape_watched_variables(t, out, 4) == 2);
    CHECK(out[0] == y && out[1] == x);
    out[0] = NULL;
    CHECK(vdev_tape_watched_variables(t, out, 1) == 2); /* the count, the first one */
    CHECK(out[0] == y && out[1] == x);
    CHECK(vdev_tape_watched_variables(t, NULL, 0) == 2);
    vdev_clear_error();
    CHECK(vdev_tape_watched_variables(t, NULL, 1) == -1);
    CHECK_STR(vdev_last_error(), "vdev_tape_watched_variables: bad arguments (out NULL, cap 1)");
    CHECK(vdev_tape_watched_variables(t, out, -1) == -1);
    shared_tape = t;
    pthread_t th;
    CHECK(pthread_create(&th, NULL, list_elsewhere, NULL) == 0);
    pthread_join(th, NULL);
    CHECK(other_count == -1);
    CHECK_STR(other_msg, "vdev_tape_watched_variables: the tape is recording on another thread; "
                         "only that thread may list what it watches");
    vdev_tensor_free(y); /* freed by the caller: left out */
    CHECK(vdev_tape_watched_variables(t, out, 4) == 1);
    CHECK(out[0] == x);
    vdev_tape_end(t);
    vdev_clear_error();
    CHECK(vdev_tape_watched_variables(t, out, 4) == -1);
    CHECK_STR(vdev_last_error(), "vdev_tape_watched_variables: not a live tape (ended already, or "
                                 "not a tape)");
    /* explicit: the watched ones in order of their watch, read or not */
    t = vdev_tape_begin_ex(VDEV_TAPE_WATCH_EXPLICIT);
    vdev_mul(x, x);
    CHECK_OK(vdev_tape_watch(t, z));
    CHECK_OK(vdev_tape_watch(t, x));
    CHECK(vdev_tape_watched_variables(t, out, 4) == 2);
    CHECK(out[0] == z && out[1] == x);
    vdev_tape_end(t);
    vdev_scope_end();
    vdev_tensor_free(x);
    vdev_tensor_free(z);
}

int main(void)
{
    check_fresh(NULL);
    CHECK_OK(vdev_init());
    test_watch_order();
    test_default_watches_all();
    test_errors();
    test_watched_variables();
    CHECK_NO_LEAK("CPU:0");
    vdev_shutdown();

    check_fresh("2x1GiB");
    CHECK_OK(vdev_init());
    test_copies();
    CHECK_NO_LEAK("GPU:0");
    CHECK_NO_LEAK("GPU:1");
    vdev_shutdown();
    return check_done();
}
