/* test_dlpack.c — tensors through DLPack: export of CPU and simulated-GPU
 * tensors (views, scalars, empty tensors, i32) with their shape, strides,
 * device and contents; the export keeping the memory after the handle is
 * freed, and after vdev_shutdown() its deleter still running cleanly; import
 * of compact host memory without a copy (the producer's deleter runs when the
 * tensor's last reference goes, also after shutdown), a simulated GPU's
 * export seeing vdev's later writes at once, of strided, negative-
 * stride and unaligned memory by copy (deleter at once); every refused input
 * with its status and message, the producer's memory untouched and its
 * deleter not called. Run under ASan: the deleters free what they should,
 * once. */
#define _GNU_SOURCE
#include "check.h"

#include <dlpack/dlpack.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t in_use(const char *dev)
{
    struct vdev_memory_info mi;
    CHECK_OK(vdev_memory_info(dev, &mi));
    return mi.bytes_in_use;
}

static vdev_tensor_t *from(const float *h, const int64_t *shape, int ndim)
{
    return vdev_tensor_from_host(h, shape, ndim, VDEV_F32);
}

/* ---- a producer: host memory with a deleter that counts its calls ---- */

struct producer {
    DLManagedTensor m;
    int64_t shape[8], strides[8];
    int deleted;
    _Alignas(16) char buf[256];
};

static void producer_deleter(DLManagedTensor *m)
{
    struct producer *p = m->manager_ctx;
    p->deleted++;
}

/* A producer of ndim dims over p->buf + offset; strides NULL unless given. */
static void produce(struct producer *p, DLDataType dt, int ndim, const int64_t *shape,
                    const int64_t *strides, uint64_t offset)
{
    memset(p, 0, sizeof *p);
    for (int i = 0; i < ndim; i++) {
        p->shape[i] = shape[i];
        if (strides)
            p->strides[i] = strides[i];
    }
    p->m.dl_tensor.data = p->buf;
    p->m.dl_tensor.byte_offset = offset;
    p->m.dl_tensor.device = (DLDevice){kDLCPU, 0};
    p->m.dl_tensor.ndim = ndim;
    p->m.dl_tensor.dtype = dt;
    p->m.dl_tensor.shape = p->shape;
    p->m.dl_tensor.strides = strides ? p->strides : NULL;
    p->m.manager_ctx = p;
    p->m.deleter = producer_deleter;
}

static const DLDataType F32 = {kDLFloat, 32, 1}, I32 = {kDLInt, 32, 1};

/* ---- export ---- */

/* A CPU tensor: shape, strides, dtype, device, contents; the memory stays
 * after the handle is freed and goes back when the deleter runs. */
static void test_export_cpu(void)
{
    check_fresh("2x1GiB");
    CHECK_OK(vdev_device_push("CPU:0"));
    uint64_t base = in_use("CPU:0");
    float h[6] = {1, 2, 3, 4, 5, 6};
    int64_t s[2] = {2, 3};
    vdev_tensor_t *t = from(h, s, 2);
    CHECK(t != NULL);
    DLManagedTensor *m = (DLManagedTensor *)1;
    CHECK_OK(vdev_tensor_to_dlpack(t, &m));
    CHECK(m != NULL);
    CHECK(vdev_dlpack_live_exports() == 1);
    const DLTensor *d = &m->dl_tensor;
    CHECK(d->device.device_type == kDLCPU && d->device.device_id == 0);
    CHECK(d->dtype.code == kDLFloat && d->dtype.bits == 32 && d->dtype.lanes == 1);
    CHECK(d->ndim == 2 && d->shape[0] == 2 && d->shape[1] == 3);
    CHECK(d->strides && d->strides[0] == 3 && d->strides[1] == 1);
    CHECK(d->byte_offset == 0);
    CHECK(memcmp(d->data, h, sizeof h) == 0);
    vdev_tensor_free(t);
    CHECK(in_use("CPU:0") > base);   /* the export holds the memory */
    CHECK(memcmp(d->data, h, sizeof h) == 0);
    m->deleter(m);
    CHECK(in_use("CPU:0") == base);
    CHECK(vdev_dlpack_live_exports() == 0);
    vdev_device_pop();
}

/* A simulated GPU's tensor made by an op on its stream: the export waits for
 * it, so the contents are final; writes through the export are the tensor's. */
