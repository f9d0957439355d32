/* torch_alloc_internal.h — what torch_alloc.c shares with
 * torch_alloc_raise.cpp inside libvdev-torch-alloc.so, and exports to no one:
 * the status of the calling thread's last failure, beside its message
 * (vdev_torch_last_error), so that the raising allocation function can tell
 * a lack of memory from a configuration error. */
#ifndef VDEV_TORCH_ALLOC_INTERNAL_H
#define VDEV_TORCH_ALLOC_INTERNAL_H

#include "vdev_torch_alloc.h"

#ifdef __cplusplus
extern "C" {
#endif

/* VDEV_OK when the thread's last call into the allocator succeeded. */
enum vdev_status vdev_torch_last_status(void);

#ifdef __cplusplus
}
#endif

#endif /* VDEV_TORCH_ALLOC_INTERNAL_H */
