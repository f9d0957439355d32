/* ring.c — vdev's own collectives: a ring over the backend's
 * device-to-device copies (the ranks meet in ring_sync.c; see ring.h).
 *
 * All-reduce is the bandwidth-optimal ring (Patarasuk and Yuan, "Bandwidth
 * optimal all-reduce algorithms for clusters of workstations", 2009; the
 * algorithm NCCL and Horovod use): the flat concatenation of a rank's buffers
 * is cut into n segments; in n - 1 reduce-scatter steps each rank receives
 * one segment from its left neighbour into its staging buffer and adds it to
 * its own, so that rank r ends with the full sum of segment r + 1; in n - 1
 * all-gather steps the finished segments travel round the ring, copied
 * straight into each rank's buffers. Each step is cut into slices of
 * RING_SLICE_BYTES: a rank copies slice j + 1 while its neighbour is already
 * reducing slice j, so copies and reductions of different ranks overlap.
 *
 * The order of every addition is fixed by the ring (segment c is summed
 * starting from rank c, then c + 1, ...), so results do not depend on timing:
 * the same bits run to run, and every rank copies the same finished bits.
 * MEAN divides by n where the sum is finished, before it travels.
 *
 * Broadcast is a chain from the root (root -> root+1 -> ...), slice by slice;
 * all-gather is the all-gather half of the ring. The reductions run on the
 * rank's stream: a host function on backends whose memory the host reads
 * (cpu, sim), else the backend's own Add and Div kernels (CUDA: f32
 * arithmetic that rounds as the host's does, so the bits agree).
 *
 * Memory: the only memory a call takes is one staging buffer of at most
 * RING_SLICE_BYTES on every rank's own device (all-reduce only), freed
 * (stream-ordered) before the call returns. */
#include "coll/ring.h"

#include "ops/op_ids.h"

#include <string.h>

#define ESZ 4 /* bytes per element: f32 and i32 */

static int mod(int a, int n) { return ((a % n) + n) % n; }

/* ---- fault injection (tests) ---- */

static _Atomic int fail_rank = -1, fail_countdown;

void vdev_coll_ring_fail_copy(int rank, int nth)
{
    atomic_store(&fail_countdown, 0);
    atomic_store(&fail_rank, nth > 0 ? rank : -1);
    atomic_store(&fail_countdown, nth);
}

/* A device-to-device copy for rank r, or the injected failure. */
static enum vdev_status copy_d2d(const struct vdev_ldev *dd, int r, void *to,
                                 const struct vdev_ldev *sd, const void *from, uint64_t bytes)
{
    if (atomic_load_explicit(&fail_rank, memory_order_relaxed) == r &&
        atomic_fetch_sub(&fail_countdown, 1) == 1) {
        atomic_store(&fail_rank, -1);
        return vdev_error(VDEV_ERR_BACKEND, "%s: injected failure of a device-to-device copy",
                          dd->name);
    }
    return dd->backend->ops->copy_d2d(dd->backend->ctx, dd->bdev, to, sd->bdev, from, bytes);
}

/* ---- the work a schedule queues ---- */

/* The k-th segment of T elements cut into n: [lo, hi). */
static void segment(uint64_t T, int n, int c, uint64_t *lo, uint64_t *hi)
{
    uint64_t q = T / (uint64_t)n, rem = T % (uint64_t)n, uc = (uint64_t)c;
    *lo = uc * q + (uc < rem ? uc : rem);
    *hi = *lo + q + (uc < rem ? 1 : 0);
}

