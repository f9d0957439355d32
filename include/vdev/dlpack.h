/* vdev/dlpack.h — sharing tensors with other frameworks (numpy, PyTorch, JAX,
 * CuPy) through DLPack, without copying wherever the memory allows: export,
 * import and the count of exports still alive. Names struct DLManagedTensor
 * only; include dlpack/dlpack.h to read it. Part of the public API: vdev.h
 * includes it, and it may be included alone (it includes the parts it builds
 * on). */
#ifndef VDEV_VDEV_DLPACK_H
#define VDEV_VDEV_DLPACK_H

#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ==== DLPack: sharing tensors with other frameworks ========================
 *
 * DLPack (dlpack/dlpack.h, version 0.6 and later) is the exchange format of
 * numpy (np.from_dlpack), PyTorch (torch.utils.dlpack), JAX and CuPy: a
 * DLManagedTensor describes memory (address, device, dtype, shape, strides)
 * and carries a deleter that its consumer calls once it is done with it.
 * vdev shares memory without copying wherever it can:
 *
 *   - export: a tensor on the CPU or a simulated GPU, whose memory the host
 *     reads, goes out as host memory (kDLCPU, device_id 0); a tensor on a
 *     CUDA GPU as kDLCUDA with the CUDA ordinal of its card. Either way the
 *     consumer sees the tensor's own memory, not a copy;
 *   - import: host memory (kDLCPU, and the host-readable kDLCUDAHost and
 *     kDLCUDAManaged) becomes a tensor on CPU:0 over the producer's memory
 *     when it is compact, row-major and 4-byte aligned; strided memory is
 *     copied into a new CPU:0 tensor.
 *
 * Only f32 (kDLFloat, 32 bits, 1 lane) and i32 (kDLInt, 32, 1) tensors of 0
 * to 4 dimensions are exchanged. Not bool: a vdev bool element is a 32-bit
 * word (0 or 1) and DLPack's bool (kDLBool, 8 bits) a byte, so neither side
 * could read the other's memory without a copy; both directions refuse it
 * with VDEV_ERR_UNSUPPORTED, saying to go through int32 (vdev_cast on vdev's
 * side). Include dlpack/dlpack.h to read the structure; this header only
 * names it. */

struct DLManagedTensor; /* dlpack/dlpack.h */

/* Exports t through DLPack without copying: *out describes t's memory (its
 * shape, and its strides in elements, are always given) and keeps t's memory
 * alive, whatever happens to the handle t, until the consumer calls
 * (*out)->deleter(*out) exactly once, from any thread. Waits for the work that
 * makes t, so the consumer may read it at once (on a CUDA GPU: once the
 * device's stream has finished it). The memory is vdev's: vdev_shutdown()
 * frees it whatever exports are alive, so consumers must be done with it
 * before (vdev_dlpack_live_exports() counts them). Writes through the export
 * are writes to the tensor; while it lives, an op that a tape records reads
 * a copy of the tensor, so gradients see the value read. Memory the host can
 * read (cpu, simulated GPUs)
 * goes out as kDLCPU, and while such an export lives, vdev's own writes to
 * it (ops in place, vdev_assign, optimizer updates) finish before the call
 * returns. Errors (*out NULL): VDEV_ERR_INVALID_ARG (out
 * NULL, a dead handle, a runtime shut down), VDEV_ERR_UNSUPPORTED for a bool
 * tensor ("vdev_tensor_to_dlpack: a vdev bool tensor holds 32-bit words,
 * which DLPack's 8-bit bool cannot share; cast it to int32 first
 * (vdev_cast)"),
 * VDEV_ERR_OOM (host memory for the description), or the backend's error
 * from waiting for the device. */
VDEV_API enum vdev_status vdev_tensor_to_dlpack(vdev_tensor_t *t, struct DLManagedTensor **out);

/* Imports a DLPack tensor as a new tensor on CPU:0 (in the current scope, as
 * any new tensor). On success vdev owns `m` and calls m->deleter(m) exactly
 * once: when the tensor's last reference goes when it shares m's memory
 * (zero copy: compact, row-major, 4-byte aligned host memory), at once when
 * it copied the elements (strided or unaligned memory), also after
 * vdev_shutdown(), since the memory is the producer's. On failure (NULL) m
 * is still the caller's, untouched. Errors: VDEV_ERR_INVALID_ARG (m NULL,
 * data NULL with elements, a negative dimension), VDEV_ERR_UNSUPPORTED
 * naming what: memory the host cannot read ("kDLCUDA"...), a dtype other
 * than float32 and int32 ("float64", with the cast to make first for an
 * integer or float dtype: "cast it to float32 before the import"; for
 * kDLBool, "dtype bool8; a vdev bool tensor holds 32-bit words, which
 * DLPack's 8-bit bool cannot share: cast it to int32 before the import (and
 * to bool after it, vdev_cast)"), more than 4 dimensions; VDEV_ERR_OOM. */
VDEV_API vdev_tensor_t *vdev_tensor_from_dlpack(struct DLManagedTensor *m);

/* The number of exports (vdev_tensor_to_dlpack) whose deleter has not run. */
VDEV_API int vdev_dlpack_live_exports(void);

#ifdef __cplusplus
}
#endif

#endif /* VDEV_VDEV_DLPACK_H */