static void test_export_sim(void)
{
    check_fresh("2x1GiB");
    CHECK_OK(vdev_device_push("GPU:1"));
    float h[4] = {1, -2, 3, -4};
    int64_t s[1] = {4};
    vdev_tensor_t *a = from(h, s, 1);
    vdev_tensor_t *a2 = vdev_mul_scalar(a, 2);
    vdev_tensor_t *r = vdev_relu(a2);
    CHECK(r != NULL);
    DLManagedTensor *m;
    CHECK_OK(vdev_tensor_to_dlpack(r, &m));
    const float *p = m->dl_tensor.data;
    CHECK(m->dl_tensor.device.device_type == kDLCPU); /* host-readable */
    CHECK(p[0] == 2 && p[1] == 0 && p[2] == 6 && p[3] == 0);
    ((float *)m->dl_tensor.data)[1] = 7;
    float back[4];
    CHECK_OK(vdev_tensor_to_host(r, back, sizeof back));
    CHECK(back[1] == 7);
    vdev_tensor_free(a);
    vdev_tensor_free(a2);
    vdev_tensor_free(r);
    CHECK(in_use("GPU:1") > 0);
    m->deleter(m);
    CHECK(in_use("GPU:1") == 0);
    vdev_device_pop();

    /* i32: kDLInt */
    CHECK_OK(vdev_device_push("GPU:0"));
    vdev_tensor_t *i = vdev_tensor_fill(s, 1, VDEV_I32, 5);
    CHECK_OK(vdev_tensor_to_dlpack(i, &m));
    CHECK(m->dl_tensor.dtype.code == kDLInt && m->dl_tensor.dtype.bits == 32);
    CHECK(((const int32_t *)m->dl_tensor.data)[3] == 5);
    m->deleter(m);
    vdev_tensor_free(i);
    CHECK(in_use("GPU:0") == 0);
    vdev_device_pop();
}

/* A simulated GPU's variable exported as host memory: a write after the
 * export (assign, an optimizer update) is finished when the call returns,
 * since the consumer reads the memory at once and has no stream to wait on.
 * A large product queued first keeps the stream busy, so a write that did
 * not wait would still be queued when the memory is read. */
static void test_export_sim_then_write(void)
{
    check_fresh("1x1GiB");
    CHECK_OK(vdev_device_push("GPU:0"));
    int64_t s[1] = {4}, sb[2] = {768, 768};
    float h[4] = {1, 2, 3, 4}, h2[4] = {7, 8, 9, 10};
    vdev_tensor_t *w = vdev_variable(from(h, s, 1)), *v2 = from(h2, s, 1);
    vdev_tensor_t *big = vdev_tensor_fill(sb, 2, VDEV_F32, 1);
    DLManagedTensor *m;
    CHECK_OK(vdev_tensor_to_dlpack(w, &m));
    const volatile float *p = m->dl_tensor.data;
    vdev_tensor_t *busy[3];
    for (int k = 0; k < 3; k++)
        busy[k] = vdev_matmul(big, big, false, false);
    CHECK_OK(vdev_assign(w, v2));
    CHECK(p[0] == 7 && p[3] == 10);
    for (int k = 0; k < 3; k++)
    {
        vdev_tensor_free(busy[k]);
        busy[k] = vdev_matmul(big, big, false, false);
    }
    vdev_tensor_t *g = vdev_tensor_fill(s, 1, VDEV_F32, 1);
    vdev_optimizer_t *o = vdev_sgd_new(0.5f, 0);
    CHECK_OK(vdev_optimizer_apply(o, &w, &g, 1)); /* 7 - 0.5 */
    CHECK(p[0] == 6.5f && p[3] == 9.5f);
    m->deleter(m);
    vdev_optimizer_free(o);
    for (int k = 0; k < 3; k++)
        vdev_tensor_free(busy[k]);
    vdev_tensor_t *all[] = {w, v2, big, g};
    for (size_t k = 0; k < sizeof all / sizeof *all; k++)
        vdev_tensor_free(all[k]);
    vdev_device_pop();
}

/* The other way round: the consumer writes the exported memory after vdev
 * queued reads of it (an op's input, a copy's source), which must see what
 * it held when they were issued. Large products queued first keep the
 * stream busy, so a read that did not wait would still be queued when the
 * consumer writes. */
