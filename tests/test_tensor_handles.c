/* test_tensor_handles.c — checked handles: every use of a freed, stale,
 * foreign or garbage handle of a tensor, tape, layer, model or optimizer is
 * VDEV_ERR_INVALID_ARG with its message and touches no freed memory (run
 * under ASan to see that); tensors of a runtime that was shut down; scopes
 * across threads and at thread exit; scope nesting; handle allocation under
 * fault injection; and threads making and freeing tensors at once (run under
 * TSan).
 *
 * Each case checks the exact status and message, and that memory in use
 * and the number of live tensor handles are back where they started. */
#define _GNU_SOURCE
#include "check.h"
#include "base/handles.h"
#include "tensor/tensor.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define NOT_LIVE "not a live tensor (freed already, or not a tensor)"
#define SHUT "belongs to a runtime that was shut down"

static uint64_t in_use(const char *dev)
{
    struct vdev_memory_info mi;
    CHECK_OK(vdev_memory_info(dev, &mi));
    return mi.bytes_in_use;
}

static uint32_t live_tensors(void) { return vdev_handle_count(&vdev_tens_table); }

static vdev_tensor_t *vec(float a, float b)
{
    float h[2] = {a, b};
    int64_t s[1] = {2};
    return vdev_tensor_from_host(h, s, 1, VDEV_F32);
}

/* t holds exactly {a, b}. */
static int holds(const vdev_tensor_t *t, float a, float b)
{
    float h[2] = {0, 0};
    return vdev_tensor_to_host(t, h, sizeof h) == VDEV_OK && h[0] == a && h[1] == b;
}

/* ---- freed tensors ---- */

/* Freeing twice is an error and never frees the tensor that took the slot
 * of the first: free t, make u (the slot is reused), free t again. */
static void test_double_free(const char *dev)
{
    CHECK_OK(vdev_device_push(dev));
    uint64_t base = in_use(dev);
    uint32_t n0 = live_tensors();
    vdev_tensor_t *t = vec(1, 2);
    vdev_tensor_free(t);
    vdev_tensor_t *u = vec(3, 4);
    CHECK(u != NULL && u != t); /* same slot (last freed, first reused), new generation */
    CHECK(vdev_tens_peek(u) != NULL && (uintptr_t)u != (uintptr_t)t);
    vdev_clear_error();
    vdev_tensor_free(t);
    CHECK(vdev_last_status() == VDEV_ERR_INVALID_ARG);
    CHECK_STR(vdev_last_error(), "vdev_tensor_free: " NOT_LIVE);
    CHECK(holds(u, 3, 4));
    CHECK_EQ_U64(live_tensors(), n0 + 1);
    /* every use of t fails the same way, u stays intact */
    float h[2];
    CHECK_STATUS(vdev_tensor_to_host(t, h, sizeof h), VDEV_ERR_INVALID_ARG);
    CHECK_STR(vdev_last_error(), "vdev_tensor_to_host: " NOT_LIVE);
    CHECK(vdev_relu(t) == NULL);
    CHECK_STR(vdev_last_error(), "Relu: input #0: " NOT_LIVE);
    CHECK(vdev_add(u, t) == NULL);
    CHECK_STR(vdev_last_error(), "AddV2: input #1: " NOT_LIVE);
    CHECK(vdev_tensor_ndim(t) == -1);
    CHECK_STR(vdev_last_error(), "vdev_tensor_ndim: " NOT_LIVE);
    CHECK(vdev_tensor_device(t) == NULL);
    CHECK(vdev_variable(t) == NULL);
    CHECK_STR(vdev_last_error(), "vdev_variable: " NOT_LIVE);
    CHECK(vdev_keep(t) == NULL);
    CHECK_STATUS(vdev_assign(t, u), VDEV_ERR_INVALID_ARG);
    CHECK_STR(vdev_last_error(), "vdev_assign: " NOT_LIVE);
    CHECK(vdev_tensor_to(t, "CPU:0") == NULL);
    CHECK_STR(vdev_last_error(), "vdev_tensor_to: " NOT_LIVE);
    CHECK(holds(u, 3, 4));
    vdev_tensor_free(u);
    CHECK_EQ_U64(live_tensors(), n0);
    CHECK_EQ_U64(in_use(dev), base);

    /* a tensor freed by its scope's end is as dead */
    CHECK_OK(vdev_scope_begin());
    vdev_tensor_t *s = vec(5, 6);
    vdev_scope_end();
    vdev_clear_error();
    vdev_tensor_free(s);
    CHECK_STR(vdev_last_error(), "vdev_tensor_free: " NOT_LIVE);
    CHECK_EQ_U64(live_tensors(), n0);
    CHECK_EQ_U64(in_use(dev), base);
    CHECK_OK(vdev_device_pop());
}

