/* test_tape_values2.c — a tape's gradients use the values its ops read when
 * another thread writes the tensor meanwhile, and when the write comes from
 * the parameter server's pull; white box (the static library's internals),
 * each interleaving forced by a hand-off to a writer thread (semaphores),
 * never by timing:
 *  - the write lands after the op's kernel is queued and before the tape
 *    records it (the record hook hands off): the read was counted before the
 *    kernel, so the write saves the value, and the gradient is 2 v as Mul
 *    read it (before: the version was taken after the write, 20 40 60 80);
 *  - the write lands after the read was counted and before the kernel is
 *    queued (Mul's shape rule hands off): the kernel may have read either
 *    value, so it runs again on the value saved for the version counted:
 *    the output and the gradient agree, both of v when Mul was called;
 *  - the write lands after the gradient took v itself as the value read and
 *    before the gradient's kernels are queued (Mul's gradient hands off):
 *    the gradient runs again on the saved value (before: 20 40 60 80);
 *  - a write begun and not yet queued when the op reads: the op and the
 *    record read a copy, so they agree whichever way the write goes;
 *  - a thread assigns v while two threads each record sum(v * v) and take
 *    its gradient, 300 times: every gradient is 2 v as Mul read it, and none
 *    fails (before: dozens wrong, some failing with a false out-of-memory
 *    error); a check of results, not of timing;
 *  - vdev_ps_scatter (a pull of the parameter-server strategy) writes the
 *    variables as any write does: the tape keeps the value it read (before:
 *    the gradient used the pulled values);
 *  - versions are 64-bit: a record alive across 2^32 writes still gets the
 *    value it read (before: the 32-bit version came round to the one read,
 *    and the gradient took the variable as written since). */
#define _GNU_SOURCE
#include "check.h"
#include "dist/ps.h"
#include "ops/ops.h"

#include <math.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static uint64_t in_use(const char *dev)
{
    struct vdev_memory_info mi;
    return vdev_memory_info(dev, &mi) == VDEV_OK ? mi.bytes_in_use : UINT64_MAX;
}

static vdev_tensor_t *from4(const float *v)
{
    int64_t s[1] = {4};
    return vdev_tensor_from_host(v, s, 1, VDEV_F32);
}

static int equals(const vdev_tensor_t *t, const float *want)
{
    float got[4];
    return vdev_tensor_numel(t) == 4 && vdev_tensor_to_host(t, got, sizeof got) == VDEV_OK &&
           memcmp(got, want, sizeof got) == 0;
}

static const float OLD[4] = {1, 2, 3, 4}, NEW[4] = {10, 20, 30, 40};
static const float SQUARES[4] = {1, 4, 9, 16}, TWICE[4] = {2, 4, 6, 8};

/* ---- a writer thread that assigns NEW to v when handed off to ---- */

static vdev_tensor_t *var, *newval;
static sem_t go, done;
static _Atomic int write_status;

static void *writer(void *unused)
{
    (void)unused;
    sem_wait(&go);
    atomic_store(&write_status, (int)vdev_assign(var, newval));
    sem_post(&done);
    return NULL;
}

static pthread_t start_writer(void)
{
    pthread_t th;
    sem_init(&go, 0, 0);
    sem_init(&done, 0, 0);
    atomic_store(&write_status, -1);
    CHECK(pthread_create(&th, NULL, writer, NULL) == 0);
    return th;
}

/* The caller stops here until the writer has written. */
static void hand_off(void)
{
    sem_post(&go);
    sem_wait(&done);
}

/* One hand-off, the first time a wrapped function runs after arming. */
static int armed;

/* The op table is const: the test makes its page writable to wrap one entry. */
static void writable(const void *slot)
{
    long pg = sysconf(_SC_PAGESIZE);
    uintptr_t a = (uintptr_t)slot & ~(uintptr_t)(pg - 1);
    CHECK(mprotect((void *)a, (size_t)pg, PROT_READ | PROT_WRITE) == 0);
}

static enum vdev_status (*orig_record)(void *, const struct vdev_op_record *);
static vdev_shape_fn orig_shape;
static vdev_grad_fn orig_grad;

static enum vdev_status record_after_write(void *tape, const struct vdev_op_record *r)
{
    if (armed) {
        armed = 0;
        hand_off();
    }
    return orig_record(tape, r);
}

static enum vdev_status shape_after_write(struct vdev_kernel_args *a)
{
    if (armed) {
        armed = 0;
        hand_off();
    }
    return orig_shape(a);
}

static enum vdev_status grad_after_write(const struct vdev_grad_args *g, struct vdev_tens **din)
{
    if (armed) {
        armed = 0;
        hand_off();
    }
    return orig_grad(g, din);
}

enum where { RECORD, SHAPE, GRAD };

