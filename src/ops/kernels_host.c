/* kernels_host.c — faster host kernels for the ops where it pays: matmul
 * through OpenBLAS's cblas_sgemm. They run wherever host kernels run (the
 * cpu backend inline, sim GPUs on their worker thread) and are tested against
 * the reference kernels in kernels_ref.c.
 *
 * sgemm accumulates in float, so results differ from the double-accumulating
 * reference by a few ulps of sum |a_ip b_pj| (the tests bound it as
 * 4 k 2^-24 sum_p |a_ip| |b_pj|). Empty operands never reach BLAS: an empty
 * output needs nothing, an empty inner dimension gives zeros.
 *
 * Threads: every product goes through the gate of threads.h, which keeps
 * OpenBLAS single-threaded and, with several streams, lets at most the
 * budget's number of products run at once. With one stream, a product large
 * enough is split over the plan's threads (vdev_threads_product_parts; at
 * most one per SPLIT_MIN_MACS multiply-adds) by vdev's pool: the output's
 * columns (or its rows, when it has more of them) in one block per thread,
 * each block one single-threaded sgemm. OpenBLAS's
 * results depend on its thread count (measured: 0.3.21 on Zen 4, 1000x1000x
 * 1000 differs in 71% of the elements between 1 and 2 threads, and with
 * OPENBLAS_CORETYPE=Haswell even 64x512x256 does), and a block's may depend
 * on its size, so a product submitted under the determinism switch (i[2],
 * set by the shape rule) is cut into blocks fixed by its shape alone
 * (sgemm_run): the same single-threaded calls whatever the thread count.
 * A batch of products (BATCH_MATMUL) goes through the gate once: its large
 * entries each split as one product is, its small ones spread whole over the
 * threads (sgemm_batch_run). */
#include "ops/impl.h"
#include "ops/parallel.h"
#include "ops/threads.h"

#include <cblas.h>
#include <limits.h>
#include <string.h>

/* One cblas_sgemm call, as the product gate runs it (possibly on another
 * stream's thread: it reads nothing but its arguments). */
struct sgemm_call {
    int ta, tb, m, n, k, lda, ldb, ldc;
    int det; /* submitted under the determinism switch */
    const float *a, *b;
    float *c;
};

static void sgemm_one(const struct sgemm_call *c)
{
    cblas_sgemm(CblasRowMajor, c->ta ? CblasTrans : CblasNoTrans,
                c->tb ? CblasTrans : CblasNoTrans, c->m, c->n, c->k, 1.0f, c->a, c->lda, c->b,
                c->ldb, 0.0f, c->c, c->ldc);
}

/* Each block of a split product gets at least this many multiply-adds (tens
 * of microseconds on one core), so that a small product on a machine with
 * many cores is not cut into blocks whose operand packing costs as much as
 * their arithmetic. */
#define SPLIT_MIN_MACS (1ll << 21)
#define SPLIT_GRAIN 16 /* block edges at multiples of 16 rows or columns */

/* Output columns [lo, hi) of the product: op(b)'s columns are b's columns
 * (b [k,n]) or its rows (b stored [n,k]). */
static void sgemm_cols(void *varg, int64_t lo, int64_t hi)
{
    struct sgemm_call c = *(const struct sgemm_call *)varg;
    c.b += c.tb ? lo * c.ldb : lo;
    c.c += lo;
    c.n = (int)(hi - lo);
    sgemm_one(&c);
}

/* Output rows [lo, hi): op(a)'s rows are a's rows (a [m,k]) or its columns
 * (a stored [k,m]). */
static void sgemm_rows(void *varg, int64_t lo, int64_t hi)
{
    struct sgemm_call c = *(const struct sgemm_call *)varg;
    c.a += c.ta ? lo : lo * c.lda;
    c.c += lo * c.ldc;
    c.m = (int)(hi - lo);
    sgemm_one(&c);
}

/* Under the determinism switch: blocks fixed by the product's shape alone
 * (one per DET_BLOCK_MACS multiply-adds, at most DET_MAX_BLOCKS, edges at
 * multiples of 16), each one single-threaded sgemm whichever thread runs it:
 * the same calls, so the same bits, with any thread count. */
#define DET_BLOCK_MACS (1ll << 24)
#define DET_MAX_BLOCKS 16

/* Runs under the gate, with the plan the product was started under. A
 * product is cut along its output's longer side. */
static void sgemm_run(void *varg)
{
    struct sgemm_call *c = varg;
    int parts = vdev_threads_product_parts();
    int64_t macs = (int64_t)c->m * c->n * c->k;
    int cols = c->n >= c->m;
    int64_t dim = cols ? c->n : c->m;
    void (*block_fn)(void *, int64_t, int64_t) = cols ? sgemm_cols : sgemm_rows;
    if (c->det) {
        int64_t nb = macs / DET_BLOCK_MACS;
        if (nb > DET_MAX_BLOCKS)
            nb = DET_MAX_BLOCKS;
        if (nb > dim / SPLIT_GRAIN)
            nb = dim / SPLIT_GRAIN;
        if (nb < 2) {
            sgemm_one(c);
            return;
        }
        int64_t block = ((dim + nb - 1) / nb + SPLIT_GRAIN - 1) / SPLIT_GRAIN * SPLIT_GRAIN;
        vdev_parallel_blocks(dim, block, parts, block_fn, c);
        return;
    }
    if (macs / SPLIT_MIN_MACS < parts)
        parts = (int)(macs / SPLIT_MIN_MACS);
    if (parts < 2) {
        sgemm_one(c);
        return;
    }
    vdev_parallel_split(dim, parts, SPLIT_GRAIN, block_fn, c);
}

