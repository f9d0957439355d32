/* test_host_oom_ops.c — the host refusing memory, at every allocation in turn, in the
 * ops, the tensors and the tapes.
 *
 * As test_host_oom.c (the sweep and the retrying calls are host_oom.h's): each scenario
 * runs once for each n from 1 up with the calling thread's n-th host allocation
 * refused, then once with none refused. A call that fails must fail with VDEV_ERR_OOM
 * and only when the refusal came in it; the same call again must succeed and the run
 * go on to its end, whose digest (the bits of every result) must be the digest of the
 * run without a refusal: a refused op leaves no half-recorded node on the tape, a
 * refused gradient no half-made gradients. The sanitizer build's leak check reports
 * what a failed path left unfreed.
 *
 * The scenarios: a small convolutional net forward and backward on the cpu device and
 * on a simulated GPU; the 1-D and separable convolutions made of the 2-D ops; the
 * shape ops, broadcasting arithmetic and reductions with their gradients, a concat of
 * more tensors than one op takes included; the tensors (makers,
 * copies across devices, variables and assignment under a tape, scopes, identity,
 * stop_gradient, DLPack out and in); and the tapes (watch and skip, pause and resume,
 * several losses on one tape, seeded gradients, release, a tape of more than 256 ops).
 * Kernels on a simulated GPU run on its stream thread, whose allocations are never
 * refused: the sweep reaches what the calling thread allocates. */
#include "host_oom.h"

#include <dlpack/dlpack.h>
#include <stdint.h>
#include <string.h>

/* ---- what every scenario uses -------------------------------------------- */

/* The tensors a scenario made, freed at its end (newest first). */
static vdev_tensor_t *made[160];
static int n_made;

static vdev_tensor_t *own(vdev_tensor_t *t)
{
    CHECK(n_made < (int)VDEV_ARRAY_LEN(made));
    if (t && n_made < (int)VDEV_ARRAY_LEN(made))
        made[n_made++] = t;
    return t;
}

static void free_made(void)
{
    while (n_made)
        vdev_tensor_free(made[--n_made]);
}

/* A tensor made by call, retried on a refusal, freed at the scenario's end. */
#define MAKE(var, call)                                                                            \
    do {                                                                                           \
        RETRY_PTR(var, call);                                                                      \
        own(var);                                                                                  \
    } while (0)

/* The elements' bits (f32 or i32) and the shape into h; NULL is a mark of its own. */
static uint64_t digest(uint64_t h, const vdev_tensor_t *t)
{
    if (!t)
        return mix(h, 0xdeadull);
    int64_t n = vdev_tensor_numel(t);
    uint32_t v[2048];
    CHECK(n >= 0 && n <= (int64_t)VDEV_ARRAY_LEN(v));
    if (n < 0 || n > (int64_t)VDEV_ARRAY_LEN(v))
        return h;
    h = mix(h, (uint64_t)vdev_tensor_ndim(t));
    for (int d = 0; d < vdev_tensor_ndim(t); d++)
        h = mix(h, (uint64_t)vdev_tensor_dim(t, d));
    RETRY_OK(vdev_tensor_to_host(t, v, (size_t)n * 4));
    for (int64_t i = 0; i < n; i++)
        h = mix(h, v[i]);
    return h;
}

static vdev_tensor_t *var_uniform(const int64_t *shape, int ndim, uint64_t seed)
{
    vdev_tensor_t *t;
    RETRY_PTR(t, vdev_tensor_uniform(shape, ndim, -1, 1, seed));
    return own(vdev_variable(t));
}

static void start(void)
{
    check_fresh("1x64MiB");
    n_made = 0;
    RETRY_OK(vdev_init());
}

static void finish(void)
{
    free_made();
    struct vdev_memory_info mi;
    RETRY_OK(vdev_memory_info("GPU:0", &mi));
    CHECK_EQ_U64(mi.bytes_in_use, 0);
    CHECK(vdev_dlpack_live_exports() == 0);
    vdev_shutdown();
}

/* ---- ops: a convolutional net -------------------------------------------- */

/* conv2d, a dilated conv2d, a depthwise conv2d, a transposed conv2d, max and avg pool,
 * reshape, matmul and softmax cross entropy on `device`, the gradients of every
 * variable (the input's too). wide: windows of 3 and 2 and a transposed stride of 2.
 * Else the three ops of the Conv2D kernels take 1x1 windows, stride 1, which their
 * fast host kernels compute without a scratch buffer: a refused scratch buffer runs
 * the reference kernel instead, of other bits (conv_fast.c), which no digest could
 * match. */