/* sum(v * v) on dev, another thread assigning NEW to v at `where`. */
static void write_while(const char *dev, enum where where)
{
    check_fresh("2x1GiB");
    CHECK_OK(vdev_device_push(dev));
    var = vdev_variable(from4(OLD));
    newval = from4(NEW);
    CHECK(var && newval);
    struct vdev_op_def *mul = (struct vdev_op_def *)(uintptr_t)&vdev_op_defs[VDEV_OP_MUL];
    pthread_t th = start_writer();
    vdev_tape_t *tape = vdev_tape_begin();
    if (where == RECORD) {
        orig_record = vdev_tape_hook.record;
        vdev_tape_hook.record = record_after_write;
    } else if (where == SHAPE) {
        writable(&mul->shape);
        orig_shape = mul->shape;
        mul->shape = shape_after_write;
    }
    armed = where != GRAD;
    vdev_tensor_t *sq = vdev_mul(var, var), *l = vdev_sum_all(sq), *g = NULL;
    if (where == SHAPE)
        mul->shape = orig_shape;
    if (where == GRAD) {
        writable(&mul->grad);
        orig_grad = mul->grad;
        mul->grad = grad_after_write;
        armed = 1;
    }
    CHECK_OK(vdev_tape_gradient(tape, l, &var, 1, &g));
    if (where == GRAD)
        mul->grad = orig_grad;
    if (atomic_load(&write_status) == -1) { /* no hand-off came: a failure, and free the writer */
        CHECK(!"the write was not handed off");
        hand_off();
    }
    CHECK(pthread_join(th, NULL) == 0);
    CHECK(atomic_load(&write_status) == VDEV_OK);
    CHECK(equals(sq, SQUARES)); /* Mul read v as it was when called */
    CHECK(equals(g, TWICE));    /* and so did its gradient */
    CHECK(equals(var, NEW));
    vdev_tape_end(tape);
    vdev_tensor_free(g);
    vdev_tensor_free(l);
    vdev_tensor_free(sq);
    vdev_tensor_free(newval);
    vdev_tensor_free(var);
    CHECK_EQ_U64(in_use(dev), 0); /* the saved value went with the tape */
    CHECK_OK(vdev_device_pop());
}

/* A write begun (and not yet queued) when Mul reads v: Mul and its record
 * read a copy; v's own later writes do not reach the gradient. */
static void write_under_way(const char *dev)
{
    check_fresh("2x1GiB");
    CHECK_OK(vdev_device_push(dev));
    vdev_tensor_t *v = vdev_variable(from4(OLD)), *nv = from4(NEW), *g = NULL;
    CHECK(v && nv);
    struct vdev_tens *t = vdev_tens_peek(v);
    vdev_tape_t *tape = vdev_tape_begin();
    vdev_tens_write_begin(t, t->dev); /* another writer, between its two calls */
    uint64_t before = in_use(dev);
    vdev_tensor_t *sq = vdev_mul(v, v), *l = vdev_sum_all(sq);
    CHECK_EQ_U64(in_use(dev) - before, 3 * 256); /* the copy, v*v, the sum */
    CHECK_OK(vdev_assign(v, nv));
    vdev_tens_write_end(t);
    CHECK_OK(vdev_tape_gradient(tape, l, &v, 1, &g));
    CHECK(equals(sq, SQUARES));
    CHECK(equals(g, TWICE));
    vdev_tape_end(tape);
    vdev_tensor_free(g);
    CHECK_EQ_U64(in_use(dev) - before, 2 * 256); /* the copy went with the tape */
    vdev_tensor_free(l);
    vdev_tensor_free(sq);
    vdev_tensor_free(nv);
    vdev_tensor_free(v);
    CHECK_OK(vdev_device_pop());
}

/* ---- many writes, two threads differentiating ---- */

#define STRESS_RUNS 300
static _Atomic int runs[2], wrong[2], failed[2], thread_err[2];

static void *differentiate(void *arg)
{
    int id = (int)(intptr_t)arg;
    if (vdev_device_push("GPU:0") != VDEV_OK)
        atomic_store(&thread_err[id], 1);
    for (int it = 0; it < STRESS_RUNS; it++) {
        if (vdev_scope_begin() != VDEV_OK)
            atomic_store(&thread_err[id], 1);
        vdev_tape_t *t = vdev_tape_begin();
        vdev_tensor_t *y = vdev_mul(var, var), *l = vdev_sum_all(y), *g = NULL;
        if (vdev_tape_gradient(t, l, &var, 1, &g) != VDEV_OK) {
            atomic_fetch_add(&failed[id], 1);
        } else {
            float yy[64], gg[64];
            if (vdev_tensor_to_host(y, yy, sizeof yy) != VDEV_OK ||
                vdev_tensor_to_host(g, gg, sizeof gg) != VDEV_OK)
                atomic_store(&thread_err[id], 1);
            for (int i = 0; i < 64; i++)
                if (fabsf(gg[i] * gg[i] / 4 - yy[i]) > 1e-3f * yy[i]) {
                    atomic_fetch_add(&wrong[id], 1);
                    break;
                }
        }
        atomic_fetch_add(&runs[id], 1);
        vdev_tape_end(t);
        vdev_scope_end();
    }
    vdev_device_pop();
    return NULL;
}

