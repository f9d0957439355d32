/* test_ops_inputs.c — ops whose inputs cannot be used: inputs that cannot be
 * brought to the op's device (strict placement, or no memory there for the
 * copy) and cross-entropy labels outside [0, C); and the one copy made of an
 * input given twice from another device, freed with the op's end.
 *
 * Each failure must return NULL with the exact status and message, leave
 * every device's memory as it was (no copy left behind, no output), and free
 * only what the op made (run under ASan: before the fix the dispatcher freed
 * uninitialised pointers when an input could not be brought over). */
#define _GNU_SOURCE
#include "check.h"
#include "base/handles.h"
#include "tensor/tensor.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MiB (1ull << 20)

static struct vdev_memory_info info(const char *dev)
{
    struct vdev_memory_info mi;
    memset(&mi, 0, sizeof mi);
    CHECK_OK(vdev_memory_info(dev, &mi));
    return mi;
}

static uint32_t live_tensors(void) { return vdev_handle_count(&vdev_tens_table); }

/* A [rows, cols] f32 tensor of `v` on dev. */
static vdev_tensor_t *on(const char *dev, int64_t rows, int64_t cols, double v)
{
    int64_t s[2] = {rows, cols};
    CHECK_OK(vdev_device_push(dev));
    vdev_tensor_t *t = vdev_tensor_fill(s, 2, VDEV_F32, v);
    CHECK_OK(vdev_device_pop());
    CHECK(t != NULL);
    return t;
}

typedef vdev_tensor_t *(*binop)(const vdev_tensor_t *, const vdev_tensor_t *);

static vdev_tensor_t *matmul_nn(const vdev_tensor_t *a, const vdev_tensor_t *b)
{
    return vdev_matmul(a, b, false, false);
}

/* ---- strict placement ---- */

/* Under VDEV_PLACEMENT=strict, inside GPU:1's scope, a binary op with one
 * input on GPU:0 fails with VDEV_ERR_PLACEMENT and TensorFlow's words,
 * whichever input is the misplaced one; nothing is left allocated. */
static void test_strict(void)
{
    check_fresh("2x1GiB");
    setenv("VDEV_PLACEMENT", "strict", 1);
    CHECK_OK(vdev_init());
    CHECK(vdev_get_placement_policy() == VDEV_PLACEMENT_STRICT);
    vdev_tensor_t *a = on("GPU:0", 4, 4, 1.0), *b = on("GPU:1", 4, 4, 2.0);
    struct vdev_memory_info m0 = info("GPU:0"), m1 = info("GPU:1");
    uint32_t n0 = live_tensors();
    static const struct {
        const char *name, *op;
        binop fn;
    } ops[] = {{"add", "AddV2", vdev_add},       {"sub", "Sub", vdev_sub},
               {"mul", "Mul", vdev_mul},         {"div", "RealDiv", vdev_div},
               {"matmul", "MatMul", matmul_nn},  {"mse", "MeanSquaredError", vdev_mse}};
    CHECK_OK(vdev_device_push("GPU:1"));
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        for (int misplaced = 0; misplaced < 2; misplaced++) {
            vdev_clear_error();
            vdev_tensor_t *r = misplaced ? ops[i].fn(b, a) : ops[i].fn(a, b);
            CHECK(r == NULL);
            CHECK(vdev_last_status() == VDEV_ERR_PLACEMENT);
            char want[512];
            snprintf(want, sizeof want,
                     "Tensors on conflicting devices: cannot compute %s as input #%d was "
                     "expected to be on /job:localhost/replica:0/task:0/device:GPU:1 but is "
                     "actually on /job:localhost/replica:0/task:0/device:GPU:0 (operation "
                     "running on /job:localhost/replica:0/task:0/device:GPU:1). Copy it "
                     "explicitly with vdev_tensor_to() or vdev_identity() under a device scope, "
                     "or use VDEV_PLACEMENT=copy",
                     ops[i].op, misplaced);
            if (strcmp(vdev_last_error(), want) != 0)
                check_fail(__FILE__, __LINE__, "%s: \"%s\"", ops[i].name, vdev_last_error());
            CHECK_EQ_U64(live_tensors(), n0);
        }
    /* the explicit copy is allowed, and then the op runs */
    CHECK_OK(vdev_scope_begin());
    vdev_tensor_t *sum = vdev_add(vdev_identity(a), b);
    CHECK(sum != NULL && vdev_tensor_item(vdev_sum_all(sum)) == 48.0f);
    vdev_scope_end();
    CHECK_OK(vdev_device_pop());
    CHECK_EQ_U64(info("GPU:0").bytes_in_use, m0.bytes_in_use);
    CHECK_EQ_U64(info("GPU:1").bytes_in_use, m1.bytes_in_use);
    vdev_tensor_free(a);
    vdev_tensor_free(b);
    vdev_shutdown();
}

