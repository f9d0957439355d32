/* emu_extreme.cpp — src/backend/cuda/cuda_extreme.cu compiled for the host against the
 * stand-in runtime (host_cuda.h), for test_cuda_emu.c. */
#include "backend/cuda/cuda_extreme.cu"