static void threads(void)
{
    check_fresh("2x1GiB");
    CHECK_OK(vdev_device_push("GPU:0"));
    int64_t s[1] = {64};
    var = vdev_variable(vdev_tensor_fill(s, 1, VDEV_F32, 1.0));
    CHECK(var != NULL);
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        CHECK(pthread_create(&th[i], NULL, differentiate, (void *)(intptr_t)i) == 0);
    int assign_failed = 0;
    for (int k = 2; atomic_load(&runs[0]) < STRESS_RUNS || atomic_load(&runs[1]) < STRESS_RUNS;
         k++) {
        assign_failed |= vdev_scope_begin() != VDEV_OK;
        assign_failed |=
            vdev_assign(var, vdev_tensor_fill(s, 1, VDEV_F32, (double)(k % 50 + 1))) != VDEV_OK;
        vdev_scope_end();
    }
    CHECK(!assign_failed);
    for (int i = 0; i < 2; i++) {
        CHECK(pthread_join(th[i], NULL) == 0);
        CHECK(atomic_load(&thread_err[i]) == 0);
        CHECK(atomic_load(&runs[i]) == STRESS_RUNS);
        CHECK(atomic_load(&wrong[i]) == 0);
        CHECK(atomic_load(&failed[i]) == 0);
    }
    vdev_tensor_free(var);
    CHECK_EQ_U64(in_use("GPU:0"), 0); /* no saved value outlived its tapes */
    CHECK_OK(vdev_device_pop());
}

/* ---- other writers ---- */

/* The parameter server's pull of one variable's values. */
static void ps_pull(const char *dev)
{
    check_fresh("2x1GiB");
    CHECK_OK(vdev_device_push(dev));
    vdev_tensor_t *v = vdev_variable(from4(OLD)), *g = NULL;
    CHECK(v != NULL);
    vdev_tape_t *tape = vdev_tape_begin();
    vdev_tensor_t *l = vdev_sum_all(vdev_mul(v, v));
    struct vdev_ps ps;
    memset(&ps, 0, sizeof ps);
    vdev_tensor_t *vars[1] = {v};
    struct ps_shard sh = {.var = 0, .off = 0, .count = 4, .at = 0};
    int first = 0, n = 1;
    ps.n_vars = 1;
    ps.vars = vars;
    ps.shards = &sh;
    ps.first_shard = &first;
    ps.n_shards_of = &n;
    uint64_t before = in_use(dev);
    CHECK_OK(vdev_ps_scatter(&ps, 0, NEW));
    CHECK_EQ_U64(in_use(dev) - before, 256); /* v as the tape read it */
    CHECK(equals(v, NEW));
    CHECK_OK(vdev_tape_gradient(tape, l, &v, 1, &g));
    CHECK(equals(g, TWICE));
    vdev_tape_end(tape);
    CHECK_OK(vdev_device_pop());
}

/* 2^32 writes between the read and the gradient (the last 2^32 - 1 of them
 * stood for by setting the version). */
static void version_wraps(const char *dev)
{
    check_fresh("2x1GiB");
    CHECK_OK(vdev_device_push(dev));
    vdev_tensor_t *v = vdev_variable(from4(OLD)), *nv = from4(NEW), *g = NULL;
    CHECK(v && nv);
    vdev_tape_t *tape = vdev_tape_begin();
    vdev_tensor_t *l = vdev_sum_all(vdev_mul(v, v));
    CHECK_OK(vdev_assign(v, nv)); /* saves the value read, at version 0 */
    atomic_store(&vdev_tens_peek(v)->version, (uint64_t)1 << 32);
    CHECK_OK(vdev_tape_gradient(tape, l, &v, 1, &g));
    CHECK(equals(g, TWICE));
    vdev_tape_end(tape);
    CHECK_OK(vdev_device_pop());
}

int main(void)
{
    write_while("GPU:0", RECORD);
    write_while("CPU:0", RECORD);
    write_while("GPU:1", SHAPE);
    write_while("CPU:0", SHAPE);
    write_while("GPU:0", GRAD);
    write_while("CPU:0", GRAD);
    write_under_way("GPU:0");
    write_under_way("CPU:0");
    threads();
    ps_pull("GPU:1");
    ps_pull("CPU:0");
    version_wraps("GPU:0");
    vdev_shutdown();
    return check_done();
}
