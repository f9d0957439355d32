#!/usr/bin/env python3
"""alloc_policies.py — the capacity other placement policies would need on the
same traces, beside vdev's own, from a model of the allocator (no timing).

The model keeps free chunks by address and by size class and replays a trace
(the text format of `vdev replay`) in one region, coalescing on free as the
allocator does. A policy is a choice of free chunk for a request and a choice
of end of that chunk for the block:

  octave        vdev's policy (src/alloc/alloc.c): the lowest-addressed chunk
                of the request's power-of-two class that fits, else the
                lowest-addressed chunk of the next non-empty class
  classes-K     the same with 2^K classes per power of two (TLSF's second
                level, with address-ordered lists)
  next-best     octave, but the smallest chunk (lowest address among equals)
                of the next non-empty class when the request's own has none
  best-fit      the smallest chunk that fits, lowest address among equals
                (the rule of TensorFlow's BFC allocator)
  ...+older     the block goes to the end of the chunk whose neighbouring
                block is the older one (allocated earlier), when both
                neighbours are blocks; otherwise to the low end
  ...+olderN    the same, only for a block of at least 1/N of the chunk
                (a small block in a large hole stays at the low end)

For each trace it prints the minimum capacity over the peak of live bytes
under each policy, found the way `vdev replay` finds it (the same bracketing
and bisection to 1e-4 of the peak, so the same answer where fitting is not
monotonic in the capacity). With --check VDEV it first replays each trace
with the `octave` model and with VDEV's `replay --json` and fails unless the
two capacities agree exactly: the model is vdev's policy, not a guess at it.

  bench/alloc_policies.py [--check build/vdev] [--policies P,P,...] TRACE...

With --bin-stats CAPACITY it prints instead, for each trace replayed under
`octave` in one region of CAPACITY bytes, how long vdev's bin lists are when
malloc walks them and where in them insertions land (what the walks cost).

  bench/alloc_policies.py --bin-stats 5.1e9 TRACE...

Pure Python: a 200,000-event trace takes about five seconds a policy here, the
synthetic trace (a million events) about half a minute.
"""
import bisect
import gzip
import json
import math
import subprocess
import sys
from collections import Counter

UNIT = 256


class TraceError(Exception):
    pass


