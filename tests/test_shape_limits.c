/* test_shape_limits.c — shapes too large for a tensor. A tensor holds fewer
 * than 2^60 elements (VDEV_MAX_NUMEL), and no product of its leading
 * dimensions reaches 2^60. A reshape whose dimensions multiply past it,
 * wrapping in 64 bits to the element count it had (or to a divisor of it,
 * with a -1 to infer), is refused as a new tensor of that shape is, with
 * VDEV_ERR_INVALID_ARG and a message that names the call (or the op) and
 * the shape, for every call that makes a tensor and for an op's output; the
 * largest shapes under the limit still pass. */
#include "check.h"

#define BIG (((int64_t)1 << 62) + 1) /* times 4 wraps to 4 */

static void reshape_too_large(void)
{
    int64_t s4[1] = {4};
    vdev_tensor_t *a = vdev_tensor_ones(s4, 1, VDEV_F32);
    CHECK(a != NULL);

    int64_t wraps[2] = {BIG, 4};
    CHECK(vdev_reshape(a, wraps, 2) == NULL);
    CHECK_EQ_U64(vdev_last_status(), VDEV_ERR_INVALID_ARG);
    CHECK_STR(vdev_last_error(),
              "Reshape: shape [4611686018427387905,4] is too large (2^60 elements or more)");

    /* the -1 inferred from the wrapped product (4) would be 1 */
    int64_t infer[3] = {-1, BIG, 4};
    CHECK(vdev_reshape(a, infer, 3) == NULL);
    CHECK_EQ_U64(vdev_last_status(), VDEV_ERR_INVALID_ARG);
    CHECK_STR(vdev_last_error(),
              "Reshape: shape [-1,4611686018427387905,4] is too large (2^60 elements or more)");

    /* a product that reaches 2^60 without wrapping, before a 0 */
    vdev_tensor_t *e = vdev_tensor_zeros((int64_t[]){0}, 1, VDEV_F32);
    CHECK(e != NULL);
    int64_t at_limit[2] = {(int64_t)1 << 60, 0};
    CHECK(vdev_reshape(e, at_limit, 2) == NULL);
    CHECK_EQ_U64(vdev_last_status(), VDEV_ERR_INVALID_ARG);
    CHECK_STR(vdev_last_error(),
              "Reshape: shape [1152921504606846976,0] is too large (2^60 elements or more)");
    /* under the limit: an empty tensor of that many rows */
    int64_t under[2] = {((int64_t)1 << 60) - 1, 0};
    vdev_tensor_t *r = vdev_reshape(e, under, 2);
    CHECK(r != NULL);
    CHECK_EQ_U64(vdev_tensor_dim(r, 0), ((int64_t)1 << 60) - 1);
    CHECK_EQ_U64(vdev_tensor_numel(r), 0);
    vdev_tensor_free(r);

    /* the tensor is untouched and still reshapes */
    int64_t s22[2] = {2, 2};
    r = vdev_reshape(a, s22, 2);
    CHECK(r != NULL);
    vdev_tensor_t *sum = vdev_sum(r, 0, true);
    float out[2] = {0, 0};
    CHECK_OK(vdev_tensor_to_host(sum, out, sizeof out));
    CHECK(out[0] == 2 && out[1] == 2);
    vdev_tensor_free(sum);
    vdev_tensor_free(r);
    vdev_tensor_free(e);
    vdev_tensor_free(a);
    CHECK_NO_LEAK("GPU:0");
}

#define TOO_LARGE(fn) fn ": shape [4611686018427387905,4] is too large (2^60 elements or more)"

/* t is NULL with VDEV_ERR_INVALID_ARG and exactly msg. */
static void refused(const vdev_tensor_t *t, const char *msg)
{
    CHECK(t == NULL);
    CHECK_EQ_U64(vdev_last_status(), VDEV_ERR_INVALID_ARG);
    CHECK_STR(vdev_last_error(), msg);
}

/* Each call that makes a tensor names itself and the shape; an op names
 * itself and its output's shape. */
static void creators_too_large(void)
{
    int64_t big[2] = {BIG, 4};
    float buf[4] = {1, 2, 3, 4};
    refused(vdev_tensor_zeros(big, 2, VDEV_F32), TOO_LARGE("vdev_tensor_zeros"));
    refused(vdev_tensor_ones(big, 2, VDEV_I32), TOO_LARGE("vdev_tensor_ones"));
    refused(vdev_tensor_fill(big, 2, VDEV_F32, 2), TOO_LARGE("vdev_tensor_fill"));
    refused(vdev_tensor_from_host(buf, big, 2, VDEV_F32), TOO_LARGE("vdev_tensor_from_host"));
    refused(vdev_tensor_from_host(NULL, big, 2, VDEV_F32), TOO_LARGE("vdev_tensor_from_host"));
    refused(vdev_tensor_uniform(big, 2, 0, 1, 7), TOO_LARGE("vdev_tensor_uniform"));
    refused(vdev_tensor_normal(big, 2, 0, 1, 7), TOO_LARGE("vdev_tensor_normal"));
    /* the product reaches 2^60 without wrapping */
    int64_t edge[3] = {(int64_t)1 << 30, (int64_t)1 << 29, 2};
    refused(vdev_tensor_zeros(edge, 3, VDEV_F32),
            "vdev_tensor_zeros: shape [1073741824,536870912,2] is too large (2^60 elements or "
            "more)");

    /* [2^40,0] x [0,2^40]: no element in, 2^80 out */
    int64_t a_s[2] = {(int64_t)1 << 40, 0}, b_s[2] = {0, (int64_t)1 << 40};
    vdev_tensor_t *a = vdev_tensor_zeros(a_s, 2, VDEV_F32);
    vdev_tensor_t *b = vdev_tensor_zeros(b_s, 2, VDEV_F32);
    CHECK(a && b);
    refused(vdev_matmul(a, b, false, false),
            "MatMul: shape [1099511627776,1099511627776] is too large (2^60 elements or more)");
    vdev_tensor_free(a);
    vdev_tensor_free(b);
    CHECK_NO_LEAK("GPU:0");
}

int main(void)
{
    check_fresh("2x1GiB");
    reshape_too_large();
    creators_too_large();
    vdev_shutdown();
    return check_done();
}