/* A tensor that a tape still holds is freed for its caller all the same:
 * its handle dies at once, a second free is an error, the tape's reference
 * is untouched. */
static void test_free_while_tape_holds(void)
{
    uint32_t n0 = live_tensors();
    vdev_tensor_t *x = vdev_variable(vec(1, -2));
    vdev_tape_t *tape = vdev_tape_begin();
    vdev_tensor_t *y = vdev_relu(x);
    vdev_tensor_t *loss = vdev_sum_all(y);
    vdev_tensor_free(y); /* the tape keeps the struct alive */
    vdev_clear_error();
    vdev_tensor_free(y);
    CHECK_STR(vdev_last_error(), "vdev_tensor_free: " NOT_LIVE);
    vdev_tensor_t *g = NULL;
    CHECK_OK(vdev_tape_gradient(tape, loss, &x, 1, &g));
    CHECK(holds(g, 1, 0));
    vdev_tape_end(tape);
    vdev_tensor_free(g);
    vdev_tensor_free(loss);
    vdev_tensor_free(x);
    CHECK_EQ_U64(live_tensors(), n0);
}

/* Values that were never handles: rejected by tag, index bounds or
 * generation, without reading outside the table. */
static void test_foreign_and_garbage(void)
{
    vdev_tensor_t *u = vec(7, 8);
    vdev_tape_t *tape = vdev_tape_begin();
    int on_stack = 0;
    void *heap = malloc(64);
    const uintptr_t junk[] = {
        1, 2, 0xffffffffu, (uintptr_t)-1, (uintptr_t)&on_stack, (uintptr_t)heap,
        (uintptr_t)u + (2ull << 32),            /* a later generation */
        (uintptr_t)u - (1ull << 32),            /* dead generation */
        ((uintptr_t)u & ~0xf0000000ull) | (7u << 28), /* another table's tag */
        (uintptr_t)tape,                        /* a tape handle */
        0x10000001u, 0x1fffffffu, (1ull << 32) | 0x10000000u, (1ull << 32) | 0x1ffffffeu,
    };
    for (size_t i = 0; i < VDEV_ARRAY_LEN(junk); i++) {
        vdev_tensor_t *j = (vdev_tensor_t *)junk[i];
        vdev_clear_error();
        vdev_tensor_free(j);
        CHECK_STR(vdev_last_error(), "vdev_tensor_free: " NOT_LIVE);
        CHECK(vdev_relu(j) == NULL && vdev_last_status() == VDEV_ERR_INVALID_ARG);
        CHECK(vdev_tensor_numel(j) == -1);
    }
    /* a tensor handle is not a tape, a layer, a model nor an optimizer */
    vdev_tensor_t *g = NULL;
    vdev_clear_error();
    vdev_tape_end((vdev_tape_t *)u);
    CHECK_STR(vdev_last_error(), "vdev_tape_end: not a live tape (ended already, or not a tape)");
    CHECK_STATUS(vdev_tape_gradient((vdev_tape_t *)u, u, &u, 1, &g), VDEV_ERR_INVALID_ARG);
    CHECK(vdev_dense_forward((vdev_dense_t *)u, u) == NULL);
    CHECK_STR(vdev_last_error(), "vdev_dense_forward: not a live dense layer (freed already, or "
                                 "not a dense layer)");
    CHECK(vdev_mlp_variables((vdev_mlp_t *)u, NULL, 0) == -1);
    CHECK_STR(vdev_last_error(), "vdev_mlp_variables: not a live model (freed already, or not a "
                                 "model)");
    CHECK_STATUS(vdev_optimizer_apply((vdev_optimizer_t *)u, NULL, NULL, 0),
                 VDEV_ERR_INVALID_ARG);
    CHECK_STR(vdev_last_error(), "vdev_optimizer_apply: not a live optimizer (freed already, or "
                                 "not an optimizer)");
    vdev_tape_end(tape);
    CHECK(holds(u, 7, 8));
    vdev_tensor_free(u);
    free(heap);
}

/* ---- tensors of a runtime that was shut down ---- */