static uint64_t convnet_on(const char *device, int wide, uint64_t h)
{
    RETRY_OK(vdev_device_push(device));
    const int64_t k1 = wide ? 3 : 1, k2 = wide ? 2 : 1, s4 = wide ? 2 : 1;
    const int64_t xs[4] = {2, 6, 6, 2}, f1s[4] = {k1, k1, 2, 3}, f2s[4] = {k2, k2, 3, 3},
                  f3s[4] = {3, 3, 3, 2}, f4s[4] = {k2, k2, 4, 6}, ws[2] = {16, 5}, ls[1] = {2},
                  flat[2] = {2, -1};
    /* wide: 6 -> 6 -> 4 -> 4 -> 8 -> 4 -> 2; else 6 -> 6 -> 6 -> 6 -> 6 -> 3 -> 2 */
    const int64_t hw = wide ? 8 : 6, out4[4] = {2, hw, hw, 4};
    const int32_t labels[2] = {1, 4};
    vdev_tensor_t *v[6] = {var_uniform(xs, 4, 1), var_uniform(f1s, 4, 2), var_uniform(f2s, 4, 3),
                           var_uniform(f3s, 4, 4), var_uniform(f4s, 4, 5), var_uniform(ws, 2, 6)};
    vdev_tensor_t *lab, *c1, *c2, *c3, *c4, *mp, *ap, *r, *logits, *loss, *g[6];
    MAKE(lab, vdev_tensor_from_host(labels, ls, 1, VDEV_I32));
    vdev_tape_t *tape;
    RETRY_PTR(tape, vdev_tape_begin());
    MAKE(c1, vdev_conv2d(v[0], v[1], 1, 1, "SAME"));
    MAKE(c2, vdev_conv2d_dilated(c1, v[2], 1, 1, 2, 2, "VALID"));
    MAKE(c3, vdev_depthwise_conv2d(c2, v[3], 1, 1, 1, 1, "SAME"));
    MAKE(c4, vdev_conv2d_transpose(c3, v[4], out4, 4, (int)s4, (int)s4, 1, 1, "SAME"));
    MAKE(mp, vdev_max_pool2d(c4, 2, 2, 2, 2, "VALID"));
    MAKE(ap, vdev_avg_pool2d(mp, 3, 3, 2, 2, "SAME"));                   /* 2,2,2,4 */
    MAKE(r, vdev_reshape(ap, flat, 2));                                  /* 2,16 */
    MAKE(logits, vdev_matmul(r, v[5], false, false));                    /* 2,5 */
    MAKE(loss, vdev_softmax_cross_entropy(logits, lab));
    RETRY_OK(vdev_tape_gradient(tape, loss, v, 6, g));
    vdev_tape_end(tape);
    for (int i = 0; i < 6; i++)
        own(g[i]);
    h = digest(h, loss);
    h = digest(h, c4);
    for (int i = 0; i < 6; i++)
        h = digest(h, g[i]);
    RETRY_OK(vdev_device_pop());
    return h;
}

static uint64_t convnet(void)
{
    start();
    uint64_t h = convnet_on("CPU:0", 0, 0);
    h = convnet_on("GPU:0", 1, h);
    finish();
    return h;
}

/* ---- ops: the convolutions and the pad made of others (conv_composed.c, pad.c) */

/* conv1d, max_pool1d, avg_pool1d, pad and mirror pad, separable_conv2d and a broadcast batched
 * product, with the gradients
 * of every operand, on `device`: a refusal inside one of them after its first views
 * were made must leave nothing behind, and the retried call the same bits. wide:
 * windows of 3 (on the simulated GPU, whose kernels allocate on its stream
 * thread); else 1-tap filters, for the reason convnet_on gives. */
