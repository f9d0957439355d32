/* cuda_blas.cu — matrix products of the CUDA plugin, through cuBLAS loaded on
 * first use.
 *
 * libcublas (and libcublasLt, which it needs) is about half a gigabyte of
 * mappings; linked into the plugin, every process that loads the plugin
 * would map it at start-up, products or not. So the plugin does not link it:
 * the first product that needs cuBLAS dlopens libcublas.so.<major> (the
 * soname of the cuBLAS the plugin was compiled against) and resolves the five
 * functions it uses, under a lock so that threads of several GPUs arriving
 * together load it once. It is looked for on the loader's path, which
 * includes the plugin's RUNPATH (the toolkit's library folder at build time),
 * then in that folder by full path. The library stays loaded for the life of
 * the process. A failure is kept and reported by every later product:
 *   "CUDA plugin: MatMul needs cuBLAS: libcublas.so.13: cannot open shared object file: ..."
 * Each stream's handle is created on its first non-empty product (the caller
 * holds the stream's launch lock), with the device's context current, bound
 * to the stream once and given the stream's workspace (cublasSetWorkspace,
 * after cublasSetStream, which resets it): cuBLAS then allocates no device
 * memory of its own for products, and the workspace is counted in the card's
 * budget with the stream.
 *
 * A row-major C = op(A) op(B) is the column-major C^T = op(B)^T op(A)^T, so B
 * goes first and no data moves. Empty products return before cuBLAS is
 * touched: m or n of 0 would give cuBLAS a leading dimension of 0, which it
 * rejects, and k of 0 is a product of zeros (cuBLAS would leave C as it was).
 *
 * Built with VDEV_CUDA_HOST_EMULATION (tests), the functions are the stand-in
 * runtime's (tests/cuda/host_cuda.h) and nothing is loaded. */
#include "backend/cuda/cuda_device.cuh"

#ifndef VDEV_CUDA_HOST_EMULATION
#include <cublas_v2.h>
#include <dlfcn.h>
#endif
#include <pthread.h>
#include <string.h>

#define STR_(x) #x
#define XSTR(x) STR_(x)
#define CUBLAS_SONAME "libcublas.so." XSTR(CUBLAS_VER_MAJOR)