static void test_shutdown(void)
{
    check_fresh("2x1GiB");
    CHECK_OK(vdev_init());
    CHECK_OK(vdev_device_push("GPU:0"));
    vdev_tensor_t *old = vec(1, 2), *old2 = vec(9, 9);
    vdev_tape_t *tape = vdev_tape_begin();
    vdev_tape_end(tape);
    tape = vdev_tape_begin();
    CHECK_OK(vdev_device_pop());
    vdev_shutdown();

    /* no runtime: an error, not a crash, not an OOM */
    float h[2];
    vdev_clear_error();
    CHECK_STATUS(vdev_tensor_to_host(old, h, sizeof h), VDEV_ERR_INVALID_ARG);
    CHECK_STR(vdev_last_error(), "vdev_tensor_to_host: the tensor " SHUT
                                 " (made before vdev_shutdown)");
    CHECK(vdev_relu(old) == NULL);
    CHECK(vdev_last_status() == VDEV_ERR_INVALID_ARG);
    CHECK_STR(vdev_last_error(), "Relu: input #0: the tensor " SHUT " (made before vdev_shutdown)");
    CHECK(!vdev_is_initialized()); /* the op did not start a runtime */

    /* a new runtime: the old tensor does not alias its memory */
    check_fresh("2x1GiB");
    CHECK_OK(vdev_init());
    CHECK_OK(vdev_device_push("GPU:0"));
    vdev_tensor_t *fresh = vec(3, 4);
    CHECK_STATUS(vdev_assign(old, fresh), VDEV_ERR_INVALID_ARG);
    CHECK_MSG(SHUT);
    CHECK_STATUS(vdev_assign(fresh, old), VDEV_ERR_INVALID_ARG);
    CHECK_MSG(SHUT);
    CHECK_STATUS(vdev_tensor_to_host(old, h, sizeof h), VDEV_ERR_INVALID_ARG);
    CHECK(vdev_add(fresh, old) == NULL);
    CHECK_STR(vdev_last_error(), "AddV2: input #1: the tensor " SHUT " (made before "
                                 "vdev_shutdown)");
    CHECK(vdev_tensor_dim(old, 0) == -1);
    CHECK(holds(fresh, 3, 4));
    /* the old tape can only be ended */
    vdev_tensor_t *g = NULL;
    CHECK_STATUS(vdev_tape_gradient(tape, fresh, &fresh, 1, &g), VDEV_ERR_INVALID_ARG);
    CHECK_STR(vdev_last_error(), "vdev_tape_gradient: the tape belongs to a runtime that was shut "
                                 "down (begun before vdev_shutdown)");
    vdev_clear_error();
    vdev_tape_end(tape);
    CHECK(vdev_last_status() == VDEV_OK);
    /* freeing the old tensors just releases their handles */
    uint64_t used = in_use("GPU:0");
    vdev_tensor_free(old);
    vdev_tensor_free(old2);
    CHECK(vdev_last_status() == VDEV_OK);
    CHECK_EQ_U64(in_use("GPU:0"), used);
    vdev_tensor_free(old);
    CHECK_STR(vdev_last_error(), "vdev_tensor_free: " NOT_LIVE);
    CHECK(holds(fresh, 3, 4));
    vdev_tensor_free(fresh);
    CHECK_EQ_U64(in_use("GPU:0"), 0);
    CHECK_OK(vdev_device_pop());
}

/* ---- tapes ---- */

static void test_tape_misuse(void)
{
    vdev_tape_t *t = vdev_tape_begin();
    CHECK(t != NULL);
    vdev_tape_end(t);
    vdev_clear_error();
    vdev_tape_end(t);
    CHECK(vdev_last_status() == VDEV_ERR_INVALID_ARG);
    CHECK_STR(vdev_last_error(), "vdev_tape_end: not a live tape (ended already, or not a tape)");
    vdev_tensor_t *x = vdev_variable(vec(1, 2)), *g = x;
    CHECK_STATUS(vdev_tape_gradient(t, x, &x, 1, &g), VDEV_ERR_INVALID_ARG);
    CHECK_STR(vdev_last_error(), "vdev_tape_gradient: not a live tape (ended already, or not a "
                                 "tape)");
    CHECK(g == NULL);
    /* a new tape may take the slot: the old handle still fails */
    vdev_tape_t *t2 = vdev_tape_begin();
    CHECK(t2 != NULL && t2 != t);
    vdev_tape_end(t);
    CHECK_MSG("not a live tape");
    vdev_tape_end(t2);
    vdev_tensor_free(x);
}

