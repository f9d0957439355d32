#!/usr/bin/env bash
# bench/run_alloc.sh — builds vdev (Release) and runs the allocator benchmark
# pinned to CPU 0: every trace in $TRACES (default: data/traces and, when
# present, ../shared/traces/synthetic.trace.gz) is replayed as `vdev replay`
# does, and the "## Allocator" section is written to bench/ALLOC_RESULTS.md.
# Run it on an otherwise idle machine.
#   bench/run_alloc.sh            the full measurement (5 runs of >= 1e6 events per trace)
#   bench/run_alloc.sh --quick    one short run per trace (a smoke test)
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build-bench -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build-bench -j "$(nproc)" --target bench_alloc >/dev/null
# The traces: TRACES=DIR if set; else data/traces, plus synthetic.trace.gz from
# ../shared/traces when it is there (4 MB, not kept in the repository), linked
# together into build-bench/traces.
traces=${TRACES:-}
if [ -z "$traces" ]; then
  traces=build-bench/traces
  rm -rf "$traces" && mkdir -p "$traces"
  ln -s "$PWD"/data/traces/* "$traces"/
  if [ -f ../shared/traces/synthetic.trace.gz ]; then
    ln -s "$(cd ../shared/traces && pwd)/synthetic.trace.gz" "$traces"/
  else
    echo "note: no ../shared/traces/synthetic.trace.gz: the synthetic trace is not replayed" >&2
  fi
fi
taskset -c 0 build-bench/bench/bench_alloc "$traces" --out bench/ALLOC_RESULTS.md "$@"
