/* cuda_kernels.h — the boundary between the CUDA plugin's C side
 * (cuda_plugin.c, cuda_memory.c, cuda_stream.c: driver API, memory, streams,
 * copies, events) and its nvcc side (cuda_kernels.cu: one kernel per op;
 * cuda_reduce.cu: reductions; cuda_blas.cu: cuBLAS for matmul).
 *
 * Why a header of its own: the C side includes backend.h, which pulls in the
 * core's C11 headers (base.h uses _Noreturn and other C-only spellings), and
 * nvcc compiles .cu files as C++. So the kernel side gets this header, which
 * is valid C and C++, and a struct with exactly the layout of
 * struct vdev_kernel_args; cuda_stream.c checks that layout field by field
 * with _Static_assert and copies the arguments across, so the two can never
 * drift apart silently. */
#ifndef VDEV_CUDA_KERNELS_H
#define VDEV_CUDA_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define VDEV_CUDA_MAX_IN 4
#define VDEV_CUDA_MAX_OUT 4
#define VDEV_CUDA_MAX_DIMS 4

/* The layout of struct vdev_kernel_args (backend.h). */
struct vdev_cuda_args {
    int op;
    int n_in, n_out;
    const void *in[VDEV_CUDA_MAX_IN];
    void *out[VDEV_CUDA_MAX_OUT];
    int in_ndim[VDEV_CUDA_MAX_IN];
    int64_t in_shape[VDEV_CUDA_MAX_IN][VDEV_CUDA_MAX_DIMS];
    int in_dtype[VDEV_CUDA_MAX_IN];
    int out_ndim[VDEV_CUDA_MAX_OUT];
    int64_t out_shape[VDEV_CUDA_MAX_OUT][VDEV_CUDA_MAX_DIMS];
    int out_dtype[VDEV_CUDA_MAX_OUT];
    double f[4];
    int64_t i[4];
    int64_t j[4];
};

/* What a launch needs besides the arguments: the stream (opaque here:
 * CUstream), where the stream's cuBLAS handle lives (a cublasHandle_t, NULL
 * until the first product that needs one creates it, under the stream's
 * launch lock), a scratch buffer in device memory for the partial sums of
 * multi-block reductions, the device's multiprocessor count (to size grids),
 * and the stream's cuBLAS workspace (device memory vdev took, handed to the
 * handle with cublasSetWorkspace so that cuBLAS allocates none of its own;
 * NULL: cuBLAS's default). */
struct vdev_cuda_launch_env {
    void *stream;
    void **cublas;
    void *scratch;          /* device memory, VDEV_CUDA_SCRATCH_BYTES, 256-byte aligned */
    int n_sm;
    void *workspace;
    size_t workspace_bytes;
};

/* Scratch per stream: partial sums of reductions (doubles). Every use is
 * ordered on its stream, so one buffer per stream suffices. */
#define VDEV_CUDA_SCRATCH_BYTES (1u << 20)
/* cuBLAS workspace per stream, as NVIDIA recommends: 32 MiB on Hopper
 * (compute capability 9.0) and later, 4 MiB before. */
#define VDEV_CUDA_WORKSPACE_BYTES(cc_major) ((cc_major) >= 9 ? (32u << 20) : (4u << 20))

/* Status codes of vdev_cuda_run_op, mapped to enum vdev_status by the caller
 * (kept numeric here so the .cu file needs none of the core's headers beyond
 * op_ids.h). */
enum vdev_cuda_rc {
    VDEV_CUDA_RC_OK = 0,
    VDEV_CUDA_RC_UNSUPPORTED, /* no kernel for the op (msg says which) */
    VDEV_CUDA_RC_FAILED,      /* a launch or cuBLAS call failed (msg says why) */
    VDEV_CUDA_RC_OOM          /* one failed for want of device memory (msg says what) */
};

/* What the runtime or cuBLAS could not get when the card's memory is gone:
 * with lazy module loading (CUDA 12.2 and later) a kernel's code is loaded on
 * its first launch, and cuBLAS allocates on its first use, both outside the
 * budget vdev manages; the messages end with this advice. */
#define VDEV_CUDA_OOM_ADVICE                                                                       \
    "leave the CUDA libraries a margin of the card: VDEV_MEMORY_FRACTION below 1.0, or memory "  \
    "growth (VDEV_MEMORY_GROWTH=true) instead of preallocation"

/* Launches op a->op on env->stream; returns at once (the work is queued).
 * On failure writes a one-line message into msg (cap bytes). The caller has
 * made the device's context current on this thread. */
int vdev_cuda_run_op(const struct vdev_cuda_args *a, const struct vdev_cuda_launch_env *env,
                     char *msg, size_t cap);

/* A cuBLAS handle for the device whose context is current, bound to
 * `stream` with `workspace` (workspace_bytes; NULL: cuBLAS's own), loading
 * cuBLAS first if no product has yet (cuda_blas.cu; thread-safe).
 * VDEV_CUDA_RC_OK on success, else VDEV_CUDA_RC_FAILED or VDEV_CUDA_RC_OOM
 * (cuBLAS found no device memory for the handle), msg saying why.
 * vdev_cuda_blas_destroy(NULL) does nothing. */
int vdev_cuda_blas_create(void **handle, void *stream, void *workspace, size_t workspace_bytes,
                          char *msg, size_t cap);
void vdev_cuda_blas_destroy(void *handle);

/* dlopen(soname) on the loader's search path, else from the CUDA toolkit's
 * library folder found at build time (cuBLAS, NCCL: the toolkit's folder is
 * often not on the loader's path). NULL when neither loads, with why (cap
 * bytes) holding the loader's error for each try, "; " between (cuda_plugin.c). */
void *vdev_cuda_dlopen_toolkit(const char *soname, char *why, size_t cap);

#ifdef __cplusplus
}
#endif

#endif /* VDEV_CUDA_KERNELS_H */