static void test_export_sim_then_consumer_writes(void)
{
    check_fresh("2x1GiB");
    CHECK_OK(vdev_device_push("GPU:0"));
    int64_t s[1] = {4}, sb[2] = {768, 768};
    float h[4] = {1, 2, 3, 4};
    vdev_tensor_t *x = from(h, s, 1);
    vdev_tensor_t *big = vdev_tensor_fill(sb, 2, VDEV_F32, 1);
    DLManagedTensor *m;
    CHECK_OK(vdev_tensor_to_dlpack(x, &m));
    volatile float *p = m->dl_tensor.data;
    vdev_tensor_t *busy[6];
    for (int k = 0; k < 3; k++)
        busy[k] = vdev_matmul(big, big, false, false);
    vdev_tensor_t *y = vdev_mul_scalar(x, 10); /* an op reading x */
    p[0] = 100;                                /* the consumer writes x at once */
    for (int k = 3; k < 6; k++)
        busy[k] = vdev_matmul(big, big, false, false);
    vdev_tensor_t *c = vdev_tensor_to(x, "GPU:1"); /* a copy reading x */
    p[1] = 200;
    float gy[4], gc[4];
    CHECK_OK(vdev_tensor_to_host(y, gy, sizeof gy));
    CHECK_OK(vdev_tensor_to_host(c, gc, sizeof gc));
    CHECK(gy[0] == 10 && gy[1] == 20 && gy[3] == 40);
    CHECK(gc[0] == 100 && gc[1] == 2 && gc[3] == 4);
    m->deleter(m);
    for (int k = 0; k < 6; k++)
        vdev_tensor_free(busy[k]);
    vdev_tensor_t *all[] = {x, big, y, c};
    for (size_t k = 0; k < sizeof all / sizeof *all; k++)
        vdev_tensor_free(all[k]);
    vdev_device_pop();
}

/* A view (reshape) keeps its base's memory; scalars and empty tensors have a
 * valid shape pointer and a non-NULL data pointer. */
static void test_export_view_scalar_empty(void)
{
    check_fresh("1x1GiB");
    float h[6] = {1, 2, 3, 4, 5, 6};
    int64_t s[2] = {2, 3}, s3[3] = {3, 2, 1};
    vdev_tensor_t *t = from(h, s, 2);
    vdev_tensor_t *v = vdev_reshape(t, s3, 3);
    DLManagedTensor *m;
    CHECK_OK(vdev_tensor_to_dlpack(v, &m));
    CHECK(m->dl_tensor.ndim == 3 && m->dl_tensor.shape[0] == 3 && m->dl_tensor.strides[0] == 2 &&
          m->dl_tensor.strides[2] == 1);
    vdev_tensor_free(v);
    vdev_tensor_free(t);
    CHECK(((const float *)m->dl_tensor.data)[5] == 6);
    CHECK(in_use("GPU:0") > 0);
    m->deleter(m);
    CHECK(in_use("GPU:0") == 0);

    vdev_tensor_t *t2 = from(h, s, 2);
    vdev_tensor_t *sc = vdev_sum_all(t2);
    vdev_tensor_free(t2);
    CHECK_OK(vdev_tensor_to_dlpack(sc, &m));
    CHECK(m->dl_tensor.ndim == 0 && m->dl_tensor.shape != NULL);
    CHECK(*(const float *)m->dl_tensor.data == 21);
    m->deleter(m);
    vdev_tensor_free(sc);

    int64_t e[2] = {0, 3};
    vdev_tensor_t *em = vdev_tensor_zeros(e, 2, VDEV_F32);
    CHECK_OK(vdev_tensor_to_dlpack(em, &m));
    CHECK(m->dl_tensor.data != NULL && m->dl_tensor.shape[0] == 0 && m->dl_tensor.shape[1] == 3);
    CHECK((uintptr_t)m->dl_tensor.data % 256 == 0);
    m->deleter(m);
    vdev_tensor_free(em);
    CHECK(vdev_dlpack_live_exports() == 0);
    CHECK(in_use("GPU:0") == 0);
}

