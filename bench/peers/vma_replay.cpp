// vma_replay.cpp — replays allocation traces against the virtual block of
// AMD's Vulkan Memory Allocator (VMA, MIT; vk_mem_alloc.h is not part of
// this repository: bench/peers/run.sh builds this file against a copy the
// user has, e.g. Debian's libvulkan-memory-allocator-dev, with the Vulkan
// headers) by the replay of peer_replay.hpp. The virtual block runs in its
// default mode (VMA's TLSF algorithm); each request is rounded up to 256
// bytes, vdev's granule, with an alignment of 1 (every offset is then a
// multiple of 256, as vdev's are, without VMA's alignment path). A virtual
// block is not thread-safe: the replay's spinlock is its lock.
#define VMA_IMPLEMENTATION
#define VMA_STATIC_VULKAN_FUNCTIONS 0
#define VMA_DYNAMIC_VULKAN_FUNCTIONS 0
#include <vk_mem_alloc.h>

#include "peer_replay.hpp"

#include <cstdlib>

class VmaPeer {
  public:
    using Handle = VmaVirtualAllocation;
    explicit VmaPeer(unsigned long long cap)
    {
        VmaVirtualBlockCreateInfo ci = {};
        ci.size = cap ? cap : 256;
        if (vmaCreateVirtualBlock(&ci, &b_) != VK_SUCCESS) {
            fprintf(stderr, "vmaCreateVirtualBlock failed\n");
            std::exit(1);
        }
    }
    ~VmaPeer()
    {
        vmaClearVirtualBlock(b_); /* a failed fit leaves blocks live */
        vmaDestroyVirtualBlock(b_);
    }
    VmaPeer(const VmaPeer &) = delete;
    VmaPeer &operator=(const VmaPeer &) = delete;
    bool take(unsigned long long bytes, Handle &h)
    {
        VmaVirtualAllocationCreateInfo ai = {};
        ai.size = (bytes + 255) & ~255ull;
        VkDeviceSize offset;
        return vmaVirtualAllocate(b_, &ai, &h, &offset) == VK_SUCCESS;
    }
    void give(Handle h) { vmaVirtualFree(b_, h); }

  private:
    VmaVirtualBlock b_;
};

int main(int argc, char **argv) { return peer_main<VmaPeer>(argc, argv); }
