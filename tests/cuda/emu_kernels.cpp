/* emu_kernels.cpp — src/backend/cuda/cuda_kernels.cu compiled for the host against the
 * stand-in runtime (host_cuda.h), for test_cuda_emu.c. */
#include "backend/cuda/cuda_kernels.cu"