namespace vdev_cuda {
namespace {

/* The cuBLAS functions the plugin uses. */
struct Blas {
    decltype(&cublasCreate_v2) create;
    decltype(&cublasDestroy_v2) destroy;
    decltype(&cublasSetStream_v2) set_stream;
    decltype(&cublasSetWorkspace_v2) set_workspace;
    decltype(&cublasSgemm_v2) sgemm;
    decltype(&cublasSgemm_v2_64) sgemm_64;
    decltype(&cublasGetStatusString) status_string;
};

pthread_mutex_t blas_lock = PTHREAD_MUTEX_INITIALIZER;
Blas blas;
int blas_state;        /* 0 not tried, 1 loaded, -1 failed (blas_error says why) */
char blas_error[640];

#ifdef VDEV_CUDA_HOST_EMULATION
int load_blas_locked()
{
    blas = Blas{&cublasCreate_v2,    &cublasDestroy_v2,  &cublasSetStream_v2,
                &cublasSetWorkspace_v2, &cublasSgemm_v2, &cublasSgemm_v2_64,
                &cublasGetStatusString};
    return 1;
}
#else
int load_blas_locked()
{
    char first[600] = "";
    void *h = vdev_cuda_dlopen_toolkit(CUBLAS_SONAME, first, sizeof first);
    if (!h) {
        snprintf(blas_error, sizeof blas_error, "CUDA plugin: MatMul needs cuBLAS: %s", first);
        return -1;
    }
    struct {
        const char *name;
        void **slot;
    } fns[] = {
        {XSTR(cublasCreate), (void **)&blas.create},
        {XSTR(cublasDestroy), (void **)&blas.destroy},
        {XSTR(cublasSetStream), (void **)&blas.set_stream},
        {XSTR(cublasSetWorkspace), (void **)&blas.set_workspace},
        {XSTR(cublasSgemm), (void **)&blas.sgemm},
        {XSTR(cublasSgemm_64), (void **)&blas.sgemm_64},
        {"cublasGetStatusString", (void **)&blas.status_string},
    };
    for (auto &f : fns)
        if (!(*f.slot = dlsym(h, f.name))) {
            snprintf(blas_error, sizeof blas_error, "CUDA plugin: %s lacks %s (cuBLAS too old?)",
                     CUBLAS_SONAME, f.name);
            return -1; /* h stays loaded: it is in use nowhere, and unloading cuBLAS is unsafe */
        }
    return 1;
}
#endif

/* cuBLAS resolved, once per process; 0 on success, else msg says why. */
int load_blas(char *msg, size_t cap)
{
    pthread_mutex_lock(&blas_lock);
    if (blas_state == 0)
        blas_state = load_blas_locked();
    int st = blas_state;
    pthread_mutex_unlock(&blas_lock);
    if (st < 0) {
        snprintf(msg, cap, "%s", blas_error);
        return -1;
    }
    return 0;
}

} // namespace

namespace {

/* "[2,3,4]": a shape as TensorFlow's messages print it. */
void shape_text(const int64_t *s, int n, char *buf, size_t cap)
{
    size_t at = (size_t)snprintf(buf, cap, "[");
    for (int d = 0; d < n && at < cap; d++)
        at += (size_t)snprintf(buf + at, cap - at, d ? ",%lld" : "%lld", (long long)s[d]);
    if (at < cap)
        snprintf(buf + at, cap - at, "]");
}

/* C [batch][m,n] = op(A[b]) op(B[b]) for each of `batch` entries (A's and
 * B's entries xs and ys floats apart, 0 for a broadcast batch of 1), each
 * one cuBLAS product on the device's stream; what failed goes to msg. */
int products(const vdev_cuda_args *a, const vdev_cuda_launch_env *env, int ta, int tb,
             int64_t batch, int64_t m, int64_t n, int64_t k, int64_t xs, int64_t ys,
             const char *what, char *msg, size_t cap)
{
    cudaStream_t s = (cudaStream_t)env->stream;
    float *c = (float *)a->out[0];
    if (batch == 0 || m == 0 || n == 0) /* nothing to write */
        return VDEV_CUDA_RC_OK;
    if (k == 0) { /* an empty sum: zeros */
        cudaError_t e = cudaMemsetAsync(c, 0, (size_t)(batch * m * n) * sizeof(float), s);
        if (e != cudaSuccess) {
            snprintf(msg, cap, "CUDA plugin: %s: cudaMemsetAsync failed: %s", what,
                     cudaGetErrorString(e));
            (void)cudaGetLastError(); /* cleared: the next launch must not report it */
            return VDEV_CUDA_RC_FAILED;
        }
        return VDEV_CUDA_RC_OK;
    }
    if (!*env->cublas) {
        int rc = vdev_cuda_blas_create(env->cublas, env->stream, env->workspace,
                                       env->workspace_bytes, msg, cap);
        if (rc != VDEV_CUDA_RC_OK)
            return rc;
    }
    cublasHandle_t h = (cublasHandle_t)*env->cublas; /* bound to this stream */
    cublasStatus_t st = CUBLAS_STATUS_SUCCESS;
    const float one = 1.0f, zero = 0.0f;
    const float *A = (const float *)a->in[0], *B = (const float *)a->in[1];
    cublasOperation_t opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N, opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    int64_t ldb = tb ? k : n, lda = ta ? m : k, ldc = n;
    int small = m <= INT_MAX && n <= INT_MAX && k <= INT_MAX && lda <= INT_MAX && ldb <= INT_MAX;
    for (int64_t b = 0; b < batch && st == CUBLAS_STATUS_SUCCESS; b++) {
        const float *Ab = A + b * xs, *Bb = B + b * ys;
        float *cb = c + b * m * n;
        if (small)
            st = blas.sgemm(h, opb, opa, (int)n, (int)m, (int)k, &one, Bb, (int)ldb, Ab,
                            (int)lda, &zero, cb, (int)ldc);
        else
            st = blas.sgemm_64(h, opb, opa, n, m, k, &one, Bb, ldb, Ab, lda, &zero, cb, ldc);
    }
    if (st != CUBLAS_STATUS_SUCCESS) {
        int oom = st == CUBLAS_STATUS_ALLOC_FAILED; /* cuBLAS's own first-use buffers */
        char x[96], y[96];
        shape_text(a->in_shape[0], a->in_ndim[0], x, sizeof x);
        shape_text(a->in_shape[1], a->in_ndim[1], y, sizeof y);
        snprintf(msg, cap, "CUDA plugin: %s %sx%s: cublasSgemm failed: %s%s", what, x, y,
                 blas.status_string(st),
                 oom ? ": the GPU has no memory left for cuBLAS's own buffers; "
                       VDEV_CUDA_OOM_ADVICE : "");
        return oom ? VDEV_CUDA_RC_OOM : VDEV_CUDA_RC_FAILED;
    }
    return VDEV_CUDA_RC_OK;
}

} // namespace

int run_matmul(const vdev_cuda_args *a, const vdev_cuda_launch_env *env, char *msg, size_t cap)
{
    int ta = a->i[0] != 0, tb = a->i[1] != 0;
    return products(a, env, ta, tb, 1, a->out_shape[0][0], a->out_shape[0][1],
                    a->in_shape[0][ta ? 0 : 1], 0, 0, "MatMul", msg, cap);
}

int run_batch_matmul(const vdev_cuda_args *a, const vdev_cuda_launch_env *env, char *msg,
                     size_t cap)
{
    int ta = a->i[0] != 0, tb = a->i[1] != 0;
    int64_t m = a->out_shape[0][1], n = a->out_shape[0][2], k = a->in_shape[0][ta ? 1 : 2];
    return products(a, env, ta, tb, a->out_shape[0][0], m, n, k,
                    a->in_shape[0][0] == 1 ? 0 : m * k, a->in_shape[1][0] == 1 ? 0 : k * n,
                    "BatchMatMulV2", msg, cap);
}

} // namespace vdev_cuda

