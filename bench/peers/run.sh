#!/usr/bin/env bash
# bench/peers/run.sh — vdev's allocator against OffsetAllocator and, when its
# header is at hand, VMA's virtual block, on the same traces, side by side in
# one run, by the same method (peer_replay.hpp and bench/bench_alloc.c),
# pinned to CPU 0.
#   bench/peers/run.sh OFFSETALLOCATOR_DIR [TRACE...]
#   VMA_INCLUDE=DIR bench/peers/run.sh OFFSETALLOCATOR_DIR [TRACE...]
# OFFSETALLOCATOR_DIR holds offsetAllocator.hpp and offsetAllocator.cpp from
# github.com/sebbbi/OffsetAllocator; VMA_INCLUDE holds vk_mem_alloc.h (3.x) and
# the Vulkan headers (vulkan/vulkan.h), e.g. Debian's
# libvulkan-memory-allocator-dev and libvulkan-dev unpacked there. Neither is
# part of this repository. TRACEs default to data/traces/*.trace and, when
# present, ../shared/traces/synthetic.trace.gz. For each trace, vdev and the
# peers take turns three times; the table gives each one's median of the three
# medians, vdev's time over the fastest peer's, and the capacity ratios.
# Writes a markdown table on stdout.
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
libs=("$out/trace_shim.o" build-bench/libvdev.a)
# shellcheck disable=SC2207
libs+=($(pkg-config --libs openblas yajl libmicrohttpd) -lz -lm -lpthread -ldl)
c++ -O2 -std=c++20 -I"$oa" -Ibench/peers bench/peers/offsetallocator_replay.cpp \
  "$oa/offsetAllocator.cpp" "${libs[@]}" -o "$out/offsetallocator_replay"
vma=${VMA_INCLUDE:-}
if [ -n "$vma" ]; then
  [ -f "$vma/vk_mem_alloc.h" ] && [ -f "$vma/vulkan/vulkan.h" ] ||
    { echo "VMA_INCLUDE=$vma: no vk_mem_alloc.h or vulkan/vulkan.h there" >&2; exit 2; }
  c++ -O2 -std=c++20 -isystem "$vma" -Ibench/peers bench/peers/vma_replay.cpp "${libs[@]}" \
    -o "$out/vma_replay"
fi
med3() { printf '%s\n' "$@" | sort -g | sed -n 2p; }
if [ -n "$vma" ]; then
  echo "| trace | vdev ns/event | OffsetAllocator ns/event | VMA ns/event | vdev ÷ fastest peer | vdev capacity ÷ peak | OffsetAllocator capacity ÷ peak | VMA capacity ÷ peak |"
  echo "|---|---:|---:|---:|---:|---:|---:|---:|"
else
  echo "| trace | vdev ns/event | OffsetAllocator ns/event | vdev ÷ OffsetAllocator | vdev capacity ÷ peak | OffsetAllocator capacity ÷ peak |"
  echo "|---|---:|---:|---:|---:|---:|"
fi
for t in "${traces[@]}"; do
  d=$(mktemp -d)
  ln -s "$(cd "$(dirname "$t")" && pwd)/$(basename "$t")" "$d/"
  vns=(); ons=(); mns=(); vcap=""; ocap=""; mcap=""
  for r in 1 2 3; do
    line=$(taskset -c 0 build-bench/bench/bench_alloc "$d" --md "$d/x.md" 2>/dev/null | tail -1)
    vns+=("$(awk '{print $3}' <<<"$line")"); vcap=$(awk '{print $5}' <<<"$line")
    line=$(taskset -c 0 "$out/offsetallocator_replay" "$t")
    ons+=("$(awk '{print $2}' <<<"$line")"); ocap=$(awk '{print $5}' <<<"$line")
    if [ -n "$vma" ]; then
      line=$(taskset -c 0 "$out/vma_replay" "$t")
      mns+=("$(awk '{print $2}' <<<"$line")"); mcap=$(awk '{print $5}' <<<"$line")
    fi
  done
  rm -rf "$d"
  v=$(med3 "${vns[@]}"); o=$(med3 "${ons[@]}")
  if [ -n "$vma" ]; then
    m=$(med3 "${mns[@]}")
    f=$(awk -v a="$o" -v b="$m" 'BEGIN { print (a < b ? a : b) }')
    echo "| $(basename "$t") | $v | $o | $m | $(awk -v a="$v" -v b="$f" 'BEGIN { printf "%.2f", a / b }') | $vcap | $ocap | $mcap |"
  else
    echo "| $(basename "$t") | $v | $o | $(awk -v a="$v" -v b="$o" 'BEGIN { printf "%.2f", a / b }') | $vcap | $ocap |"
  fi
done
