#!/usr/bin/env bash
# cli_demo.sh — the main job end to end, through the vdev command:
# losses fall to below half, memory per step is steady, the placement audit
# finds the bug under TensorFlow's rule and nothing under vdev's, and the split
# scenario recovers from an out-of-memory batch. Usage: cli_demo.sh VDEV SHARED
set -u
vdev=$1
fail=0; pass=0
ok()   { pass=$((pass + 1)); }
bad()  { echo "FAIL: $*"; fail=$((fail + 1)); }
unset VDEV_SIM_GPUS VDEV_PLACEMENT VDEV_LOGICAL_DEVICES VDEV_VISIBLE_DEVICES VDEV_MEMORY_GROWTH
export VDEV_SIM_GPUS=3x2GiB
out=$("$vdev" demo --epochs 3 --steps 40 --seed 1 2>&1); rc=$?
[ $rc -eq 0 ] && ok || bad "demo exit $rc: $out"
echo "$out" | grep -q "Memory per step: steady" && ok || bad "memory not steady: $out"
ratios=$(echo "$out" | sed -n 's/^Final loss \/ first loss: //p' | grep -o '[0-9]\.[0-9]*')
[ "$(echo "$ratios" | wc -l)" -eq 3 ] && ok || bad "no loss ratios: $out"
for r in $ratios; do
  awk -v r="$r" 'BEGIN { exit !(r < 0.5) }' && ok || bad "a loss fell only to $r of its first"
done
echo "$out" | grep -q "none: every op ran on the device of the variables it uses" && ok || bad "audit not empty"
for k in 0 1 2; do
  echo "$out" | grep -q "^/device:GPU:$k  *[1-9]" && ok || bad "GPU:$k ran no ops"
done

out=$("$vdev" demo --tf-placement --steps 5 2>&1); rc=$?
[ $rc -eq 0 ] && ok || bad "tf-placement exit $rc"
echo "$out" | grep -Eq "Placement audit: [1-9][0-9]* kinds? of op ran away" && ok || bad "audit empty under tf rule: $out"
echo "$out" | grep -q "MatMul .*ran on /device:GPU:0, variables on /device:GPU:1" && ok || bad "MatMul not audited"
out=$("$vdev" demo --tf-placement --vdev-placement --steps 5 2>&1)
echo "$out" | grep -q "Placement audit: 0 kinds of op" && ok || bad "audit not empty under vdev's rule: $out"

unset VDEV_SIM_GPUS
out=$(VDEV_SIM_GPUS=1x8GiB "$vdev" demo --split --steps 24 2>&1); rc=$?
[ $rc -eq 0 ] && ok || bad "split exit $rc: $out"
echo "$out" | grep -q "OOM when allocating tensor with shape\[65536,8192\] and type float" && ok || bad "no OOM: $out"
echo "$out" | grep -q "model B lowers its batch" && ok || bad "no recovery"
echo "$out" | grep -q "^Loss fell" && ok || bad "no final losses"

"$vdev" demo --epochs 0 >/dev/null 2>&1; [ $? -eq 2 ] && ok || bad "--epochs 0 accepted"
"$vdev" demo --bogus >/dev/null 2>&1; [ $? -eq 2 ] && ok || bad "--bogus accepted"
"$vdev" demo --help | grep -q "usage: vdev demo" && ok || bad "no help"
VDEV_SIM_GPUS=3x2GiB VDEV_PLACEMENT_REPORT=1 "$vdev" demo --epochs 1 --steps 2 2>&1 >/dev/null | grep -q "Placement audit" && ok || bad "no report at exit"
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
