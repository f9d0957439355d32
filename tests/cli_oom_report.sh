#!/usr/bin/env bash
# cli_oom_report.sh — VDEV_OOM_REPORT=1 prints the allocator's state after an
# out-of-memory failure, as TensorFlow's BFC allocator does: per bin chunks and
# bytes in use and free, the largest free block, and the biggest live blocks
# with the ops that made them; the error line itself names the kind of OOM and
# what would help. Usage: cli_oom_report.sh VDEV SHARED
set -u
vdev=$1
. "${BASH_SOURCE%/*}/testlib.sh"
unset VDEV_LOGICAL_DEVICES VDEV_PLACEMENT VDEV_VISIBLE_DEVICES VDEV_MEMORY_GROWTH
err=$(VDEV_SIM_GPUS=1x8GiB VDEV_OOM_REPORT=1 "$vdev" demo --split --steps 4 2>&1 >/dev/null); rc=$?
[ $rc -eq 0 ] && ok || bad "split demo exit $rc"
echo "$err" | grep -q "^OOM when allocating tensor with shape\[65536,8192\] and type float" && ok || bad "no OOM line: $err"
# The line says which kind of OOM it is (the 2 GiB tensor exhausts the 2 GiB
# device) and only what would help with that.
echo "$err" | grep -Eq "^OOM when allocating tensor with shape\[65536,8192\] .*: [0-9.]+ [KMG]?i?B in use of 2.00 GiB limit, largest free block [0-9.]+ [KMG]?i?B; the limit is short by [0-9.]+ [KMG]?i?B; would help: a larger limit, a smaller batch$" &&
  ok || bad "OOM line does not name exhaustion: $err"
echo "$err" | grep -q "^Allocator (/device:GPU:1) state: .* in use of 2.00 GiB limit" && ok || bad "no state line"
echo "$err" | grep -Eq "^Bin \([0-9.]+ [KMG]?i?B\):[[:space:]]+Total Chunks: [0-9]+, Chunks in use: [0-9]+\." && ok || bad "no bin lines"
echo "$err" | grep -q "^Largest free block: " && ok || bad "no largest free block"
echo "$err" | grep -q "^Biggest live blocks:" && ok || bad "no biggest blocks"
echo "$err" | grep -Eq "made by (RandomUniform|Fill|FromHost|MatMul|Relu|AddV2)" && ok || bad "blocks not tagged with ops"
if echo "$err" | grep -q "made by (unknown)"; then bad "an untagged live block"; else ok; fi
# without the variable: the error alone, no dump
err=$(VDEV_SIM_GPUS=1x8GiB "$vdev" demo --split --steps 4 2>&1 >/dev/null)
if echo "$err" | grep -q "Allocator (/device"; then bad "dump printed without VDEV_OOM_REPORT"; else ok; fi
err=$(VDEV_SIM_GPUS=1x8GiB VDEV_OOM_REPORT=maybe "$vdev" demo --split --steps 4 2>&1 >/dev/null); rc=$?
[ $rc -ne 0 ] && ok || bad "VDEV_OOM_REPORT=maybe accepted"
echo "$err" | grep -q 'VDEV_OOM_REPORT="maybe"' && ok || bad "bad value not named: $err"
finish