static uint64_t composed_on(const char *device, int wide, uint64_t h)
{
    RETRY_OK(vdev_device_push(device));
    const int64_t k = wide ? 3 : 1;
    const int64_t xs[3] = {2, 8, 2}, fs[3] = {k, 2, 3}, is[4] = {1, 5, 5, 2},
                  ds[4] = {3, 3, 2, 2}, ps[4] = {1, 1, 4, 3};
    const int64_t bs[3] = {1, 4, 5};
    vdev_tensor_t *v[6] = {var_uniform(xs, 3, 21), var_uniform(fs, 3, 22), var_uniform(is, 4, 23),
                           var_uniform(ds, 4, 24), var_uniform(ps, 4, 25), var_uniform(bs, 3, 26)};
    const int64_t pads[6] = {1, 0, 0, 2, 1, 1}, mirrors[6] = {2, 1, 1, 3, 0, 4};
    vdev_tensor_t *c, *mp, *ap, *pd, *mr, *mr2, *sep, *sq, *s1, *s2, *bm, *s3, *sum12, *loss, *g[6];
    vdev_tape_t *tape;
    RETRY_PTR(tape, vdev_tape_begin());
    MAKE(c, vdev_conv1d(v[0], v[1], 1, 2, "SAME"));          /* 2,8,3 */
    MAKE(mp, vdev_max_pool1d(c, 2, 2, "VALID"));              /* 2,4,3 */
    MAKE(ap, vdev_avg_pool1d(mp, 3, 2, "SAME"));              /* 2,2,3 */
    MAKE(pd, vdev_pad(ap, pads, 3, 0.5));                     /* 3,4,5 */
    MAKE(mr, vdev_mirror_pad(pd, mirrors, 3, wide ? "REFLECT" : "SYMMETRIC")); /* 6,8,9 */
    MAKE(mr2, vdev_mul(mr, mr));
    MAKE(sep, vdev_separable_conv2d(v[2], v[3], v[4], 2, 2, 1, 1, "SAME")); /* 1,3,3,3 */
    MAKE(s1, vdev_sum_all(mr2));
    MAKE(sq, vdev_mul(sep, sep));
    MAKE(s2, vdev_sum_all(sq));
    MAKE(bm, vdev_batch_matmul(mp, v[5], 1, 0)); /* [2,4,3] adjointed x [1,4,5]: 2,3,5 */
    MAKE(s3, vdev_sum_all(bm));
    MAKE(sum12, vdev_add(s1, s2));
    MAKE(loss, vdev_add(sum12, s3));
    RETRY_OK(vdev_tape_gradient(tape, loss, v, 6, g));
    vdev_tape_end(tape);
    for (int i = 0; i < 6; i++)
        own(g[i]);
    h = digest(h, loss);
    h = digest(h, mr);
    h = digest(h, sep);
    h = digest(h, bm);
    for (int i = 0; i < 6; i++)
        h = digest(h, g[i]);
    RETRY_OK(vdev_device_pop());
    return h;
}

static uint64_t composed(void)
{
    start();
    uint64_t h = composed_on("CPU:0", 0, 0);
    h = composed_on("GPU:0", 1, h);
    finish();
    return h;
}

/* ---- ops: shapes, broadcasting, reductions ------------------------------- */

