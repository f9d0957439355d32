/* kernels_host.c — faster host kernels for the ops where it pays: matmul
 * through OpenBLAS's cblas_sgemm. They run wherever host kernels run (the
 * cpu backend inline, sim GPUs on their worker thread) and are tested against
 * the reference kernels in kernels_ref.c.
 *
 * sgemm accumulates in float, so results differ from the double-accumulating
 * reference by a few ulps of sum |a_ip b_pj| (the tests bound it as
 * 4 k 2^-24 sum_p |a_ip| |b_pj|). Empty operands never reach BLAS: an empty
 * output needs nothing, an empty inner dimension gives zeros. */
#include "ops/impl.h"

#include <cblas.h>
#include <limits.h>
#include <stdatomic.h>
#include <string.h>

/* OpenBLAS's own threads. With two or more simulated GPUs, each GPU's stream
 * already runs its products on a thread of its own; OpenBLAS threads inside
 * each would oversubscribe the cores (three streams times two BLAS threads
 * on two cores ran the chain3 benchmark 2.7x slower). So, once per start-up
 * and unless OPENBLAS_NUM_THREADS or OMP_NUM_THREADS says otherwise, BLAS
 * runs single-threaded when there are two or more host-run GPU streams, and
 * with its default thread count otherwise. Decided at the first product of a
 * start-up, before any other product of that start-up runs. */
static pthread_mutex_t blas_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic uint32_t blas_generation; /* the start-up it was decided for */
static int blas_default_threads;          /* OpenBLAS's own choice, 0: not read yet */

static void blas_configure(void)
{
    uint32_t gen = vdev_runtime_generation();
    if (atomic_load_explicit(&blas_generation, memory_order_acquire) == gen)
        return;
    pthread_mutex_lock(&blas_lock);
    if (atomic_load_explicit(&blas_generation, memory_order_relaxed) != gen) {
        if (!getenv("OPENBLAS_NUM_THREADS") && !getenv("OMP_NUM_THREADS")) {
            if (!blas_default_threads)
                blas_default_threads = openblas_get_num_threads();
            int streams = 0;
            for (int i = 0; i < vdev_runtime_n_devices(); i++) {
                const struct vdev_ldev *d = vdev_runtime_device(i);
                streams += d->backend->ops->is_gpu && d->backend->ops->host_addressable;
            }
            openblas_set_num_threads(streams >= 2 ? 1 : blas_default_threads);
        }
        atomic_store_explicit(&blas_generation, gen, memory_order_release);
    }
    pthread_mutex_unlock(&blas_lock);
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
    blas_configure();
    /* Leading dimensions are the stored row lengths, whatever the transpose. */
    int lda = (int)a->in_shape[0][1], ldb = (int)a->in_shape[1][1], ldc = (int)n;
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                (int)m, (int)n, (int)k, 1.0f, (const float *)a->in[0], lda, (const float *)a->in[1],
                ldb, 0.0f, (float *)a->out[0], ldc);
}
