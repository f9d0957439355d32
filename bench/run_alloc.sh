#!/usr/bin/env bash
# bench/run_alloc.sh — builds vdev (Release) and runs the allocator benchmark
# pinned to CPU 0: every trace in $SHARED/traces (default ../shared/traces) is
# replayed as `vdev replay` does, and the "## Allocator" section is written to
# bench/ALLOC_RESULTS.md. Run it on an otherwise idle machine.
#   bench/run_alloc.sh            the full measurement (5 runs of >= 1e6 events per trace)
#   bench/run_alloc.sh --quick    one short run per trace (a smoke test)
set -euo pipefail
cd "$(dirname "$0")/.."
shared=${SHARED:-../shared}
cmake -S . -B build-bench -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build-bench -j "$(nproc)" --target bench_alloc >/dev/null
taskset -c 0 build-bench/bench/bench_alloc "$shared/traces" --out bench/ALLOC_RESULTS.md "$@"