static uint64_t shape_ops_on(const char *device, uint64_t h)
{
    RETRY_OK(vdev_device_push(device));
    const int64_t s34[2] = {3, 4}, s14[2] = {1, 4}, s31[2] = {3, 1}, s2[1] = {2}, s3[1] = {3};
    vdev_tensor_t *a = var_uniform(s34, 2, 11), *b = var_uniform(s34, 2, 12),
                  *c = var_uniform(s14, 2, 13), *d = var_uniform(s31, 2, 14),
                  *e = var_uniform(s2, 1, 15);
    const int32_t rows[3] = {2, 0, 2};
    vdev_tensor_t *idx;
    MAKE(idx, vdev_tensor_from_host(rows, s3, 1, VDEV_I32));
    vdev_tape_t *tape;
    RETRY_PTR(tape, vdev_tape_begin());
    vdev_tensor_t *cc, *st, *sr, *ss, *ga, *tp, *x1, *x2, *c2, *c3, *x3, *mx, *mn, *s1, *m1, *lsm,
        *am, *a2, *a3, *sq, *many, *t[8];
    const vdev_tensor_t *ab[2] = {a, b};
    MAKE(cc, vdev_concat(ab, 2, 0));                                     /* 6,4 */
    MAKE(st, vdev_stack(ab, 2, 1));                                      /* 3,2,4 */
    MAKE(sr, vdev_slice_rows(cc, 1, 4));                                 /* 4,4 */
    const int64_t beg[3] = {0, 0, 3}, end[3] = {3, 2, 0}, str[3] = {1, 1, -2};
    MAKE(ss, vdev_strided_slice(st, 3, beg, end, str, 0, 0, 0, 0, 0));  /* 3,2,2 */
    MAKE(ga, vdev_gather(sr, idx));                                      /* 3,4 */
    const int perm[3] = {2, 0, 1};
    MAKE(tp, vdev_transpose_perm(ss, perm, 3));                          /* 2,3,2 */
    MAKE(x1, vdev_add(ga, c));                                           /* 3,4 */
    MAKE(x2, vdev_mul(x1, d));                                           /* 3,4 */
    MAKE(c2, vdev_pow_scalar(c, 2));
    MAKE(c3, vdev_add_scalar(c2, 1));
    MAKE(x3, vdev_div(x2, c3));                                          /* 3,4 / 1,4 */
    MAKE(mx, vdev_maximum(x3, a));
    MAKE(mn, vdev_minimum(x3, b));
    MAKE(s1, vdev_sum(mx, 1, false));                                    /* 3 */
    MAKE(m1, vdev_mean(mn, 0, true));                                    /* 1,4 */
    MAKE(lsm, vdev_log_softmax(mx));                                     /* 3,4 */
    MAKE(am, vdev_argmax(lsm));                                          /* 3, i32 */
    MAKE(a2, vdev_pow_scalar(a, 2));
    MAKE(a3, vdev_add_scalar(a2, 1));
    MAKE(sq, vdev_sqrt(a3));
    /* more tensors than one ConcatV2 takes, and more than its stack arrays hold */
    const vdev_tensor_t *es[18];
    const int64_t col[2] = {-1, 1};
    vdev_tensor_t *er;
    MAKE(er, vdev_reshape(e, col, 2));                                   /* 2,1 */
    for (int i = 0; i < 18; i++)
        es[i] = i % 3 ? er : d;
    MAKE(many, vdev_concat(es, 18, 0));                                  /* 42,1 */
    MAKE(t[0], vdev_sum_all(s1));
    MAKE(t[1], vdev_mean_all(m1));
    MAKE(t[2], vdev_sum_all(lsm));
    MAKE(t[3], vdev_sum_all(tp));
    MAKE(t[4], vdev_mean_all(sq));
    MAKE(t[5], vdev_sum_all(many));
    MAKE(t[6], vdev_add(t[0], t[1]));
    MAKE(t[7], vdev_add(t[6], t[2]));
    vdev_tensor_t *l1, *l2, *loss;
    MAKE(l1, vdev_add(t[7], t[3]));
    MAKE(l2, vdev_add(l1, t[4]));
    MAKE(loss, vdev_add(l2, t[5]));
    vdev_tensor_t *vars[5] = {a, b, c, d, e}, *g[5];
    RETRY_OK(vdev_tape_gradient(tape, loss, vars, 5, g));
    vdev_tape_end(tape);
    for (int i = 0; i < 5; i++)
        h = digest(h, own(g[i]));
    h = digest(h, loss);
    h = digest(h, am);
    h = digest(h, many);
    RETRY_OK(vdev_device_pop());
    return h;
}

static uint64_t shape_ops(void)
{
    start();
    uint64_t h = shape_ops_on("CPU:0", 0);
    h = shape_ops_on("GPU:0", h);
    finish();
    return h;
}

/* ---- tensors ------------------------------------------------------------- */

static int imported_freed;
static void import_deleter(struct DLManagedTensor *m)
{
    (void)m;
    imported_freed++;
}