/* Refused exports leave *out NULL and say why. */
static void test_export_errors(void)
{
    check_fresh("1x1GiB");
    CHECK_STATUS(vdev_tensor_to_dlpack(NULL, NULL), VDEV_ERR_INVALID_ARG);
    CHECK_MSG("vdev_tensor_to_dlpack: out is NULL");
    DLManagedTensor *m = (DLManagedTensor *)1;
    CHECK_STATUS(vdev_tensor_to_dlpack(NULL, &m), VDEV_ERR_INVALID_ARG);
    CHECK_STR(vdev_last_error(), "vdev_tensor_to_dlpack: tensor is NULL");
    CHECK(m == NULL);
    int64_t s[1] = {2};
    vdev_tensor_t *t = vdev_tensor_ones(s, 1, VDEV_F32);
    vdev_tensor_free(t);
    m = (DLManagedTensor *)1;
    CHECK_STATUS(vdev_tensor_to_dlpack(t, &m), VDEV_ERR_INVALID_ARG);
    CHECK_STR(vdev_last_error(),
              "vdev_tensor_to_dlpack: not a live tensor (freed already, or not a tensor)");
    CHECK(m == NULL);
    t = vdev_tensor_ones(s, 1, VDEV_F32);
    vdev_shutdown();
    CHECK_OK(vdev_init());
    CHECK_STATUS(vdev_tensor_to_dlpack(t, &m), VDEV_ERR_INVALID_ARG);
    CHECK_MSG("vdev_tensor_to_dlpack: the tensor belongs to a runtime that was shut down");
    vdev_tensor_free(t);
    CHECK(vdev_dlpack_live_exports() == 0);
}

/* An export alive at vdev_shutdown(): its deleter runs cleanly afterwards,
 * and after a new start-up (ASan: no use of freed memory, nothing leaks). */
static void test_export_across_shutdown(void)
{
    check_fresh("1x1GiB");
    int64_t s[1] = {3};
    vdev_tensor_t *t = vdev_tensor_ones(s, 1, VDEV_F32);
    DLManagedTensor *m;
    CHECK_OK(vdev_tensor_to_dlpack(t, &m));
    vdev_shutdown();
    CHECK(vdev_dlpack_live_exports() == 1);
    CHECK_OK(vdev_init());
    m->deleter(m);
    CHECK(vdev_dlpack_live_exports() == 0);
    CHECK(in_use("GPU:0") == 0);
    vdev_tensor_free(t);
}

/* ---- import ---- */

/* Compact host memory: no copy (the tensor sees later writes to the
 * producer's memory), no memory of CPU:0 used, deleter at the last reference
 * (a view made from it holds it too). */
static void test_import_zero_copy(void)
{
    check_fresh("1x1GiB");
    struct producer p;
    int64_t s[2] = {2, 2};
    produce(&p, F32, 2, s, NULL, 0);
    float *f = (float *)p.buf;
    f[0] = 1, f[1] = 2, f[2] = 3, f[3] = 4;
    CHECK_OK(vdev_init());
    uint64_t base = in_use("CPU:0");
    vdev_tensor_t *t = vdev_tensor_from_dlpack(&p.m);
    CHECK(t != NULL);
    CHECK_STR(vdev_tensor_device(t), "/device:CPU:0");
    CHECK(vdev_tensor_dtype(t) == VDEV_F32 && vdev_tensor_dim(t, 0) == 2);
    CHECK(in_use("CPU:0") == base);
    f[3] = 40; /* the producer's memory is the tensor's */
    float back[4];
    CHECK_OK(vdev_tensor_to_host(t, back, sizeof back));
    CHECK(back[0] == 1 && back[3] == 40);
    /* ops read it, also on a simulated GPU */
    vdev_tensor_t *g = vdev_tensor_to(t, "GPU:0");
    vdev_tensor_t *sum = vdev_sum_all(g);
    CHECK(vdev_tensor_item(sum) == 46);
    int64_t s1[1] = {4};
    vdev_tensor_t *v = vdev_reshape(t, s1, 1);
    vdev_tensor_free(t);
    CHECK(p.deleted == 0); /* the view holds it */
    vdev_tensor_free(v);
    CHECK(p.deleted == 1);
    vdev_tensor_free(g);
    vdev_tensor_free(sum);
    CHECK(p.deleted == 1);

    /* i32, 0 dimensions */
    produce(&p, I32, 0, NULL, NULL, 0);
    *(int32_t *)p.buf = -7;
    t = vdev_tensor_from_dlpack(&p.m);
    CHECK(t != NULL && vdev_tensor_ndim(t) == 0 && vdev_tensor_dtype(t) == VDEV_I32);
    int32_t iv;
    CHECK_OK(vdev_tensor_to_host(t, &iv, sizeof iv));
    CHECK(iv == -7);
    vdev_tensor_free(t);
    CHECK(p.deleted == 1);

    /* strides that equal the packed ones (and any stride on a size-1 axis) */
    int64_t s3[3] = {2, 1, 3}, st3[3] = {3, 99, 1};
    produce(&p, F32, 3, s3, st3, 0);
    t = vdev_tensor_from_dlpack(&p.m);
    CHECK(t != NULL && p.deleted == 0);
    vdev_tensor_free(t);
    CHECK(p.deleted == 1);

    /* no elements, no data */
    int64_t s0[2] = {0, 5};
    produce(&p, F32, 2, s0, NULL, 0);
    p.m.dl_tensor.data = NULL;
    t = vdev_tensor_from_dlpack(&p.m);
    CHECK(t != NULL && vdev_tensor_numel(t) == 0 && p.deleted == 0);
    vdev_tensor_free(t);
    CHECK(p.deleted == 1);

    /* a producer without a deleter */
    produce(&p, F32, 2, s, NULL, 0);
    p.m.deleter = NULL;
    t = vdev_tensor_from_dlpack(&p.m);
    CHECK(t != NULL);
    vdev_tensor_free(t);
}