/* ---- threads ---- */

struct xfree {
    vdev_tensor_t *t;
    enum vdev_status st;
    char msg[512];
};

static void *free_elsewhere(void *arg)
{
    struct xfree *x = arg;
    vdev_clear_error();
    vdev_tensor_free(x->t);
    x->st = vdev_last_status();
    vdev_strlcpy(x->msg, vdev_last_error(), sizeof x->msg);
    return NULL;
}

/* vdev_keep and vdev_variable from another thread: errors too. */
static void *keep_elsewhere(void *arg)
{
    struct xfree *x = arg;
    int ok = vdev_keep(x->t) == NULL && vdev_last_status() == VDEV_ERR_INVALID_ARG &&
             strcmp(vdev_last_error(), "vdev_keep: the tensor is held by a scope of another "
                                       "thread; keep it there") == 0;
    vdev_clear_error();
    ok = ok && vdev_variable(x->t) == NULL && vdev_last_status() == VDEV_ERR_INVALID_ARG;
    x->st = ok ? VDEV_OK : VDEV_ERR_INTERNAL;
    vdev_strlcpy(x->msg, vdev_last_error(), sizeof x->msg);
    return NULL;
}

/* Freeing, from another thread, a tensor held by this thread's scope is an
 * error; the scope still frees it at its end. A tensor out of every scope
 * may be freed by any thread. */
static void test_free_from_other_thread(const char *dev)
{
    CHECK_OK(vdev_device_push(dev));
    uint64_t base = in_use(dev);
    uint32_t n0 = live_tensors();
    CHECK_OK(vdev_scope_begin());
    struct xfree x = {vec(1, 2), VDEV_OK, ""};
    pthread_t th;
    CHECK(pthread_create(&th, NULL, free_elsewhere, &x) == 0);
    pthread_join(th, NULL);
    CHECK(x.st == VDEV_ERR_INVALID_ARG);
    CHECK(strcmp(x.msg, "vdev_tensor_free: the tensor is held by a scope of another thread; only "
                        "that thread may free it or take it out (vdev_keep it there, or free it "
                        "there)") == 0);
    CHECK(holds(x.t, 1, 2));
    CHECK(pthread_create(&th, NULL, keep_elsewhere, &x) == 0);
    pthread_join(th, NULL);
    CHECK(x.st == VDEV_OK);
    CHECK(strcmp(x.msg, "vdev_variable: the tensor is held by a scope of another thread; only "
                        "that thread may free it or take it out (vdev_keep it there, or free it "
                        "there)") == 0);
    vdev_scope_end();
    CHECK(vdev_tensor_ndim(x.t) == -1); /* not kept, not made a variable: freed */
    CHECK_EQ_U64(in_use(dev), base);
    CHECK_EQ_U64(live_tensors(), n0);
    /* outside any scope: any thread frees it */
    x.t = vec(3, 4);
    CHECK(pthread_create(&th, NULL, free_elsewhere, &x) == 0);
    pthread_join(th, NULL);
    CHECK(x.st == VDEV_OK);
    CHECK_EQ_U64(in_use(dev), base);
    CHECK_EQ_U64(live_tensors(), n0);
    CHECK_OK(vdev_device_pop());
}

static void *leave_scopes_open(void *arg)
{
    const char *dev = *(const char **)arg;
    vdev_device_push(dev);
    for (int d = 0; d < 3; d++) {
        vdev_scope_begin();
        for (int i = 0; i < 5; i++)
            vdev_relu(vec(1, -1));
    }
    vdev_device_pop();
    return NULL;
}

/* A thread that exits inside scopes has them closed: nothing leaks. */
static void test_thread_exit(const char *dev)
{
    uint64_t base = in_use(dev);
    uint32_t n0 = live_tensors();
    pthread_t th;
    CHECK(pthread_create(&th, NULL, leave_scopes_open, &dev) == 0);
    pthread_join(th, NULL);
    CHECK_EQ_U64(in_use(dev), base);
    CHECK_EQ_U64(live_tensors(), n0);
}

struct tape_arg {
    vdev_tape_t *tape;
    enum vdev_status end_st, grad_st;
    char msg[512];
};

static void *end_elsewhere(void *arg)
{
    struct tape_arg *a = arg;
    vdev_clear_error();
    vdev_tape_end(a->tape);
    a->end_st = vdev_last_status();
    vdev_strlcpy(a->msg, vdev_last_error(), sizeof a->msg);
    int64_t s[1] = {1};
    vdev_tensor_t *l = vdev_tensor_ones(s, 1, VDEV_F32), *g = NULL;
    a->grad_st = vdev_tape_gradient(a->tape, l, &l, 1, &g);
    vdev_tensor_free(l);
    return NULL;
}