static uint64_t tensors(void)
{
    start();
    uint64_t h = 0;
    const int64_t s23[2] = {2, 3}, s6[1] = {6};
    const float host[6] = {1, -2, 3.5f, 4, -5, 6};
    vdev_tensor_t *a, *z, *o, *f, *fi, *u, *nrm, *g, *back, *id, *sg;
    MAKE(a, vdev_tensor_from_host(host, s23, 2, VDEV_F32));
    MAKE(z, vdev_tensor_zeros(s23, 2, VDEV_F32));
    MAKE(o, vdev_tensor_ones(s6, 1, VDEV_I32));
    MAKE(f, vdev_tensor_fill(s23, 2, VDEV_F32, 2.5));
    MAKE(fi, vdev_tensor_fill(s6, 1, VDEV_I32, -7));
    MAKE(u, vdev_tensor_uniform(s23, 2, -1, 1, 21));
    MAKE(nrm, vdev_tensor_normal(s6, 1, 0, 2, 22));
    float got[6];
    RETRY_OK(vdev_tensor_to_host(a, got, sizeof got));
    CHECK(memcmp(got, host, sizeof got) == 0);
    /* across devices and back */
    MAKE(g, vdev_tensor_to(u, "GPU:0"));
    MAKE(back, vdev_tensor_to(g, "CPU:0"));
    CHECK(strcmp(vdev_tensor_device(g), "/device:GPU:0") == 0);
    /* identity on the GPU, scopes (one kept) */
    RETRY_OK(vdev_device_push("GPU:0"));
    MAKE(id, vdev_identity(nrm));
    RETRY_OK(vdev_scope_begin());
    vdev_tensor_t *tmp, *kept;
    RETRY_PTR(tmp, vdev_mul_scalar(id, 3));
    RETRY_PTR(kept, vdev_add(tmp, id));
    CHECK(vdev_keep(kept) == kept);
    vdev_scope_end();
    own(kept);
    RETRY_OK(vdev_device_pop());
    /* a variable under a tape, assigned while the tape holds what it read */
    vdev_tensor_t *v = var_uniform(s23, 2, 23), *vv, *vs, *y, *sum, *gr[1];
    vdev_tape_t *tape;
    RETRY_PTR(tape, vdev_tape_begin());
    MAKE(vv, vdev_mul(v, v));
    MAKE(sg, vdev_stop_gradient(v));
    MAKE(vs, vdev_mul(sg, v));
    MAKE(y, vdev_add(vv, vs));
    MAKE(sum, vdev_sum_all(y));
    RETRY_OK(vdev_assign(v, f));
    RETRY_OK(vdev_tape_gradient(tape, sum, &v, 1, gr)); /* 3 v, v as it was read */
    vdev_tape_end(tape);
    own(gr[0]);
    RETRY_OK(vdev_assign(v, a));
    /* DLPack: out; while the export lives a recorded op reads a copy of its
     * memory; in (sharing the memory): the import's end ends the export */
    vdev_tensor_t *ev = var_uniform(s6, 1, 24), *sq, *sq_sum, *gk[1];
    struct DLManagedTensor *m;
    RETRY_OK(vdev_tensor_to_dlpack(ev, &m));
    RETRY_PTR(tape, vdev_tape_begin());
    MAKE(sq, vdev_mul(ev, ev));
    MAKE(sq_sum, vdev_sum_all(sq));
    RETRY_OK(vdev_tape_gradient(tape, sq_sum, &ev, 1, gk));
    vdev_tape_end(tape);
    h = digest(h, own(gk[0]));
    vdev_tensor_t *imp;
    RETRY_PTR(imp, vdev_tensor_from_dlpack(m));
    h = digest(h, imp);
    vdev_tensor_free(imp);
    CHECK(vdev_dlpack_live_exports() == 0);
    /* in, from memory the test owns */
    float mine[6] = {6, 5, 4, 3, 2, 1};
    int64_t mshape[1] = {6};
    struct DLManagedTensor dm = {
        .dl_tensor = {.data = mine, .device = {kDLCPU, 0}, .ndim = 1, .dtype = {kDLFloat, 32, 1},
                      .shape = mshape},
        .deleter = import_deleter,
    };
    imported_freed = 0;
    RETRY_PTR(imp, vdev_tensor_from_dlpack(&dm));
    h = digest(h, imp);
    vdev_tensor_free(imp);
    CHECK(imported_freed == 1);
    /* strided (column-major [2,3]): copied at once */
    int64_t cshape[2] = {2, 3}, cstrides[2] = {1, 2};
    dm.dl_tensor.ndim = 2;
    dm.dl_tensor.shape = cshape;
    dm.dl_tensor.strides = cstrides;
    RETRY_PTR(imp, vdev_tensor_from_dlpack(&dm));
    CHECK(imported_freed == 2);
    h = digest(h, imp);
    vdev_tensor_free(imp);
    vdev_tensor_t *all[] = {a, z, o, f, fi, u, nrm, g, back, id, kept, v, sg, y, gr[0]};
    for (size_t i = 0; i < VDEV_ARRAY_LEN(all); i++)
        h = digest(h, all[i]);
    finish();
    return h;
}

/* ---- tapes --------------------------------------------------------------- */