/* Strided, negative-stride and unaligned memory: copied, deleter at once. */
static void test_import_copies(void)
{
    check_fresh("1x1GiB");
    CHECK_OK(vdev_init());
    struct producer p;
    /* a transposed 2x3 view of a 3x2 row-major array */
    int64_t s[2] = {2, 3}, st[2] = {1, 2};
    produce(&p, F32, 2, s, st, 0);
    float *f = (float *)p.buf;
    for (int i = 0; i < 6; i++)
        f[i] = (float)i; /* [[0,1],[2,3],[4,5]] */
    uint64_t base = in_use("CPU:0");
    vdev_tensor_t *t = vdev_tensor_from_dlpack(&p.m);
    CHECK(t != NULL && p.deleted == 1);
    CHECK(in_use("CPU:0") > base);
    float back[6];
    CHECK_OK(vdev_tensor_to_host(t, back, sizeof back));
    CHECK(back[0] == 0 && back[1] == 2 && back[2] == 4 && back[3] == 1 && back[4] == 3 &&
          back[5] == 5);
    vdev_tensor_free(t);
    CHECK(in_use("CPU:0") == base);

    /* reversed: stride -1 from the last element */
    int64_t s1[1] = {4}, neg[1] = {-1};
    produce(&p, F32, 1, s1, neg, 3 * sizeof(float));
    for (int i = 0; i < 4; i++)
        f[i] = (float)(10 + i);
    t = vdev_tensor_from_dlpack(&p.m);
    CHECK(t != NULL && p.deleted == 1);
    CHECK_OK(vdev_tensor_to_host(t, back, 4 * sizeof(float)));
    CHECK(back[0] == 13 && back[1] == 12 && back[2] == 11 && back[3] == 10);
    vdev_tensor_free(t);

    /* 4 dimensions, every other element of the last axis */
    int64_t s4[4] = {1, 2, 2, 2}, st4[4] = {16, 8, 4, 2};
    produce(&p, F32, 4, s4, st4, 0);
    for (int i = 0; i < 16; i++)
        f[i] = (float)i;
    t = vdev_tensor_from_dlpack(&p.m);
    CHECK(t != NULL && p.deleted == 1);
    float b8[8];
    CHECK_OK(vdev_tensor_to_host(t, b8, sizeof b8));
    CHECK(b8[0] == 0 && b8[1] == 2 && b8[2] == 4 && b8[3] == 6 && b8[4] == 8 && b8[7] == 14);
    vdev_tensor_free(t);

    /* compact but not 4-byte aligned */
    produce(&p, F32, 1, s1, NULL, 2);
    float v[4] = {1.5f, 2.5f, 3.5f, 4.5f};
    memcpy(p.buf + 2, v, sizeof v);
    t = vdev_tensor_from_dlpack(&p.m);
    CHECK(t != NULL && p.deleted == 1);
    CHECK_OK(vdev_tensor_to_host(t, back, 4 * sizeof(float)));
    CHECK(memcmp(back, v, sizeof v) == 0);
    vdev_tensor_free(t);
    CHECK(in_use("CPU:0") == base);
}