static void *begin_and_exit(void *arg)
{
    struct tape_arg *a = arg;
    a->tape = vdev_tape_begin();
    return NULL;
}

/* Another thread may not end (or ask) a tape that records; once the
 * recording thread has exited, any thread may end it. */
static void test_tape_threads(void)
{
    struct tape_arg a = {vdev_tape_begin(), VDEV_OK, VDEV_OK, ""};
    pthread_t th;
    CHECK(pthread_create(&th, NULL, end_elsewhere, &a) == 0);
    pthread_join(th, NULL);
    CHECK(a.end_st == VDEV_ERR_INVALID_ARG && a.grad_st == VDEV_ERR_INVALID_ARG);
    CHECK(strcmp(a.msg, "vdev_tape_end: the tape is recording on another thread; only that "
                        "thread may stop it") == 0);
    vdev_clear_error();
    vdev_tape_end(a.tape);
    CHECK(vdev_last_status() == VDEV_OK);

    CHECK(pthread_create(&th, NULL, begin_and_exit, &a) == 0);
    pthread_join(th, NULL);
    CHECK(a.tape != NULL);
    vdev_tape_end(a.tape);
    CHECK(vdev_last_status() == VDEV_OK);
    vdev_tape_t *again = vdev_tape_begin(); /* this thread records no tape: it may */
    CHECK(again != NULL);
    vdev_tape_end(again);
}

/* Several threads make and free tensors at once (in scopes and out), and
 * race to free the same tensor: exactly one free succeeds. */
#define N_THREADS 4
#define N_ROUNDS 2000

struct churn {
    const char *dev;
    vdev_tensor_t *shared;
    _Atomic int *frees_ok;
    pthread_barrier_t *go;
    int bad;
};

static void *churn(void *arg)
{
    struct churn *c = arg;
    vdev_device_push(c->dev);
    pthread_barrier_wait(c->go);
    vdev_clear_error();
    vdev_tensor_free(c->shared);
    if (vdev_last_status() == VDEV_OK)
        atomic_fetch_add(c->frees_ok, 1);
    else if (strcmp(vdev_last_error(), "vdev_tensor_free: " NOT_LIVE) != 0)
        c->bad++;
    for (int r = 0; r < N_ROUNDS; r++) {
        vdev_tensor_t *a = vec((float)r, 1);
        vdev_scope_begin();
        vdev_tensor_t *b = vdev_mul_scalar(vdev_add(a, a), 0.5f);
        float h[2];
        if (r % 64 == 0 &&
            (vdev_tensor_to_host(b, h, sizeof h) != VDEV_OK || h[0] != (float)r || h[1] != 1))
            c->bad++;
        vdev_scope_end();
        vdev_tensor_free(a);
        vdev_tensor_free(a); /* a double free: an error, never another thread's tensor */
        if (strcmp(vdev_last_error(), "vdev_tensor_free: " NOT_LIVE) != 0)
            c->bad++;
    }
    vdev_device_pop();
    return NULL;
}

static void test_threads_churn(const char *dev)
{
    uint64_t base = in_use(dev);
    uint32_t n0 = live_tensors();
    for (int round = 0; round < 3; round++) {
        pthread_barrier_t go;
        pthread_barrier_init(&go, NULL, N_THREADS);
        _Atomic int frees_ok = 0;
        CHECK_OK(vdev_device_push(dev));
        vdev_tensor_t *shared = vec(1, 1);
        CHECK_OK(vdev_device_pop());
        struct churn c[N_THREADS];
        pthread_t th[N_THREADS];
        for (int i = 0; i < N_THREADS; i++) {
            c[i] = (struct churn){dev, shared, &frees_ok, &go, 0};
            CHECK(pthread_create(&th[i], NULL, churn, &c[i]) == 0);
        }
        int bad = 0;
        for (int i = 0; i < N_THREADS; i++) {
            pthread_join(th[i], NULL);
            bad += c[i].bad;
        }
        pthread_barrier_destroy(&go);
        CHECK(bad == 0);
        CHECK(atomic_load(&frees_ok) == 1);
    }
    CHECK_EQ_U64(in_use(dev), base);
    CHECK_EQ_U64(live_tensors(), n0);
}