static uint64_t tapes(void)
{
    start();
    uint64_t h = 0;
    const int64_t s4[1] = {4};
    vdev_tensor_t *p = var_uniform(s4, 1, 31), *q = var_uniform(s4, 1, 32),
                  *r = var_uniform(s4, 1, 33);
    vdev_tensor_t *vars[3] = {p, q, r}, *g[3];
    /* explicit watching: only p's ops are recorded; two losses, one tape */
    vdev_tape_t *tape;
    RETRY_PTR(tape, vdev_tape_begin_ex(VDEV_TAPE_WATCH_EXPLICIT));
    RETRY_OK(vdev_tape_watch(tape, p));
    vdev_tensor_t *pq, *pr, *l1, *l2, *paused, *rr;
    MAKE(pq, vdev_mul(p, q));
    MAKE(rr, vdev_mul(r, r)); /* not watched: a constant */
    MAKE(pr, vdev_add(pq, rr));
    MAKE(l1, vdev_sum_all(pr));
    RETRY_OK(vdev_tape_gradient_ex(tape, l1, vars, 3, g, VDEV_UNCONNECTED_NONE));
    CHECK(g[0] && !g[1] && !g[2]);
    for (int i = 0; i < 3; i++)
        h = digest(h, own(g[i]));
    MAKE(l2, vdev_mean_all(pq));
    RETRY_OK(vdev_tape_gradient(tape, l2, vars, 3, g));
    for (int i = 0; i < 3; i++)
        h = digest(h, own(g[i]));
    vdev_tensor_t *watched[4];
    int n_watched;
    before_call();
    if ((n_watched = vdev_tape_watched_variables(tape, watched, 4)) < 0) {
        failed_call("vdev_tape_watched_variables(tape, watched, 4)");
        n_watched = vdev_tape_watched_variables(tape, watched, 4);
    }
    CHECK(n_watched == 1 && watched[0] == p);
    vdev_tape_end(tape);
    /* skip one, pause and resume, a seeded gradient */
    RETRY_PTR(tape, vdev_tape_begin());
    RETRY_OK(vdev_tape_skip(tape, r));
    vdev_tensor_t *a, *b, *c, *seed, *back;
    MAKE(a, vdev_mul(p, r));
    RETRY_OK(vdev_tape_pause(tape));
    MAKE(paused, vdev_mul(a, q)); /* not recorded */
    RETRY_OK(vdev_tape_resume(tape));
    MAKE(b, vdev_mul(a, paused));
    MAKE(c, vdev_tanh(b));
    const float dl[4] = {1, 0, -2, 0.5f};
    MAKE(seed, vdev_tensor_from_host(dl, s4, 1, VDEV_F32));
    RETRY_OK(vdev_tape_gradient_seeded(tape, c, seed, vars, 3, g, VDEV_UNCONNECTED_ZERO));
    for (int i = 0; i < 3; i++)
        h = digest(h, own(g[i]));
    vdev_tape_end(tape);
    /* a long tape: its arrays grow past 256 records */
    RETRY_PTR(tape, vdev_tape_begin());
    vdev_tensor_t *x = p;
    RETRY_OK(vdev_scope_begin());
    for (int i = 0; i < 300; i++) {
        vdev_tensor_t *next;
        RETRY_PTR(next, i % 2 ? vdev_mul_scalar(x, 0.99f) : vdev_add(x, q));
        x = next;
    }
    vdev_tensor_t *l3;
    RETRY_PTR(l3, vdev_sum_all(x));
    RETRY_OK(vdev_tape_gradient(tape, l3, vars, 2, g));
    vdev_keep(g[0]);
    vdev_keep(g[1]);
    vdev_keep(l3);
    vdev_scope_end();
    vdev_tape_end(tape);
    h = digest(h, own(l3));
    h = digest(h, own(g[0]));
    h = digest(h, own(g[1]));
    /* a tape released while recording: the thread may begin another at once */
    RETRY_PTR(tape, vdev_tape_begin());
    MAKE(back, vdev_mul(q, q));
    vdev_tape_release(tape);
    RETRY_PTR(tape, vdev_tape_begin());
    vdev_tensor_t *l4;
    MAKE(l4, vdev_sum_all(back));
    RETRY_OK(vdev_tape_gradient(tape, l4, vars, 3, g));
    for (int i = 0; i < 3; i++)
        h = digest(h, own(g[i]));
    vdev_tape_release(tape);
    h = digest(h, c);
    finish();
    return h;
}

int main(void)
{
    sweep("ops: a convolutional net, cpu and simulated GPU", convnet);
    sweep("ops: 1-D and separable convolutions, pads, a batched product, cpu and simulated GPU",
          composed);
    sweep("ops: shapes, broadcasting, reductions, cpu and simulated GPU", shape_ops);
    sweep("tensors: makers, devices, variables, scopes, DLPack", tensors);
    sweep("tapes: watch, skip, pause, seeded, released, long", tapes);
    return check_done();
}