/* ---- no memory for the copy of an input ---- */

/* GPU:1 is a 2 MiB logical device carved from the same card as GPU:0. An op
 * there whose input on GPU:0 does not fit fails with VDEV_ERR_OOM and leaves
 * both devices as they were, whether the failing copy is the first input's
 * or the second's (after the first was copied). One input given twice is
 * copied once. */
static void test_copy_oom(void)
{
    check_fresh("1x1GiB");
    uint64_t limits[2] = {256 * MiB, 2 * MiB};
    CHECK_OK(vdev_config_set_logical_devices("GPU:0", limits, 2));
    CHECK_OK(vdev_init());
    vdev_tensor_t *big = on("GPU:0", 1024, 1024, 1.0);  /* 4 MiB */
    vdev_tensor_t *small = on("GPU:0", 1, 1024, 2.0);   /* 4 KiB */
    struct vdev_memory_info m0 = info("GPU:0"), m1 = info("GPU:1");
    uint32_t n0 = live_tensors();
    CHECK_OK(vdev_device_push("GPU:1"));
    for (int order = 0; order < 2; order++) {
        vdev_clear_error();
        vdev_tensor_t *r = order ? vdev_add(small, big) : vdev_add(big, small);
        CHECK(r == NULL);
        CHECK(vdev_last_status() == VDEV_ERR_OOM);
        CHECK_MSG("OOM when allocating tensor with shape[1024,1024] and type float");
        CHECK_MSG("/job:localhost/replica:0/task:0/device:GPU:1");
        struct vdev_memory_info a0 = info("GPU:0"), a1 = info("GPU:1");
        CHECK_EQ_U64(a0.bytes_in_use, m0.bytes_in_use);
        CHECK_EQ_U64(a1.bytes_in_use, m1.bytes_in_use);
        CHECK_EQ_U64(a1.n_allocs, m1.n_allocs);
        CHECK_EQ_U64(live_tensors(), n0);
    }
    CHECK_EQ_U64(info("GPU:1").n_failed_allocs, m1.n_failed_allocs + 2);
    /* what fits still runs there */
    CHECK_OK(vdev_scope_begin());
    vdev_tensor_t *r = vdev_add(small, small);
    CHECK(r != NULL && vdev_tensor_item(vdev_sum_all(r)) == 4096.0f);
    CHECK_STR(vdev_tensor_device(r), "/device:GPU:1");
    /* one input given twice is copied once: x + x of 768 KiB needs 1.5 MiB
     * there (a copy and the output), where two copies would not fit */
    vdev_tensor_t *x = on("GPU:0", 192, 1024, 1.0);
    uint64_t c0 = vdev_placement_bytes_copied("GPU:0", "GPU:1");
    r = vdev_add(x, x);
    CHECK(r != NULL && vdev_tensor_item(vdev_sum_all(r)) == 2.0f * 192 * 1024);
    CHECK_EQ_U64(vdev_placement_bytes_copied("GPU:0", "GPU:1") - c0, 192 * 1024 * 4);
    vdev_tensor_free(x);
    vdev_scope_end();
    CHECK_OK(vdev_device_pop());
    vdev_tensor_free(big);
    vdev_tensor_free(small);
    vdev_shutdown();
}