/* Imported memory is the producer's: a scope's end releases it, and so does
 * freeing the handle after vdev_shutdown(). */
static void test_import_scope_and_shutdown(void)
{
    check_fresh("1x1GiB");
    struct producer p;
    int64_t s[1] = {4};
    produce(&p, F32, 1, s, NULL, 0);
    CHECK_OK(vdev_scope_begin());
    vdev_tensor_t *t = vdev_tensor_from_dlpack(&p.m);
    CHECK(t != NULL);
    vdev_scope_end();
    CHECK(p.deleted == 1);

    produce(&p, F32, 1, s, NULL, 0);
    t = vdev_tensor_from_dlpack(&p.m);
    CHECK(t != NULL);
    vdev_shutdown();
    CHECK(p.deleted == 0);
    vdev_tensor_free(t);
    CHECK(p.deleted == 1);
}

/* vdev's own export imported back: the same memory, both deleters run. */
static void test_round_trip(void)
{
    check_fresh("1x1GiB");
    float h[3] = {1, 2, 3};
    int64_t s[1] = {3};
    CHECK_OK(vdev_device_push("GPU:0"));
    vdev_tensor_t *t = from(h, s, 1);
    vdev_device_pop();
    DLManagedTensor *m;
    CHECK_OK(vdev_tensor_to_dlpack(t, &m));
    vdev_tensor_t *u = vdev_tensor_from_dlpack(m); /* the GPU's memory, read as host memory */
    CHECK(u != NULL);
    CHECK_STR(vdev_tensor_device(u), "/device:CPU:0");
    vdev_tensor_free(t);
    CHECK(vdev_dlpack_live_exports() == 1);
    vdev_tensor_t *sum = vdev_sum_all(u);
    CHECK(vdev_tensor_item(sum) == 6);
    vdev_tensor_free(sum);
    vdev_tensor_free(u);
    CHECK(vdev_dlpack_live_exports() == 0);
    CHECK(in_use("GPU:0") == 0);
}

