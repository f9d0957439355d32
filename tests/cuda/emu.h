/* emu.h — what the stand-in CUDA runtime (host_cuda.cpp) tells the kernel
 * emulation test (test_cuda_emu.c) about the work it ran; valid C and C++. */
#ifndef VDEV_EMU_H
#define VDEV_EMU_H

#ifdef __cplusplus
extern "C" {
#endif

struct vdev_emu_counts {
    long launches;     /* kernels that ran */
    long bad_launches; /* launches refused for their configuration */
    long gemms;        /* products that reached cublasSgemm */
    long bad_gemms;    /* products it refused for their arguments */
    long memsets;      /* cudaMemsetAsync calls */
    long blas_handles; /* live cuBLAS handles */
};
void vdev_emu_counts_get(struct vdev_emu_counts *out);

/* The next call of `what` fails with `code` and does nothing, once: "launch"
 * (cudaGetLastError then returns the cudaError_t code), "cublasCreate" or
 * "cublasSgemm" (they return the cublasStatus_t code). */
void vdev_emu_fail_next(const char *what, int code);

#ifdef __cplusplus
}
#endif

#endif /* VDEV_EMU_H */