/* ---- cross-entropy labels ---- */

#define CE "SparseSoftmaxCrossEntropyWithLogits: "

/* Labels outside [0, C): VDEV_ERR_INVALID_ARG with TensorFlow's words, the
 * first bad label and C, on the CPU and on a simulated GPU, for labels
 * copied from the host, labels an op made on the GPU's stream (read after
 * the stream has made them) and a view of them; long label lists are cut
 * short. Good labels still give the loss. */
static void test_labels(const char *dev)
{
    CHECK_OK(vdev_device_push(dev));
    struct vdev_memory_info m = info(dev);
    CHECK_OK(vdev_scope_begin());
    float x[6] = {1, 2, 3, 4, 5, 6};
    int64_t s23[2] = {2, 3}, s2[1] = {2};
    vdev_tensor_t *logits = vdev_tensor_from_host(x, s23, 2, VDEV_F32);
    static const struct {
        int32_t l[2];
        const char *want;
    } cases[] = {
        {{0, 3}, CE "Received a label value of 3 which is outside the valid range of [0, 3).  "
                    "Label values: 0 3"},
        {{-1, 0}, CE "Received a label value of -1 which is outside the valid range of [0, 3).  "
                     "Label values: -1 0"},
        {{2, INT32_MIN}, CE "Received a label value of -2147483648 which is outside the valid "
                            "range of [0, 3).  Label values: 2 -2147483648"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        vdev_tensor_t *lab = vdev_tensor_from_host(cases[i].l, s2, 1, VDEV_I32);
        vdev_clear_error();
        CHECK(vdev_softmax_cross_entropy(logits, lab) == NULL);
        CHECK(vdev_last_status() == VDEV_ERR_INVALID_ARG);
        CHECK_STR(vdev_last_error(), cases[i].want);
    }
    /* labels an op made: argmax over 5 columns gives 4 for the second row */
    float w[10] = {9, 0, 0, 0, 0, 0, 0, 0, 0, 9};
    int64_t s25[2] = {2, 5};
    vdev_tensor_t *made = vdev_argmax(vdev_tensor_from_host(w, s25, 2, VDEV_F32));
    CHECK(vdev_softmax_cross_entropy(logits, made) == NULL);
    CHECK_STR(vdev_last_error(), CE "Received a label value of 4 which is outside the valid range "
                                    "of [0, 3).  Label values: 0 4");
    int64_t flat[1] = {2};
    CHECK(vdev_softmax_cross_entropy(logits, vdev_reshape(made, flat, 1)) == NULL);
    CHECK_MSG("Received a label value of 4");
    /* on a variable written in place since it was uploaded */
    int32_t good[2] = {2, 0}, worse[2] = {1, 7};
    vdev_tensor_t *var = vdev_variable(vdev_tensor_from_host(good, s2, 1, VDEV_I32));
    float ce = vdev_tensor_item(vdev_softmax_cross_entropy(logits, var));
    double l0 = log(exp(1.0) + exp(2.0) + exp(3.0));
    CHECK(fabs(ce - ((l0 - 3.0) + (l0 + 3.0 - 4.0)) / 2.0) < 1e-6);
    CHECK_OK(vdev_assign(var, vdev_tensor_from_host(worse, s2, 1, VDEV_I32)));
    CHECK(vdev_softmax_cross_entropy(logits, var) == NULL);
    CHECK_MSG("Received a label value of 7 which is outside the valid range of [0, 3).  Label "
              "values: 1 7");
    vdev_tensor_free(var);
    /* a long list: the first 30 or so labels, then "..." */
    int64_t n = 1000, sn[1] = {1000}, snc[2] = {1000, 3};
    int32_t *many = calloc((size_t)n, sizeof *many);
    many[999] = 3;
    vdev_tensor_t *lg = vdev_tensor_zeros(snc, 2, VDEV_F32);
    CHECK(vdev_softmax_cross_entropy(lg, vdev_tensor_from_host(many, sn, 1, VDEV_I32)) == NULL);
    CHECK_MSG("Received a label value of 3 which is outside the valid range of [0, 3).  Label "
              "values: 0 0 0 ");
    CHECK(strlen(vdev_last_error()) < 400);
    CHECK(strcmp(vdev_last_error() + strlen(vdev_last_error()) - 4, " ...") == 0);
    many[999] = 2;
    CHECK(isfinite(vdev_tensor_item(
        vdev_softmax_cross_entropy(lg, vdev_tensor_from_host(many, sn, 1, VDEV_I32)))));
    free(many);
    vdev_scope_end();
    CHECK_EQ_U64(info(dev).bytes_in_use, m.bytes_in_use);
    CHECK_OK(vdev_device_pop());
}

/* ---- one input given twice ---- */

/* x + x with x on GPU:0 and the op on GPU:1 copies x once; that copy goes
 * with the op, whether the op succeeds (its output freed by the caller) or
 * fails its shape check (x @ x of [4,16]), scoped or not. Before the fix the
 * second input's extra reference to the shared copy was never given back:
 * each such op left a copy on GPU:1 (device memory and a tensor slot) for
 * the life of the process. Counted after N/10 and after N iterations. */
static void twice_loop(int n, const vdev_tensor_t *x, const vdev_tensor_t *x4, int scoped)
{
    for (int i = 0; i < n; i++) {
        if (scoped)
            vdev_scope_begin();
        CHECK_OK(vdev_device_push("GPU:1"));
        vdev_tensor_t *sum = vdev_add(x, x);
        vdev_tensor_t *prod = vdev_matmul(x4, x4, true, false); /* [16,4] @ [4,16] */
        CHECK(sum != NULL && prod != NULL);
        CHECK(vdev_matmul(x, x, false, false) == NULL);
        CHECK(vdev_last_status() == VDEV_ERR_SHAPE);
        CHECK_STR(vdev_last_error(),
                  "MatMul: Matrix size-incompatible: In[0]: [4,16], In[1]: [4,16]");
        vdev_tensor_free(sum);
        vdev_tensor_free(prod);
        CHECK_OK(vdev_device_pop());
        if (scoped)
            vdev_scope_end();
    }
}

static void test_input_twice(void)
{
    check_fresh("2x1GiB");
    CHECK_OK(vdev_init());
    vdev_tensor_t *x = on("GPU:0", 4, 16, 1.0), *x4 = on("GPU:0", 4, 16, 0.5);
    uint32_t live0 = live_tensors();
    for (int scoped = 0; scoped < 2; scoped++) {
        twice_loop(10, x, x4, scoped);
        struct vdev_memory_info a = info("GPU:1");
        uint32_t live_a = live_tensors();
        twice_loop(100, x, x4, scoped);
        struct vdev_memory_info b = info("GPU:1");
        CHECK_EQ_U64(a.n_allocs, 0);
        CHECK_EQ_U64(b.n_allocs, a.n_allocs);
        CHECK_EQ_U64(b.bytes_in_use, a.bytes_in_use);
        CHECK_EQ_U64(live_a, live0);
        CHECK_EQ_U64(live_tensors(), live_a);
    }
    vdev_tensor_free(x);
    vdev_tensor_free(x4);
    vdev_shutdown();
}

int main(void)
{
    test_strict();
    test_copy_oom();
    test_input_twice();
    check_fresh("1x1GiB");
    CHECK_OK(vdev_init());
    test_labels("CPU:0");
    test_labels("GPU:0");
    vdev_shutdown();
    return check_done();
}