/* Refused imports: status, message, producer untouched. */
static void test_import_errors(void)
{
    check_fresh("1x1GiB");
    CHECK(vdev_tensor_from_dlpack(NULL) == NULL);
    CHECK(vdev_last_status() == VDEV_ERR_INVALID_ARG);
    CHECK_STR(vdev_last_error(), "vdev_tensor_from_dlpack: the DLPack tensor is NULL");

    struct producer p;
    int64_t s[2] = {2, 2};
    produce(&p, F32, 2, s, NULL, 0);
    p.m.dl_tensor.device = (DLDevice){kDLCUDA, 1};
    CHECK(vdev_tensor_from_dlpack(&p.m) == NULL);
    CHECK(vdev_last_status() == VDEV_ERR_UNSUPPORTED);
    CHECK_STR(vdev_last_error(),
              "vdev_tensor_from_dlpack: the memory is on kDLCUDA (device type 2, device 1), which "
              "the host cannot read; vdev imports host memory (kDLCPU, kDLCUDAHost, "
              "kDLCUDAManaged): copy it to the host first");
    p.m.dl_tensor.device = (DLDevice){(DLDeviceType)99, 0};
    CHECK(vdev_tensor_from_dlpack(&p.m) == NULL);
    CHECK_MSG("on an unknown device type (device type 99, device 0)");
    p.m.dl_tensor.device = (DLDevice){(DLDeviceType)14, 0}; /* DLPack 0.7's kDLOneAPI */
    CHECK(vdev_tensor_from_dlpack(&p.m) == NULL);
    CHECK_MSG("the memory is on kDLOneAPI (device type 14, device 0)");

    produce(&p, (DLDataType){kDLFloat, 64, 1}, 2, s, NULL, 0);
    CHECK(vdev_tensor_from_dlpack(&p.m) == NULL);
    CHECK(vdev_last_status() == VDEV_ERR_UNSUPPORTED);
    CHECK_STR(vdev_last_error(), "vdev_tensor_from_dlpack: dtype float64; vdev tensors are "
                                 "float32 or int32: cast it to float32 before the import");
    produce(&p, (DLDataType){kDLInt, 64, 1}, 2, s, NULL, 0);
    CHECK(vdev_tensor_from_dlpack(&p.m) == NULL);
    CHECK_STR(vdev_last_error(), "vdev_tensor_from_dlpack: dtype int64; vdev tensors are "
                                 "float32 or int32: cast it to int32 before the import");
    produce(&p, (DLDataType){kDLFloat, 32, 4}, 2, s, NULL, 0);
    CHECK(vdev_tensor_from_dlpack(&p.m) == NULL);
    CHECK_MSG("dtype float32x4;");
    produce(&p, (DLDataType){kDLUInt, 8, 1}, 2, s, NULL, 0);
    CHECK(vdev_tensor_from_dlpack(&p.m) == NULL);
    CHECK_MSG("dtype uint8; vdev tensors are float32 or int32: cast it to int32 before the "
              "import");
    produce(&p, (DLDataType){kDLBfloat, 16, 1}, 2, s, NULL, 0);
    CHECK(vdev_tensor_from_dlpack(&p.m) == NULL);
    CHECK_MSG("dtype bfloat16; vdev tensors are float32 or int32: cast it to float32 before "
              "the import");
    produce(&p, (DLDataType){6, 8, 1}, 2, s, NULL, 0); /* kDLBool, DLPack 0.8 */
    CHECK(vdev_tensor_from_dlpack(&p.m) == NULL);
    CHECK(vdev_last_status() == VDEV_ERR_UNSUPPORTED);
    CHECK_STR(vdev_last_error(),
              "vdev_tensor_from_dlpack: dtype bool8; a vdev bool tensor holds 32-bit words, "
              "which DLPack's 8-bit bool cannot share: cast it to int32 before the import (and "
              "to bool after it, vdev_cast)");
    CHECK(p.deleted == 0); /* still the caller's */
    produce(&p, (DLDataType){9, 8, 1}, 2, s, NULL, 0);
    CHECK(vdev_tensor_from_dlpack(&p.m) == NULL);
    CHECK_STR(vdev_last_error(), "vdev_tensor_from_dlpack: dtype code 9 (8 bits, 1 lanes); "
                                 "vdev tensors are float32 or int32");

    int64_t s5[5] = {1, 1, 1, 1, 2};
    produce(&p, F32, 5, s5, NULL, 0);
    CHECK(vdev_tensor_from_dlpack(&p.m) == NULL);
    CHECK(vdev_last_status() == VDEV_ERR_UNSUPPORTED);
    CHECK_STR(vdev_last_error(),
              "vdev_tensor_from_dlpack: 5 dimensions; vdev tensors have 0 to 4");

    int64_t sn[2] = {2, -1};
    produce(&p, F32, 2, sn, NULL, 0);
    CHECK(vdev_tensor_from_dlpack(&p.m) == NULL);
    CHECK(vdev_last_status() == VDEV_ERR_INVALID_ARG);
    CHECK_STR(vdev_last_error(), "vdev_tensor_from_dlpack: dimension 1 is negative (-1)");

    produce(&p, F32, 2, s, NULL, 0);
    p.m.dl_tensor.shape = NULL;
    CHECK(vdev_tensor_from_dlpack(&p.m) == NULL);
    CHECK_STR(vdev_last_error(), "vdev_tensor_from_dlpack: shape is NULL");

    produce(&p, F32, 2, s, NULL, 0);
    p.m.dl_tensor.data = NULL;
    CHECK(vdev_tensor_from_dlpack(&p.m) == NULL);
    CHECK(vdev_last_status() == VDEV_ERR_INVALID_ARG);
    CHECK_STR(vdev_last_error(), "vdev_tensor_from_dlpack: data is NULL");
    CHECK(p.deleted == 0);

    /* a bad configuration: start-up fails, the producer stays the caller's */
    check_fresh("1x1GiB");
    setenv("VDEV_MEMORY_GROWTH", "maybe", 1);
    produce(&p, F32, 2, s, NULL, 0);
    CHECK(vdev_tensor_from_dlpack(&p.m) == NULL);
    CHECK(vdev_last_status() == VDEV_ERR_CONFIG);
    CHECK(p.deleted == 0);
    unsetenv("VDEV_MEMORY_GROWTH");
}

int main(void)
{
    test_export_cpu();
    test_export_sim();
    test_export_sim_then_write();
    test_export_sim_then_consumer_writes();
    test_export_view_scalar_empty();
    test_export_errors();
    test_export_across_shutdown();
    test_import_zero_copy();
    test_import_copies();
    test_import_scope_and_shutdown();
    test_round_trip();
    test_import_errors();
    check_fresh(NULL);
    return check_done();
}
