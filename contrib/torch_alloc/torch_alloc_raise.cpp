/* torch_alloc_raise.cpp — vdev_torch_malloc_raising, the allocation function
 * vdev.torch gives PyTorch. PyTorch's pluggable allocator keeps whatever
 * pointer its allocation function returns, NULL included: a tensor that did
 * not fit would be made over address 0, and fail or write to the wrong place
 * at its first use (torch.empty raised nothing when a 600 MiB tensor was
 * asked of a 512 MiB logical GPU). PyTorch's own allocator throws instead,
 * and PyTorch turns a C++ exception into a Python RuntimeError; so this
 * function throws std::runtime_error with vdev's message when
 * vdev_torch_malloc fails ("CUDA out of memory (vdev): ..." for a lack of
 * memory, as PyTorch's own message begins). C callers keep vdev_torch_malloc,
 * which returns NULL: an exception must not cross C frames. */
#include "torch_alloc_internal.h"

#include <stdexcept>
#include <string>

extern "C" VDEV_API void *vdev_torch_malloc_raising(ssize_t size, int device, cudaStream_t stream)
{
    void *p = vdev_torch_malloc(size, device, stream);
    if (p || size == 0)
        return p;
    std::string why = vdev_torch_last_error();
    if (vdev_torch_last_status() == VDEV_ERR_OOM)
        throw std::runtime_error("CUDA out of memory (vdev): " + why);
    throw std::runtime_error("vdev_torch_malloc: " + why);
}