extern "C" int vdev_cuda_blas_create(void **handle, void *stream, void *workspace,
                                     size_t workspace_bytes, char *msg, size_t cap)
{
    using namespace vdev_cuda;
    if (load_blas(msg, cap) != 0)
        return VDEV_CUDA_RC_FAILED;
    cublasHandle_t h = nullptr;
    cublasStatus_t st = blas.create(&h);
    if (st == CUBLAS_STATUS_ALLOC_FAILED) {
        snprintf(msg, cap,
                 "CUDA plugin: cublasCreate failed: %s: the GPU has no memory left for a cuBLAS "
                 "handle; " VDEV_CUDA_OOM_ADVICE,
                 blas.status_string(st));
        return VDEV_CUDA_RC_OOM;
    }
    if (st != CUBLAS_STATUS_SUCCESS) {
        snprintf(msg, cap, "CUDA plugin: cublasCreate failed: %s", blas.status_string(st));
        return VDEV_CUDA_RC_FAILED;
    }
    const char *what = "cublasSetStream";
    st = blas.set_stream(h, (cudaStream_t)stream);
    if (st == CUBLAS_STATUS_SUCCESS && workspace) {
        what = "cublasSetWorkspace";
        st = blas.set_workspace(h, workspace, workspace_bytes);
    }
    if (st != CUBLAS_STATUS_SUCCESS) {
        snprintf(msg, cap, "CUDA plugin: %s failed: %s", what, blas.status_string(st));
        blas.destroy(h);
        return VDEV_CUDA_RC_FAILED;
    }
    *handle = h;
    return VDEV_CUDA_RC_OK;
}

extern "C" void vdev_cuda_blas_destroy(void *handle)
{
    using namespace vdev_cuda;
    if (handle && blas.destroy) /* a handle exists only once cuBLAS is loaded */
        blas.destroy((cublasHandle_t)handle);
}
