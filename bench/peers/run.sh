#!/usr/bin/env bash
# bench/peers/run.sh — vdev's allocator against OffsetAllocator on the same
# traces, side by side in one run, by the same method (see
# offsetallocator_replay.cpp and bench/bench_alloc.c), pinned to CPU 0.
#   bench/peers/run.sh OFFSETALLOCATOR_DIR [TRACE...]
# OFFSETALLOCATOR_DIR holds offsetAllocator.hpp and offsetAllocator.cpp from
# github.com/sebbbi/OffsetAllocator (fetched by the user; its code is never
# part of this repository). TRACEs default to data/traces/*.trace and, when
# present, ../shared/traces/synthetic.trace.gz. For each trace, vdev and the
# peer alternate three times; the table gives each one's median of the three
# medians, and the capacity ratios. Writes a markdown table on stdout.
set -euo pipefail
cd "$(dirname "$0")/../.."
[ $# -ge 1 ] && [ -f "$1/offsetAllocator.cpp" ] ||
  { echo "usage: bench/peers/run.sh OFFSETALLOCATOR_DIR [TRACE...]" >&2; exit 2; }
oa=$(cd "$1" && pwd); shift
traces=("$@")
if [ ${#traces[@]} -eq 0 ]; then
  traces=(data/traces/*.trace)
  [ -f ../shared/traces/synthetic.trace.gz ] && traces+=(../shared/traces/synthetic.trace.gz)
fi
cmake -S . -B build-bench -DCMAKE_BUILD_TYPE=Release -DVDEV_CUDA=OFF >/dev/null
cmake --build build-bench -j "$(nproc)" --target vdev_static bench_alloc >/dev/null
out=build-bench/peers
mkdir -p "$out"
cc -O2 -std=c11 -DVDEV_BUILDING -Iinclude -Isrc -c bench/peers/trace_shim.c -o "$out/trace_shim.o"
# shellcheck disable=SC2046
c++ -O2 -std=c++20 -I"$oa" bench/peers/offsetallocator_replay.cpp "$oa/offsetAllocator.cpp" \
  "$out/trace_shim.o" build-bench/libvdev.a $(pkg-config --libs openblas yajl libmicrohttpd) \
  -lz -lm -lpthread -ldl -o "$out/offsetallocator_replay"
med3() { printf '%s\n' "$@" | sort -g | sed -n 2p; }
echo "| trace | vdev ns/event | OffsetAllocator ns/event | vdev ÷ OffsetAllocator | vdev capacity ÷ peak | OffsetAllocator capacity ÷ peak |"
echo "|---|---:|---:|---:|---:|---:|"
for t in "${traces[@]}"; do
  d=$(mktemp -d)
  ln -s "$(cd "$(dirname "$t")" && pwd)/$(basename "$t")" "$d/"
  vns=(); ons=(); vcap=""; ocap=""
  for r in 1 2 3; do
    line=$(taskset -c 0 build-bench/bench/bench_alloc "$d" --md "$d/x.md" 2>/dev/null | tail -1)
    vns+=("$(awk '{print $3}' <<<"$line")"); vcap=$(awk '{print $5}' <<<"$line")
    line=$(taskset -c 0 "$out/offsetallocator_replay" "$t")
    ons+=("$(awk '{print $2}' <<<"$line")"); ocap=$(awk '{print $5}' <<<"$line")
  done
  rm -rf "$d"
  v=$(med3 "${vns[@]}"); o=$(med3 "${ons[@]}")
  echo "| $(basename "$t") | $v | $o | $(awk -v a="$v" -v b="$o" 'BEGIN { printf "%.2f", a / b }') | $vcap | $ocap |"
done
