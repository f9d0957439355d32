// peer_replay.hpp — the replay every peer allocator gets in bench/peers,
// written once: a trace is replayed exactly as vdev_replay_run replays it
// against vdev (src/alloc/replay.c):
//  - capacity: the smallest one-region size (a multiple of 256 bytes) that
//    serves the whole trace, by the same bisection to 1e-4 of the peak of
//    live bytes;
//  - time: runs of the pre-parsed events back to back until at least
//    1,000,000 events, in a region of twice that capacity, a spinlock (atomic
//    exchange, then a release store) taken around every call as vdev's
//    allocator takes its own, on a thread pinned to its CPU; blocks a pass
//    leaves live freed untimed; the median and range of 5 runs.
// A peer is a class P with P(capacity_bytes), bool P::take(bytes, Handle &)
// (false: no room) and void P::give(Handle); peer_main<P> prints one line
// per trace: name, ns/event (median, min, max), capacity ratio.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <ctime>
#include <sched.h>
#include <vector>

struct peer_event {
    unsigned long long bytes;
    unsigned slot;
};
extern "C" int peer_trace_load(const char *, peer_event **, unsigned long long *, unsigned *,
                               unsigned long long *, unsigned **, unsigned *);

struct peer_trace {
    peer_event *ev;
    unsigned long long n, peak;
    unsigned slots, *live_end, n_live_end;
};

static inline unsigned long long peer_now_ns()
{
    timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (unsigned long long)t.tv_sec * 1000000000ull + (unsigned long long)t.tv_nsec;
}

template <class P> static bool peer_fits(const peer_trace &t, unsigned long long cap)
{
    P a(cap);
    std::vector<typename P::Handle> h(t.slots ? t.slots : 1);
    for (unsigned long long i = 0; i < t.n; i++) {
        if (t.ev[i].bytes) {
            if (!a.take(t.ev[i].bytes, h[t.ev[i].slot]))
                return false;
        } else {
            a.give(h[t.ev[i].slot]);
        }
    }
    return true;
}

template <class P> static unsigned long long peer_min_capacity(const peer_trace &t)
{
    const unsigned long long step = 256;
    unsigned long long lo = t.peak, hi;
    if (peer_fits<P>(t, lo))
        return lo;
    unsigned long long gap = lo / 64 > step ? (lo / 64) & ~(step - 1) : step;
    for (;;) {
        hi = lo + gap;
        if (peer_fits<P>(t, hi))
            break;
        lo = hi;
        gap *= 2;
    }
    unsigned long long tol = (unsigned long long)((double)t.peak * 1e-4);
    if (tol < step)
        tol = step;
    while (hi - lo > tol && hi - lo > step) {
        unsigned long long mid = (lo + (hi - lo) / 2) & ~(step - 1);
        if (mid <= lo)
            mid = lo + step;
        if (peer_fits<P>(t, mid))
            hi = mid;
        else
            lo = mid;
    }
    return hi;
}

template <class P> static int peer_main(int argc, char **argv)
{
    static std::atomic<int> spin{0};
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(sched_getcpu(), &one);
    sched_setaffinity(0, sizeof one, &one);
    for (int k = 1; k < argc; k++) {
        peer_trace t;
        if (peer_trace_load(argv[k], &t.ev, &t.n, &t.slots, &t.peak, &t.live_end, &t.n_live_end))
            return 1;
        unsigned long long cap = peer_min_capacity<P>(t);
        unsigned long long passes = (1000000 + t.n - 1) / t.n;
        std::vector<double> ns;
        std::vector<typename P::Handle> h(t.slots ? t.slots : 1);
        for (int r = 0; r < 5; r++) {
            P a(2 * cap);
            unsigned long long total = 0, per = t.n_live_end ? 1 : passes;
            for (unsigned long long p = 0; p < passes; p += per) {
                unsigned long long t0 = peer_now_ns();
                for (unsigned long long q = 0; q < per; q++)
                    for (unsigned long long i = 0; i < t.n; i++) {
                        const peer_event *e = &t.ev[i];
                        while (spin.exchange(1, std::memory_order_acquire)) {
                        }
                        if (e->bytes) {
                            bool ok = a.take(e->bytes, h[e->slot]);
                            spin.store(0, std::memory_order_release);
                            if (!ok) {
                                fprintf(stderr, "%s: allocation failed while timing\n", argv[k]);
                                return 1;
                            }
                        } else {
                            a.give(h[e->slot]);
                            spin.store(0, std::memory_order_release);
                        }
                    }
                total += peer_now_ns() - t0;
                for (unsigned q = 0; q < t.n_live_end; q++) /* untimed */
                    a.give(h[t.live_end[q]]);
            }
            ns.push_back((double)total / (double)(passes * t.n));
        }
        std::sort(ns.begin(), ns.end());
        const char *name = argv[k];
        for (const char *p = argv[k]; *p; p++)
            if (*p == '/')
                name = p + 1;
        printf("%s %.1f %.1f %.1f %.4f\n", name, ns[2], ns[0], ns[4], (double)cap / (double)t.peak);
        fflush(stdout);
    }
    return 0;
}