/* ---- scopes ---- */

/* 64 nested scopes work; the 65th begin is an error whose end does nothing,
 * so the pairing of every other begin and end stays right. */
static void test_scope_depth(const char *dev)
{
    CHECK_OK(vdev_device_push(dev));
    uint64_t base = in_use(dev);
    for (int d = 0; d < 64; d++)
        CHECK_OK(vdev_scope_begin());
    vdev_tensor_t *deep = vec(1, 2);
    CHECK_STATUS(vdev_scope_begin(), VDEV_ERR_INVALID_ARG);
    CHECK_STR(vdev_last_error(), "tensor scopes nested deeper than 64 (the matching "
                                 "vdev_scope_end does nothing)");
    CHECK_STATUS(vdev_scope_begin(), VDEV_ERR_INVALID_ARG); /* while one is pending: too */
    vdev_tensor_t *in_64 = vec(3, 4); /* goes to the 64th scope */
    vdev_scope_end();
    vdev_scope_end(); /* the two failed begins' ends: nothing closed */
    CHECK(holds(deep, 1, 2) && holds(in_64, 3, 4));
    vdev_scope_end(); /* the 64th */
    CHECK(vdev_tensor_ndim(in_64) == -1);
    CHECK_OK(vdev_scope_begin()); /* fine again */
    vdev_scope_end();
    for (int d = 0; d < 63; d++)
        vdev_scope_end();
    CHECK_EQ_U64(in_use(dev), base);
    vdev_clear_error();
    vdev_scope_end();
    CHECK_STR(vdev_last_error(), "vdev_scope_end without a matching vdev_scope_begin");
    /* a scope holds any number of tensors without allocating */
    CHECK_OK(vdev_scope_begin());
    for (int i = 0; i < 20000; i++)
        vec((float)i, 0);
    CHECK(in_use(dev) >= base + 20000 * 8);
    vdev_scope_end();
    CHECK_EQ_U64(in_use(dev), base);
    /* keep and free inside nested scopes, in any order */
    CHECK_OK(vdev_scope_begin());
    vdev_tensor_t *k[6];
    CHECK_OK(vdev_scope_begin());
    for (int i = 0; i < 6; i++)
        k[i] = vec((float)i, 0);
    vdev_tensor_free(k[0]);
    vdev_tensor_free(k[5]);
    vdev_tensor_free(k[2]);
    vdev_keep(k[3]);
    vdev_scope_end();
    CHECK(holds(k[3], 3, 0) && vdev_tensor_ndim(k[1]) == -1 && vdev_tensor_ndim(k[4]) == -1);
    vdev_scope_end();
    CHECK(vdev_tensor_ndim(k[3]) == -1);
    CHECK_EQ_U64(in_use(dev), base);
    CHECK_OK(vdev_device_pop());
}

/* Gradients asked for with 64 scopes open: the tape needs one more for its
 * temporaries, so that is the nesting error, with every gradient NULL and
 * nothing left behind. */
static void test_gradient_at_depth_64(void)
{
    vdev_tensor_t *x = vdev_variable(vec(1, -2));
    uint32_t n0 = live_tensors();
    for (int d = 0; d < 64; d++)
        CHECK_OK(vdev_scope_begin());
    vdev_tape_t *t = vdev_tape_begin();
    vdev_tensor_t *loss = vdev_sum_all(vdev_relu(x)), *g = x;
    CHECK_STATUS(vdev_tape_gradient(t, loss, &x, 1, &g), VDEV_ERR_INVALID_ARG);
    CHECK_STR(vdev_last_error(), "tensor scopes nested deeper than 64 (the matching "
                                 "vdev_scope_end does nothing)");
    CHECK(g == NULL);
    vdev_tape_end(t);
    CHECK_STATUS(vdev_scope_begin(), VDEV_ERR_INVALID_ARG); /* this thread is at 64 */
    vdev_scope_end();                                       /* the failed begin's */
    for (int d = 0; d < 64; d++)
        vdev_scope_end();
    CHECK_EQ_U64(live_tensors(), n0);
    vdev_tensor_free(x);
}

/* A model whose second layer does not fit: NULL with the OOM, and the first
 * layer's variables freed. */
