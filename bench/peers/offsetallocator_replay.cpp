// offsetallocator_replay.cpp — replays allocation traces against Sebastian
// Aaltonen's OffsetAllocator (github.com/sebbbi/OffsetAllocator, MIT; not part
// of this repository: bench/peers/run.sh builds this file against a copy the
// user fetched) by the replay of peer_replay.hpp. OffsetAllocator counts in
// 32-bit units: 256 bytes here, vdev's granule.
#include "offsetAllocator.hpp"
#include "peer_replay.hpp"

class OffsetPeer {
  public:
    using Handle = OffsetAllocator::Allocation;
    explicit OffsetPeer(unsigned long long cap)
        : a_(cap / 256 ? (unsigned)(cap / 256) : 1, 1u << 22)
    {
    }
    bool take(unsigned long long bytes, Handle &h)
    {
        h = a_.allocate((unsigned)((bytes + 255) / 256));
        return h.offset != Handle::NO_SPACE;
    }
    void give(Handle h) { a_.free(h); }

  private:
    OffsetAllocator::Allocator a_;
};

int main(int argc, char **argv) { return peer_main<OffsetPeer>(argc, argv); }