def load(path):
    """Events as (id, bytes) for allocations and (id, 0) for frees; checks
    that every free names a live block and every allocation a free id."""
    opener = gzip.open if path.endswith(".gz") else open
    events, live = [], set()
    with opener(path, "rt") as f:
        for n, line in enumerate(f, 1):
            if not line.strip() or line.startswith("#"):
                continue
            w = line.split()
            try:
                if w[0] == "a" and len(w) == 3:
                    i, b = int(w[1]), max(int(w[2]), 1)
                    if i in live:
                        raise TraceError(f"{path}:{n}: id {i} allocated while live")
                    live.add(i)
                    events.append((i, (b + UNIT - 1) // UNIT * UNIT))
                    continue
                if w[0] == "f" and len(w) == 2:
                    i = int(w[1])
                    if i not in live:
                        raise TraceError(f"{path}:{n}: free of id {i}, which is not live")
                    live.discard(i)
                    events.append((i, 0))
                    continue
            except ValueError:
                pass
            raise TraceError(f"{path}:{n}: not 'a ID BYTES' or 'f ID': {line.strip()[:60]}")
    if not any(b for _, b in events):
        raise TraceError(f"{path}: no allocations")
    return events


def peak_live(events):
    live, cur, peak = {}, 0, 0
    for i, b in events:
        if b:
            live[i] = b
            cur += b
            peak = max(peak, cur)
        else:
            cur -= live.pop(i)
    return peak


def class_of(size, k):
    u = size // UNIT
    m = u.bit_length() - 1
    if m < k:
        return u
    return ((m - k + 1) << k) | ((u >> (m - k)) & ((1 << k) - 1))


class Region:
    """Free chunks of one region: by address, by class, and (for the policies
    that choose by size) by size."""

    def __init__(self, capacity, k, by_size):
        self.k = k
        self.addrs = []   # free chunk addresses, sorted
        self.size = {}    # free chunk address -> size
        self.bins = {}    # class -> sorted addresses
        self.classes = []  # non-empty classes, sorted
        self.by_size = [] if by_size else None  # (size, address), sorted
        self.add(0, capacity)

    def add(self, a, s):
        bisect.insort(self.addrs, a)
        self.size[a] = s
        c = class_of(s, self.k)
        lst = self.bins.get(c)
        if not lst:
            self.bins[c] = lst = []
            bisect.insort(self.classes, c)
        bisect.insort(lst, a)
        if self.by_size is not None:
            bisect.insort(self.by_size, (s, a))

    def remove(self, a):
        s = self.size.pop(a)
        del self.addrs[bisect.bisect_left(self.addrs, a)]
        c = class_of(s, self.k)
        lst = self.bins[c]
        del lst[bisect.bisect_left(lst, a)]
        if not lst:
            del self.classes[bisect.bisect_left(self.classes, c)]
        if self.by_size is not None:
            del self.by_size[bisect.bisect_left(self.by_size, (s, a))]
        return s

    def first_fit_in_class(self, sz):
        """(address or None, class): own class first fit."""
        c = class_of(sz, self.k)
        for a in self.bins.get(c, ()):
            if self.size[a] >= sz:
                return a, c
        return None, c

    def next_class(self, c):
        j = bisect.bisect_right(self.classes, c)
        return self.classes[j] if j < len(self.classes) else None


def choose_octave(r, sz):
    a, c = r.first_fit_in_class(sz)
    if a is not None:
        return a
    n = r.next_class(c)
    return None if n is None else r.bins[n][0]


def choose_next_best(r, sz):
    a, c = r.first_fit_in_class(sz)
    if a is not None:
        return a
    n = r.next_class(c)
    if n is None:
        return None
    return min(r.bins[n], key=lambda x: (r.size[x], x))


def choose_best_fit(r, sz):
    j = bisect.bisect_left(r.by_size, (sz, -1))
    return r.by_size[j][1] if j < len(r.by_size) else None


# name: (class bits, the choice, whether it needs the chunks by size)
POLICIES = {
    "octave": (0, choose_octave, False),
    "classes-1": (1, choose_octave, False),
    "classes-2": (2, choose_octave, False),
    "classes-3": (3, choose_octave, False),
    "next-best": (0, choose_next_best, False),
    "best-fit": (0, choose_best_fit, True),
}


def parse_policy(policy):
    """(base policy, older placement, its share N or 0), or None if malformed."""
    name, sep, rest = policy.partition("+older")
    if name not in POLICIES or (sep and rest and not (rest.isdigit() and int(rest) >= 1)):
        return None
    return name, bool(sep), int(rest) if rest else 0


def fits(events, capacity, policy):
    """Replays the trace in one region of `capacity` bytes; True if nothing failed."""
    name, older, share = parse_policy(policy)
    k, choose, by_size = POLICIES[name]
    r = Region(capacity, k, by_size)
    live = {}    # id -> (address, size)
    born = {}    # block start -> allocation number (kept for +older only)
    ends = {}    # block end -> block start (kept for +older only)
    n = 0
    for i, sz in events:
        if sz:
            a = choose(r, sz)
            if a is None:
                return False
            s = r.remove(a)
            at = a
            if s > sz:
                high = False
                if older and (share == 0 or sz * share >= s):
                    below, above = ends.get(a), a + s
                    if below is not None and above in born:
                        high = born[above] < born[below]
                if high:
                    at = a + s - sz
                    r.add(a, s - sz)
                else:
                    r.add(a + sz, s - sz)
            live[i] = (at, sz)
            if older:
                n += 1
                born[at] = n
                ends[at + sz] = at
        else:
            a, sz = live.pop(i)
            if older:
                del born[a]
                del ends[a + sz]
            lo, hi = a, a + sz
            j = bisect.bisect_left(r.addrs, a)
            if j > 0:
                p = r.addrs[j - 1]
                if p + r.size[p] == a:
                    r.remove(p)
                    lo = p
            if hi in r.size:
                hi += r.remove(hi)
            r.add(lo, hi - lo)
    return True


def min_capacity(events, policy, peak):
    """vdev replay's search (src/alloc/replay.c, min_capacity)."""
    lo = peak
    if fits(events, lo, policy):
        return lo
    gap = (lo // 64) & ~(UNIT - 1) if lo // 64 > UNIT else UNIT
    while True:
        hi = lo + gap
        if fits(events, hi, policy):
            break
        lo = hi
        gap *= 2
    tol = max(int(peak * 1e-4), UNIT)
    while hi - lo > tol and hi - lo > UNIT:
        mid = (lo + (hi - lo) // 2) & ~(UNIT - 1)
        if mid <= lo:
            mid = lo + UNIT
        if fits(events, mid, policy):
            hi = mid
        else:
            lo = mid
    return hi


def vdev_capacity(vdev, trace):
    """`vdev replay`'s minimum capacity for the trace, or an error string."""
    try:
        run = subprocess.run([vdev, "replay", "--json", "--repeats", "1", "--quiet", trace],
                             capture_output=True, text=True)
    except OSError as e:
        return str(e)
    if run.returncode != 0:
        return f"exit {run.returncode}: {run.stderr.strip()[:200]}"
    try:
        return int(json.loads(run.stdout)["min_capacity_bytes"])
    except (ValueError, KeyError, TypeError) as e:
        return f"no min_capacity_bytes in its JSON ({e})"


def bin_stats(events, capacity):
    """What vdev's bin lists hold when the trace replays under `octave` in one
    region of `capacity` bytes: for each malloc, the length of the request's
    own bin and the place of its first fit there (None: no chunk of the bin
    fits, so the next non-empty bin serves it); for each chunk put into a bin,
    the number of that bin's chunks below it (its place in address order).
    A malloc's walk steps over the chunks before its first fit (the whole bin
    when none fits), an insertion's over those below it. Three Counters, or
    None when the trace does not fit."""
    r = Region(capacity, 0, False)
    own, fit, below = Counter(), Counter(), Counter()

    def add(a, s):
        below[bisect.bisect_left(r.bins.get(class_of(s, 0), []), a)] += 1
        r.add(a, s)

    live = {}
    for i, sz in events:
        if sz:
            lst = r.bins.get(class_of(sz, 0), [])
            own[len(lst)] += 1
            fit[next((k for k, a in enumerate(lst) if r.size[a] >= sz), None)] += 1
            a = choose_octave(r, sz)
            if a is None:
                return None
            s = r.remove(a)
            if s > sz:
                add(a + sz, s - sz)
            live[i] = (a, sz)
        else:
            a, sz = live.pop(i)
            lo, hi = a, a + sz
            j = bisect.bisect_left(r.addrs, a)
            if j > 0 and r.addrs[j - 1] + r.size[r.addrs[j - 1]] == a:
                lo = r.addrs[j - 1]
                r.remove(lo)
            if hi in r.size:
                hi += r.remove(hi)
            add(lo, hi - lo)
    return own, fit, below


def print_bin_stats(path, events, capacity):
    got = bin_stats(events, capacity)
    if got is None:
        print(f"alloc_policies.py: {path}: does not fit in {capacity} bytes", file=sys.stderr)
        return 1
    own, fit, below = got
    marks = (0, 1, 2, 4, 8, 16)

    def share(c, keep):
        n = sum(c.values())
        return " | ".join("%.3f" % (sum(v for k, v in c.items() if keep(k, m)) / n)
                          for m in marks)

    print(f"{path}, one region of {capacity} bytes (shares of the calls):\n")
    print("| figure | " + " | ".join("<= %d" % m for m in marks) + " |")
    print("|---|" + "---:|" * len(marks))
    print("| malloc: chunks in its own bin | " + share(own, lambda k, m: k <= m) + " |")
    print("| malloc: first fit at place (0 = the bin's lowest) | "
          + share(fit, lambda k, m: k is not None and k <= m) + " |")
    print("| insertion: chunks of the bin below the new one | "
          + share(below, lambda k, m: k <= m) + " |")
    print(f"\nmallocs {sum(own.values())}, none of the own bin fits: "
          f"{fit[None] / sum(fit.values()):.3f}; insertions {sum(below.values())} (with the "
          "splits and merges that keep a chunk's place, which vdev makes without a walk)")
    return 0


def load_or_say(path, me):
    """load(path), or None after one line on stderr saying why it failed."""
    try:
        return load(path)
    except (OSError, EOFError, UnicodeDecodeError, TraceError) as e:
        print(f"{me}: {e}", file=sys.stderr)
        return None


def main(argv):
    me = "alloc_policies.py"
    check, policies, traces, stats_cap = None, list(POLICIES), [], None
    it = iter(argv)
    for arg in it:
        if arg == "--check":
            check = next(it, "")
        elif arg == "--bin-stats":
            v = next(it, "")
            stats_cap = int(float(v)) if v.replace(".", "", 1).replace("e", "", 1).isdigit() \
                else 0
        elif arg == "--policies":
            policies = next(it, "").split(",")
        elif arg in ("-h", "--help"):
            print(__doc__.strip())
            return 0
        else:
            traces.append(arg)
    if not traces or check == "" or stats_cap == 0:
        print(f"usage: {me} [--check VDEV] [--policies P,...] TRACE... "
              "(or --bin-stats CAPACITY_BYTES TRACE...)", file=sys.stderr)
        return 2
    if stats_cap is not None:
        rc = 0
        for t in traces:
            events = load_or_say(t, me)
            if events is None:
                return 1
            rc |= print_bin_stats(t, events, stats_cap)
        return rc
    for p in policies:
        if parse_policy(p) is None:
            print(f"{me}: unknown policy {p!r}; known: {', '.join(POLICIES)} "
                  "(each also with +older or +olderN, N >= 1)", file=sys.stderr)
            return 2
    # Every trace is read (and with --check, held to vdev) before the table starts.
    loaded = []
    for t in traces:
        events = load_or_say(t, me)
        if events is None:
            return 1
        peak = peak_live(events)
        known = {}
        if check:
            want = vdev_capacity(check, t)
            if isinstance(want, str):
                print(f"{me}: {check} replay {t}: {want}", file=sys.stderr)
                return 1
            known["octave"] = min_capacity(events, "octave", peak)
            if known["octave"] != want:
                print(f"{me}: {t}: the model needs {known['octave']} bytes, {check} replay "
                      f"{want}: the model is not vdev's policy", file=sys.stderr)
                return 1
        loaded.append((t, events, peak, known))
    print("| trace | " + " | ".join(policies) + " |")
    print("|---|" + "---:|" * len(policies))
    logs = [0.0] * len(policies)
    for t, events, peak, known in loaded:
        row = []
        for p in policies:
            need = known[p] if p in known else min_capacity(events, p, peak)
            row.append(need / peak)
            print(f"{t}: {p} {row[-1]:.4f}", file=sys.stderr, flush=True)
        name = t.rsplit("/", 1)[-1]
        print(f"| {name} | " + " | ".join(f"{v:.4f}" for v in row) + " |", flush=True)
        logs = [s + math.log(v) for s, v in zip(logs, row)]
    geo = [math.exp(s / len(loaded)) for s in logs]
    print("| geometric mean | " + " | ".join(f"{v:.4f}" for v in geo) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