static void test_mlp_oom(void)
{
    check_fresh("1x1GiB");
    uint64_t limits[2] = {64ull << 20, 4ull << 20};
    CHECK_OK(vdev_config_set_logical_devices("GPU:0", limits, 2));
    CHECK_OK(vdev_init());
    uint32_t n0 = live_tensors();
    CHECK_OK(vdev_device_push("GPU:1"));
    int64_t sizes[3] = {64, 64, 1 << 20}; /* 64 x 1M floats: 256 MiB */
    vdev_clear_error();
    CHECK(vdev_mlp_new(sizes, 3, VDEV_ACT_RELU, VDEV_ACT_NONE, 1) == NULL);
    CHECK(vdev_last_status() == VDEV_ERR_OOM);
    CHECK_MSG("OOM when allocating tensor with shape[64,1048576] and type float");
    CHECK_EQ_U64(in_use("GPU:1"), 0);
    CHECK_EQ_U64(live_tensors(), n0);
    CHECK(vdev_dense_new(1 << 20, 64, VDEV_ACT_NONE, 1) == NULL);
    CHECK(vdev_last_status() == VDEV_ERR_OOM);
    CHECK_EQ_U64(in_use("GPU:1"), 0);
    CHECK_EQ_U64(live_tensors(), n0);
    CHECK_OK(vdev_device_pop());
}

/* ---- layers, models, optimizers ---- */

static void test_nn_handles(void)
{
    int64_t sizes[3] = {3, 4, 2};
    vdev_mlp_t *m = vdev_mlp_new(sizes, 3, VDEV_ACT_RELU, VDEV_ACT_NONE, 1);
    CHECK(m != NULL);
    vdev_clear_error();
    CHECK(vdev_mlp_variables(m, NULL, 4) == -1);
    CHECK(vdev_last_status() == VDEV_ERR_INVALID_ARG);
    CHECK_STR(vdev_last_error(), "vdev_mlp_variables: out is NULL and cap 4 (out may be NULL only "
                                 "with cap 0)");
    vdev_tensor_t *vars[4];
    CHECK(vdev_mlp_variables(m, vars, -1) == -1);
    CHECK(vdev_mlp_variables(m, NULL, 0) == 4);
    CHECK(vdev_mlp_variables(m, vars, 4) == 4);
    CHECK(vdev_mlp_variables(NULL, vars, 4) == -1);
    CHECK_STR(vdev_last_error(), "vdev_mlp_variables: model is NULL");
    CHECK(vdev_mlp_forward(NULL, vars[0]) == NULL);
    CHECK_STR(vdev_last_error(), "vdev_mlp_forward: model is NULL");
    CHECK(vdev_mlp_new(sizes, 2, (enum vdev_activation)9, VDEV_ACT_NONE, 1) == NULL);
    CHECK_STR(vdev_last_error(), "vdev_mlp_new: unknown activation (hidden 9, output 0)");
    CHECK(vdev_mlp_new(sizes, 1, VDEV_ACT_RELU, VDEV_ACT_NONE, 1) == NULL);
    CHECK(vdev_last_status() == VDEV_ERR_INVALID_ARG);
    CHECK(vdev_dense_new(0, 2, VDEV_ACT_NONE, 1) == NULL);
    CHECK(vdev_last_status() == VDEV_ERR_INVALID_ARG);
    vdev_optimizer_t *o = vdev_sgd_new(0.1f, 0.0f);
    CHECK_STATUS(vdev_optimizer_apply(o, NULL, vars, 1), VDEV_ERR_INVALID_ARG);
    CHECK_STR(vdev_last_error(), "vdev_optimizer_apply: bad arguments (n 1, vars NULL, grads set)");
    CHECK_STATUS(vdev_optimizer_apply(NULL, vars, vars, 1), VDEV_ERR_INVALID_ARG);
    CHECK_STR(vdev_last_error(), "vdev_optimizer_apply: optimizer is NULL");
    vdev_optimizer_free(o);
    vdev_clear_error();
    vdev_optimizer_free(o);
    CHECK_STR(vdev_last_error(), "vdev_optimizer_free: not a live optimizer (freed already, or "
                                 "not an optimizer)");
    vdev_mlp_free(m);
    CHECK(vdev_tensor_ndim(vars[0]) == -1); /* the model's variables went with it */
    vdev_clear_error();
    vdev_mlp_free(m);
    CHECK_STR(vdev_last_error(), "vdev_mlp_free: not a live model (freed already, or not a "
                                 "model)");
    CHECK(vdev_mlp_forward(m, vars[0]) == NULL);
    CHECK_MSG("not a live model");
    vdev_dense_t *l = vdev_dense_new(2, 2, VDEV_ACT_TANH, 3);
    vdev_dense_free(l);
    vdev_clear_error();
    vdev_dense_free(l);
    CHECK_STR(vdev_last_error(), "vdev_dense_free: not a live dense layer (freed already, or not a "
                                 "dense layer)");
    CHECK(vdev_dense_forward(l, NULL) == NULL);
    CHECK_MSG("not a live dense layer");
}