/* out[m,n] = op(a) op(b): a [m,k] or [k,m] (i[0]), b [k,n] or [n,k] (i[1]). */
KERNEL(vdev_host_matmul)
{
    int ta = a->i[0] != 0, tb = a->i[1] != 0;
    int64_t m = a->out_shape[0][0], n = a->out_shape[0][1];
    int64_t k = a->in_shape[0][ta ? 0 : 1];
    if (m == 0 || n == 0)
        return;
    if (k == 0) {
        /* a sum of no products */
        memset(a->out[0], 0, (size_t)(m * n) * sizeof(float));
        return;
    }
    /* cblas takes int sizes (blasint); anything larger goes to the reference. */
    if (m > INT_MAX || n > INT_MAX || k > INT_MAX || a->in_shape[0][1] > INT_MAX ||
        a->in_shape[1][1] > INT_MAX) {
        vdev_ref_matmul(a);
        return;
    }
    /* Leading dimensions are the stored row lengths, whatever the transpose. */
    struct sgemm_call c = {ta, tb, (int)m, (int)n, (int)k,
                           (int)a->in_shape[0][1], (int)a->in_shape[1][1], (int)n, a->i[2] != 0,
                           (const float *)a->in[0], (const float *)a->in[1], (float *)a->out[0]};
    vdev_threads_product_run(c.det, sgemm_run, &c);
}

/* A batch of products: every entry's cblas_sgemm call, entry b's operands
 * at b times their matrix sizes (0 for a broadcast batch of 1). */
struct sgemm_batch {
    struct sgemm_call one; /* entry 0's call */
    int64_t entries, xs, ys, os;
    int split; /* entries large enough to be split each (sgemm_run) */
};

static struct sgemm_call entry_call(const struct sgemm_batch *sb, int64_t b)
{
    struct sgemm_call c = sb->one;
    c.a += b * sb->xs;
    c.b += b * sb->ys;
    c.c += b * sb->os;
    return c;
}

/* Entries [lo, hi), one single-threaded sgemm each. */
static void sgemm_entries(void *varg, int64_t lo, int64_t hi)
{
    const struct sgemm_batch *sb = varg;
    for (int64_t b = lo; b < hi; b++) {
        struct sgemm_call c = entry_call(sb, b);
        sgemm_one(&c);
    }
}

/* Under the gate, once for the whole batch: large entries one after
 * another, each split as a product is (sgemm_run); small ones spread over
 * the plan's threads, whole entries per thread. Either way each entry's
 * result is one that sgemm_run or a single-threaded call gives for it, so
 * under the determinism switch the same bits with any thread count. */
static void sgemm_batch_run(void *varg)
{
    struct sgemm_batch *sb = varg;
    if (sb->split) {
        for (int64_t b = 0; b < sb->entries; b++) {
            struct sgemm_call c = entry_call(sb, b);
            sgemm_run(&c);
        }
        return;
    }
    int parts = vdev_threads_product_parts();
    int64_t macs = (int64_t)sb->one.m * sb->one.n * sb->one.k * sb->entries;
    if (macs / SPLIT_MIN_MACS < parts)
        parts = (int)(macs / SPLIT_MIN_MACS);
    if (parts < 2 || sb->entries < 2) {
        sgemm_entries(sb, 0, sb->entries);
        return;
    }
    vdev_parallel_split(sb->entries, parts, 1, sgemm_entries, sb);
}

/* out[b] = op(x[b]) op(y[b]) (BATCH_MATMUL): x [B,m,k] or [B,k,m] (i[0]), y
 * [B,k,n] or [B,n,k] (i[1]), a batch of 1 read for every entry. */
KERNEL(vdev_host_batch_matmul)
{
    int ta = a->i[0] != 0, tb = a->i[1] != 0;
    int64_t nb = a->out_shape[0][0], m = a->out_shape[0][1], n = a->out_shape[0][2];
    int64_t k = a->in_shape[0][ta ? 1 : 2];
    if (nb == 0 || m == 0 || n == 0)
        return;
    if (k == 0) {
        memset(a->out[0], 0, (size_t)(nb * m * n) * sizeof(float));
        return;
    }
    if (m > INT_MAX || n > INT_MAX || k > INT_MAX) {
        vdev_ref_batch_matmul(a);
        return;
    }
    struct sgemm_batch sb = {
        .one = {ta, tb, (int)m, (int)n, (int)k, (int)a->in_shape[0][2], (int)a->in_shape[1][2],
                (int)n, a->i[2] != 0, (const float *)a->in[0], (const float *)a->in[1],
                (float *)a->out[0]},
        .entries = nb,
        .xs = a->in_shape[0][0] == 1 ? 0 : m * k,
        .ys = a->in_shape[1][0] == 1 ? 0 : k * n,
        .os = m * n,
        .split = m * n * k >= 2 * SPLIT_MIN_MACS,
    };
    vdev_threads_product_run(sb.one.det, sgemm_batch_run, &sb);
}