/* The first buffer holding flat element `at` (binary search of prefix). */
static int buf_at(const struct ring_post *p, uint64_t at)
{
    int lo = 0, hi = p->n_bufs - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (p->prefix[mid] <= at)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

/* Copies flat elements [lo, hi) of rank q's buffers, on rank r's stream,
 * into r's staging (staging != NULL) or into the same places of r's own
 * buffers. Both ranks' buffers have the same shapes (the verdict). */
static enum vdev_status copy_range(const struct ring *R, const struct ring_slot *s, int r, int q,
                                   uint64_t lo, uint64_t hi, void *staging)
{
    const struct ring_post *src = &s->post[q], *own = &s->post[r];
    const struct vdev_ldev *dd = R->comm->devs[r], *sd = R->comm->devs[q];
    for (int i = buf_at(src, lo); i < src->n_bufs && src->prefix[i] < hi; i++) {
        uint64_t a = lo > src->prefix[i] ? lo : src->prefix[i];
        uint64_t b = hi < src->prefix[i + 1] ? hi : src->prefix[i + 1];
        if (a >= b)
            continue;
        const char *from = (const char *)src->bufs[i].data + (a - src->prefix[i]) * ESZ;
        char *to = staging ? (char *)staging + (a - lo) * ESZ
                           : (char *)own->bufs[i].data + (a - own->prefix[i]) * ESZ;
        enum vdev_status st = copy_d2d(dd, r, to, sd, from, (b - a) * ESZ);
        if (st != VDEV_OK)
            return st;
    }
    return VDEV_OK;
}

struct reduce_arg {
    float *dst;
    const float *src;
    uint64_t n;
    float divisor;
    int divide;
};

/* dst += src (then /= divisor), on the stream, four floats at a time in
 * the vectors of GCC and Clang (the library is built at -O2, where GCC 12 does
 * not vectorize such a loop itself); the tail is scalar. Each element is one
 * f32 addition (and division) either way, so the bits do not depend on it. */
typedef float vf4 __attribute__((vector_size(16)));

static void reduce_fn(void *varg)
{
    const struct reduce_arg *a = varg;
    float *d = a->dst;
    const float *s = a->src;
    uint64_t n = a->n, i = 0;
    const float div = a->divisor;
    const vf4 vdiv = {div, div, div, div};
    for (; i + 8 <= n; i += 8) {
        vf4 x0, x1, y0, y1;
        memcpy(&x0, d + i, sizeof x0);
        memcpy(&x1, d + i + 4, sizeof x1);
        memcpy(&y0, s + i, sizeof y0);
        memcpy(&y1, s + i + 4, sizeof y1);
        x0 = x0 + y0;
        x1 = x1 + y1;
        if (a->divide) {
            x0 = x0 / vdiv;
            x1 = x1 / vdiv;
        }
        memcpy(d + i, &x0, sizeof x0);
        memcpy(d + i + 4, &x1, sizeof x1);
    }
    for (; i < n; i++)
        d[i] = a->divide ? (d[i] + s[i]) / div : d[i] + s[i];
}

/* A kernel of the backend's own table on [n] f32 operands: out = a OP b (b
 * one element when b_one). */
static enum vdev_status run_binary(const struct vdev_ldev *d, int op, float *out, const float *a,
                                   const float *b, uint64_t n, int b_one)
{
    struct vdev_kernel_args ka;
    memset(&ka, 0, sizeof ka);
    ka.op = op;
    ka.n_in = 2;
    ka.n_out = 1;
    ka.in[0] = a;
    ka.in[1] = b;
    ka.out[0] = out;
    for (int k = 0; k < 2; k++) {
        ka.in_ndim[k] = 1;
        ka.in_dtype[k] = VDEV_F32;
        for (int x = 0; x < VDEV_MAX_DIMS; x++)
            ka.in_shape[k][x] = 1;
    }
    ka.in_shape[0][0] = (int64_t)n;
    ka.in_shape[1][0] = b_one ? 1 : (int64_t)n;
    ka.out_ndim[0] = 1;
    ka.out_dtype[0] = VDEV_F32;
    for (int x = 0; x < VDEV_MAX_DIMS; x++)
        ka.out_shape[0][x] = 1;
    ka.out_shape[0][0] = (int64_t)n;
    ka.i[3] = b_one ? 2 : 0;
    return d->backend->ops->run_kernel(d->backend->ctx, d->bdev, &ka);
}

/* Adds staging (the slice [lo, hi) of the flat buffers) into rank r's
 * buffers, dividing by n on the step that finishes the sum of a MEAN. */
static enum vdev_status reduce_range(const struct ring *R, const struct ring_slot *s, int r,
                                     uint64_t lo, uint64_t hi, const float *staging, int divide,
                                     const float *scalar)
{
    const struct ring_post *own = &s->post[r];
    const struct vdev_ldev *d = R->comm->devs[r];
    const struct vdev_backend_ops *o = d->backend->ops;
    for (int i = buf_at(own, lo); i < own->n_bufs && own->prefix[i] < hi; i++) {
        uint64_t a = lo > own->prefix[i] ? lo : own->prefix[i];
        uint64_t b = hi < own->prefix[i + 1] ? hi : own->prefix[i + 1];
        if (a >= b)
            continue;
        float *dst = (float *)own->bufs[i].data + (a - own->prefix[i]);
        const float *src = staging + (a - lo);
        enum vdev_status st;
        if (o->host_addressable) {
            struct reduce_arg arg = {dst, src, b - a, (float)R->n, divide};
            st = o->submit_host(d->backend->ctx, d->bdev, reduce_fn, &arg, sizeof arg);
        } else {
            st = run_binary(d, VDEV_OP_ADD, dst, dst, src, b - a, 0);
            if (st == VDEV_OK && divide)
                st = run_binary(d, VDEV_OP_DIV, dst, dst, scalar, b - a, 1);
        }
        if (st != VDEV_OK)
            return st;
    }
    return VDEV_OK;
}

/* ---- the schedules ---- */

static uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

static enum vdev_status all_reduce(struct ring *R, struct ring_slot *s, int r, float *staging,
                                   const float *scalar, int *origin)
{
    const int n = R->n, prev = mod(r - 1, n), next = mod(r + 1, n);
    const uint64_t T = s->post[r].prefix[s->post[r].n_bufs];
    const uint64_t S = RING_SLICE_BYTES / ESZ;
    uint64_t lo0, hi0;
    segment(T, n, 0, &lo0, &hi0); /* segment 0 is a longest one */
    const uint64_t ns = hi0 - lo0 > S ? ceil_div(hi0 - lo0, S) : 1;
    const int mean = s->post[r].op == VDEV_REDUCE_MEAN;
    enum vdev_status st;
    for (int g = 0; g < 2 * (n - 1); g++) {
        int rs = g < n - 1; /* reduce-scatter, else all-gather */
        int c = rs ? mod(r - 1 - g, n) : mod(r - (g - (n - 1)), n);
        uint64_t slo, shi;
        segment(T, n, c, &slo, &shi);
        /* the all-gather overwrites segments the right neighbour read while
         * reducing: its stream must have passed those copies */
        if (g == n - 1 && (st = vdev_ring_follow_event(R, s, r, next, 0, origin)) != VDEV_OK)
            return st;
        for (uint64_t j = 0; j < ns; j++) {
            if (g > 0 && (st = vdev_ring_wait_progress(R, s, r, prev, (uint64_t)(g - 1) * ns + j + 1,
                                                       origin)) != VDEV_OK)
                return st;
            uint64_t lo = slo + j * S, hi = lo + S < shi ? lo + S : shi;
            if (lo < hi) {
                st = copy_range(R, s, r, prev, lo, hi, rs ? staging : NULL);
                if (st == VDEV_OK && rs)
                    st = reduce_range(R, s, r, lo, hi, staging, mean && g == n - 2, scalar);
                if (st != VDEV_OK) {
                    *origin = r;
                    return st;
                }
            }
            vdev_ring_publish_progress(R, s, r, (uint64_t)g * ns + j + 1);
        }
        if (g == n - 2 && (st = vdev_ring_publish_event(R, s, r, 0, origin)) != VDEV_OK)
            return st;
    }
    if ((st = vdev_ring_publish_event(R, s, r, 1, origin)) != VDEV_OK)
        return st;
    return vdev_ring_follow_event(R, s, r, next, 1, origin);
}

static enum vdev_status broadcast(struct ring *R, struct ring_slot *s, int r, int *origin)
{
    const int n = R->n, prev = mod(r - 1, n), next = mod(r + 1, n);
    const int root = s->post[r].root;
    const uint64_t T = s->post[r].prefix[s->post[r].n_bufs];
    const uint64_t S = RING_SLICE_BYTES / ESZ, ns = ceil_div(T, S);
    enum vdev_status st;
    if (r == root) {
        vdev_ring_publish_progress(R, s, r, ns);
    } else {
        for (uint64_t j = 0; j < ns; j++) {
            if (prev != root &&
                (st = vdev_ring_wait_progress(R, s, r, prev, j + 1, origin)) != VDEV_OK)
                return st;
            uint64_t lo = j * S, hi = lo + S < T ? lo + S : T;
            if ((st = copy_range(R, s, r, prev, lo, hi, NULL)) != VDEV_OK) {
                *origin = r;
                return st;
            }
            vdev_ring_publish_progress(R, s, r, j + 1);
        }
    }
    /* Each rank but the root read its left neighbour's buffers: it publishes
     * an event for that neighbour to follow. */
    if (r != root && (st = vdev_ring_publish_event(R, s, r, 1, origin)) != VDEV_OK)
        return st;
    return next == root ? VDEV_OK : vdev_ring_follow_event(R, s, r, next, 1, origin);
}

/* Copies [lo, hi) of rank q's out buffer into rank r's (same place). */
static enum vdev_status copy_out(const struct ring *R, const struct ring_slot *s, int r, int q,
                                 uint64_t lo, uint64_t hi)
{
    const struct vdev_ldev *dd = R->comm->devs[r], *sd = R->comm->devs[q];
    const char *from = (const char *)s->post[q].bufs[1].data + lo * ESZ;
    char *to = (char *)s->post[r].bufs[1].data + lo * ESZ;
    return copy_d2d(dd, r, to, sd, from, (hi - lo) * ESZ);
}

static enum vdev_status all_gather(struct ring *R, struct ring_slot *s, int r, int *origin)
{
    const int n = R->n, prev = mod(r - 1, n), next = mod(r + 1, n);
    const uint64_t c = s->post[r].bufs[0].count;
    const uint64_t S = RING_SLICE_BYTES / ESZ, ns = c > S ? ceil_div(c, S) : 1;
    enum vdev_status st;
    /* step 0: this rank's own part, a copy on its own device */
    const struct vdev_ldev *d = R->comm->devs[r];
    st = copy_d2d(d, r, (char *)s->post[r].bufs[1].data + (uint64_t)r * c * ESZ, d,
                  s->post[r].bufs[0].data, c * ESZ);
    if (st != VDEV_OK) {
        *origin = r;
        return st;
    }
    vdev_ring_publish_progress(R, s, r, ns);
    for (int g = 1; g < n; g++) {
        uint64_t seg = (uint64_t)mod(r - g, n) * c;
        for (uint64_t j = 0; j < ns; j++) {
            if ((st = vdev_ring_wait_progress(R, s, r, prev, (uint64_t)(g - 1) * ns + j + 1,
                                              origin)) != VDEV_OK)
                return st;
            uint64_t lo = seg + j * S, hi = j * S + S < c ? lo + S : seg + c;
            if ((st = copy_out(R, s, r, prev, lo, hi)) != VDEV_OK) {
                *origin = r;
                return st;
            }
            vdev_ring_publish_progress(R, s, r, (uint64_t)g * ns + j + 1);
        }
    }
    if ((st = vdev_ring_publish_event(R, s, r, 1, origin)) != VDEV_OK)
        return st;
    return vdev_ring_follow_event(R, s, r, next, 1, origin);
}

/* ---- a call ---- */

/* Elements of all of a call's buffers. */
static uint64_t total_of(const struct vdev_coll_call *c)
{
    uint64_t t = 0;
    for (int i = 0; i < c->n_bufs; i++)
        t += c->bufs[i].count;
    return t;
}

/* The staging buffer of an all-reduce on rank r's device, and (for backends
 * that reduce with their own kernels) the divisor n in device memory after
 * it. NULL (error set) on failure. */
static struct vdev_tens *make_staging(const struct ring *R, int r, uint64_t T, float **scalar)
{
    struct vdev_ldev *d = R->comm->devs[r];
    uint64_t lo, hi;
    segment(T, R->n, 0, &lo, &hi);
    uint64_t S = RING_SLICE_BYTES / ESZ, k = hi - lo < S ? hi - lo : S;
    int need_scalar = !d->backend->ops->host_addressable;
    if (need_scalar && !d->backend->ops->run_kernel) {
        vdev_error(VDEV_ERR_UNSUPPORTED, "the %s backend neither lets the host read its memory "
                                         "nor has kernels to reduce with",
                   d->backend->ops->name);
        return NULL;
    }
    int64_t shape[1] = {(int64_t)(k + (uint64_t)need_scalar)};
    const char *tag = vdev_tensor_op_tag;
    vdev_tensor_op_tag = "AllReduce";
    struct vdev_tens *t = vdev_tens_new(d, VDEV_F32, shape, 1);
    vdev_tensor_op_tag = tag;
    if (!t)
        return NULL;
    *scalar = NULL;
    if (need_scalar) {
        float div = (float)R->n;
        uint32_t bits;
        memcpy(&bits, &div, sizeof bits);
        *scalar = (float *)t->data + k;
        if (vdev_backend_fill(d->backend, d->bdev, *scalar, bits, 1) != VDEV_OK) {
            vdev_tens_drop(t);
            return NULL;
        }
    }
    return t;
}

static enum vdev_status ring_run(void *ctx, int rank, const struct vdev_coll_call *call,
                                 int *origin)
{
    struct ring *R = ctx;
    struct vdev_coll_call c = *call;
    struct vdev_tens *staging = NULL;
    float *scalar = NULL;
    uint64_t T = total_of(&c);
    char why[RING_WHY];
    if (c.status == VDEV_OK && c.kind == VDEV_COLL_ALL_REDUCE && R->n > 1 && T > 0) {
        staging = make_staging(R, rank, T, &scalar);
        if (!staging) {
            c.status = vdev_last_status();
            vdev_strlcpy(why, vdev_last_error(), sizeof why);
            c.why = why;
        }
    }
    struct ring_slot *s;
    enum vdev_status st = vdev_ring_enter(R, rank, &c, &s, origin);
    if (st == VDEV_OK) {
        /* one rank: nothing moves, but an all-gather still copies in to out */
        if (T > 0 && (R->n > 1 || c.kind == VDEV_COLL_ALL_GATHER)) {
            switch (c.kind) {
            case VDEV_COLL_ALL_REDUCE:
                st = all_reduce(R, s, rank, staging ? (float *)staging->data : NULL, scalar,
                                origin);
                break;
            case VDEV_COLL_BROADCAST:
                st = broadcast(R, s, rank, origin);
                break;
            case VDEV_COLL_ALL_GATHER:
                st = all_gather(R, s, rank, origin);
                break;
            default:
                break;
            }
        }
        st = vdev_ring_leave_schedule(R, s, rank, st, origin);
    }
    if (staging) {
        /* the rank's stream is the only one that touched it: freed in order */
        enum vdev_status keep = vdev_last_status();
        char msg[RING_WHY];
        vdev_strlcpy(msg, vdev_last_error(), sizeof msg);
        vdev_tens_drop(staging);
        if (st != VDEV_OK)
            vdev_error(keep, "%s", msg);
    }
    return st;
}

const struct vdev_coll_ops vdev_coll_ring_ops = {
    .api_version = VDEV_COLL_API_VERSION,
    .name = "ring",
    .create = vdev_ring_create,
    .run = ring_run,
    .abort = vdev_ring_abort,
    .leave = vdev_ring_leave,
    .reset = vdev_ring_reset,
    .destroy = vdev_ring_destroy,
};