/* ---- fault injection: handle segments ---- */

/* Makes tensors (in the open scope) until every slot made is taken and the
 * next one starts a new segment; returns the slots of a segment. */
static uint32_t fill_to_segment_end(void)
{
    uint32_t live = live_tensors(); /* then counted here: nothing else frees meanwhile */
    for (;;) {
        uint32_t made = atomic_load(&vdev_tens_table.n_made);
        if (live == made && made % VDEV_HANDLE_SEG_SLOTS == 0) {
            CHECK_EQ_U64(live_tensors(), live);
            return VDEV_HANDLE_SEG_SLOTS;
        }
        if (!vdev_tensor_zeros(NULL, 0, VDEV_F32)) {
            check_fail(__FILE__, __LINE__, "zeros: %s", vdev_last_error());
            return 0;
        }
        live++;
    }
}

/* The allocation of a handle segment fails: the tensor is not made
 * (VDEV_ERR_OOM, nothing allocated on the device, no slot taken) and the next
 * try works; an op whose output cannot get a handle fails the same way. */
static void test_segment_faults(const char *dev)
{
    CHECK_OK(vdev_device_push(dev));
    uint64_t base = in_use(dev);
    uint32_t n0 = live_tensors();
    CHECK_OK(vdev_scope_begin());
    for (int round = 0; round < 4; round++) {
        vdev_tensor_t *input = vec(5, -5); /* round 1: an op's input, made before */
        uint32_t seg = fill_to_segment_end();
        uint64_t used = in_use(dev);
        uint32_t live = live_tensors(), made = atomic_load(&vdev_tens_table.n_made);
        vdev_handles_fail_segment(1);
        vdev_clear_error();
        vdev_tensor_t *y = round % 2 ? vdev_relu(input) : vec(2, 2);
        CHECK(y == NULL);
        CHECK(vdev_last_status() == VDEV_ERR_OOM);
        char want[96];
        snprintf(want, sizeof want, "out of host memory for %u more tensor handles", seg);
        CHECK_STR(vdev_last_error(), want);
        CHECK_EQ_U64(in_use(dev), used);
        CHECK_EQ_U64(live_tensors(), live);
        CHECK_EQ_U64(atomic_load(&vdev_tens_table.n_made), made);
        vdev_tensor_t *ok = vdev_relu(input); /* the hook fired once */
        CHECK(ok != NULL && holds(ok, 5, 0));
    }
    vdev_handles_fail_segment(0);
    vdev_scope_end();
    CHECK_EQ_U64(in_use(dev), base);
    CHECK_EQ_U64(live_tensors(), n0);
    CHECK_OK(vdev_device_pop());
}

int main(void)
{
    /* before any tensor exists: the very first segment fails, then works */
    check_fresh("2x1GiB");
    CHECK_OK(vdev_init());
    vdev_handles_fail_segment(1);
    int64_t one[1] = {1};
    CHECK(vdev_tensor_zeros(one, 1, VDEV_F32) == NULL);
    CHECK(vdev_last_status() == VDEV_ERR_OOM);
    CHECK_STR(vdev_last_error(), "out of host memory for 1024 more tensor handles");
    CHECK_EQ_U64(in_use("GPU:0"), 0);
    vdev_handles_fail_segment(1);
    CHECK(vdev_tape_begin() == NULL); /* tapes have a table of their own */
    CHECK_STR(vdev_last_error(), "out of host memory for 1024 more tape handles");

    const char *devs[2] = {"CPU:0", "GPU:1"};
    for (int k = 0; k < 2; k++) {
        test_double_free(devs[k]);
        test_free_from_other_thread(devs[k]);
        test_thread_exit(devs[k]);
        test_scope_depth(devs[k]);
        test_threads_churn(devs[k]);
        test_segment_faults(devs[k]);
    }
    test_free_while_tape_holds();
    test_foreign_and_garbage();
    test_tape_misuse();
    test_tape_threads();
    test_nn_handles();
    test_gradient_at_depth_64();
    test_mlp_oom();
    test_shutdown();
    vdev_shutdown();
    return check_done();
}
