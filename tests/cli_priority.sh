#!/usr/bin/env bash
# cli_priority.sh — `vdev demo --priority`: the critical model never sees an
# out-of-memory error and finishes its steps (its time alone taken after
# untimed warm-up steps, as the output says), the two secondary models finish
# theirs (recovering from theirs by halving their batch), the monitor moves
# their ceilings; scenario conflicts are usage errors. It runs on the first
# visible GPU and stops, saying so, when none is visible or the card's budget
# (with a memory fraction or TF_DEVICE_MIN_SYS_MEMORY_IN_MB, as governed) is
# too small, naming what would be enough; --steps is parsed as the other demo
# options, over its own range (10 to 100000), which --help gives. Never checks timings.
# Usage: cli_priority.sh VDEV
set -u
vdev=$1
. "${BASH_SOURCE%/*}/testlib.sh"
[ -x "$vdev" ] || { echo "cli_priority: no vdev binary at '$vdev'"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

env -u VDEV_SIM_GPUS -u VDEV_LOGICAL_DEVICES "$vdev" demo --priority --steps 10 >"$tmp/out" 2>"$tmp/err"
rc=$?
out=$(cat "$tmp/out")
[ $rc -eq 0 ] && ok || bad "demo --priority: exit $rc: $(cat "$tmp/err")"
for s in "One GPU (Simulated GPU, 3.00 GiB), three logical GPUs sharing 1.50 GiB:" \
         "  GPU:0 critical model: floor 384.00 MiB, priority critical" \
         "critical model: 30 steps, 0 out-of-memory errors; median step " \
         " ms alone (10 steps after 10 untimed warm-up steps), " \
         "model A: 10 steps, " "model B: 10 steps, " "monitor: "; do
  has "$out" "$s" && ok || bad "demo --priority: no '$s' in: $out"
done
grep -q "ceiling changes" <<<"$out" && ! grep -q "monitor: 0 looks" <<<"$out" && ok ||
  bad "demo --priority: the monitor did nothing: $out"

"$vdev" demo --priority --split >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 2 ] && head -1 "$tmp/err" | grep -qxF "vdev demo: --priority and --split are two scenarios: choose one" &&
  ok || bad "two scenarios: exit $rc: $(cat "$tmp/err")"
"$vdev" demo --help >"$tmp/out" 2>&1
grep -qF "vdev demo --priority [--steps N] [--report DIR]" "$tmp/out" && ok || bad "help lacks --priority"
# its --steps range, which is not the other scenarios' (the usage wraps: lines joined)
tr -s ' \n' ' ' <"$tmp/out" | grep -qF "(--steps N: their training steps, from 10 to 100000, default 40)" &&
  ok || bad "help: no --steps range for --priority: $(cat "$tmp/out")"

# run ARGS...: runs vdev, sets rc, out (stdout) and err (stderr).
run() {
  "$vdev" "$@" >"$tmp/out" 2>"$tmp/err"; rc=$?
  out=$(cat "$tmp/out"); err=$(cat "$tmp/err")
}
# one_error WHAT CODE LINE: exit CODE, stderr starts with LINE.
one_error() {
  [ $rc -eq "$2" ] && ok || bad "$1: exit $rc, expected $2"
  [ "$(head -1 <<<"$err")" = "$3" ] && ok || bad "$1: stderr starts '$(head -1 <<<"$err")', expected '$3'"
}

# ---- the card: the first visible GPU, none when every GPU is hidden ----
# Every op on the logical GPUs of the visible card (physical GPU 1), none on the CPU.
VDEV_SIM_GPUS=1x1GiB,1x16GiB VDEV_VISIBLE_DEVICES=1 VDEV_LOG_DEVICE_PLACEMENT=1 \
  run demo --priority --steps 10
[ $rc -eq 0 ] && ok || bad "visible GPU 1: exit $rc: $(grep -v '^Executing op' <<<"$err")"
has "$out" "One GPU (Simulated GPU, 16.00 GiB), three logical GPUs sharing 3.00 GiB:" && ok ||
  bad "visible GPU 1: not the 16 GiB card: $out"
grep -q "^Executing op .* in device .*/device:GPU:[012]$" <<<"$err" && ok ||
  bad "visible GPU 1: no op on a GPU"
grep -q "^Executing op .* in device .*/device:CPU:0$" <<<"$err" &&
  bad "visible GPU 1: ops ran on CPU:0: $(grep -m3 CPU:0 <<<"$err")" || ok
hidden='vdev demo: no GPU is visible (VDEV_VISIBLE_DEVICES="" hides the 1 simulated GPU of VDEV_SIM_GPUS); the demo needs at least one GPU, real or simulated'
VDEV_SIM_GPUS=1x3GiB VDEV_VISIBLE_DEVICES= run demo --priority --steps 10
one_error "every GPU hidden" 1 "$hidden"
[ "$(lines "$err")" -eq 1 ] && [ -z "$out" ] && ok || bad "every GPU hidden: not one line: $out $err"
env -u VDEV_SIM_GPUS VDEV_VISIBLE_DEVICES= VDEV_CUDA_PLUGIN=/nonexistent/libvdev-cuda.so \
  "$vdev" demo --priority --steps 10 >"$tmp/out" 2>"$tmp/err"; rc=$?; err=$(cat "$tmp/err")
one_error "every GPU hidden, none simulated" 1 \
  'vdev demo: no GPU is visible (VDEV_VISIBLE_DEVICES="" hides the 1 simulated GPU the demo would make); the demo needs at least one GPU, real or simulated'

# ---- a card too small for the scenario: refused before it runs ----
# The arena is the card's budget as vdev governs it (a card with 225 MiB or less free keeps
# all of it; a memory fraction or TF_DEVICE_MIN_SYS_MEMORY_IN_MB sets it), and the message
# says which, and what would give enough.
VDEV_SIM_GPUS=1x100MiB run demo --priority --steps 10
one_error "100 MiB card" 1 "vdev demo: /physical_device:GPU:0 leaves 100.00 MiB to share (what the driver reserve leaves of its free memory), less than the 276.00 MiB the three models need; run on a GPU with 501.00 MiB free or more (VDEV_SIM_GPUS=1x501MiB)"
[ -z "$out" ] && [ "$(lines "$err")" -eq 1 ] && ok || bad "100 MiB card: ran: $out $err"
VDEV_SIM_GPUS=1x500MiB run demo --priority --steps 10
one_error "500 MiB card" 1 "vdev demo: /physical_device:GPU:0 leaves 275.00 MiB to share (what the driver reserve leaves of its free memory), less than the 276.00 MiB the three models need; run on a GPU with 501.00 MiB free or more (VDEV_SIM_GPUS=1x501MiB)"
VDEV_SIM_GPUS=1x2GiB VDEV_MEMORY_FRACTION=0.1 run demo --priority --steps 10
one_error "fraction 0.1 of 2 GiB" 1 "vdev demo: /physical_device:GPU:0 leaves 204.80 MiB to share (VDEV_MEMORY_FRACTION=0.1 of its total memory), less than the 276.00 MiB the three models need; set VDEV_MEMORY_FRACTION to 0.14 or more"
[ -z "$out" ] && ok || bad "fraction 0.1: ran: $out"
VDEV_SIM_GPUS=1x200MiB TF_GPU_MEMORY_FRACTION=0.5 run demo --priority --steps 10
one_error "fraction 0.5 of 200 MiB" 1 "vdev demo: /physical_device:GPU:0 leaves 100.00 MiB to share (TF_GPU_MEMORY_FRACTION=0.5 of its total memory), less than the 276.00 MiB the three models need; run on a GPU with 552.00 MiB of memory or more (VDEV_SIM_GPUS=1x552MiB)"
VDEV_SIM_GPUS=1x1GiB TF_DEVICE_MIN_SYS_MEMORY_IN_MB=900 run demo --priority --steps 10
one_error "900 MiB reserve" 1 "vdev demo: /physical_device:GPU:0 leaves 124.00 MiB to share (its free memory less TF_DEVICE_MIN_SYS_MEMORY_IN_MB=900), less than the 276.00 MiB the three models need; run on a GPU with 1.15 GiB free or more (VDEV_SIM_GPUS=1x1176MiB)"
# Each suggestion is enough.
VDEV_SIM_GPUS=1x2GiB VDEV_MEMORY_FRACTION=0.14 run demo --priority --steps 10
[ $rc -eq 0 ] && [ -z "$err" ] && ok || bad "fraction 0.14: exit $rc: $err"
has "$out" "One GPU (Simulated GPU, 2.00 GiB), three logical GPUs sharing 286.00 MiB:" && ok ||
  bad "fraction 0.14: not the fraction's budget: $out"
VDEV_SIM_GPUS=1x1176MiB TF_DEVICE_MIN_SYS_MEMORY_IN_MB=900 run demo --priority --steps 10
[ $rc -eq 0 ] && has "$out" "three logical GPUs sharing 276.00 MiB:" && ok ||
  bad "1176 MiB card, 900 MiB reserve: exit $rc: $out $err"
# the smallest card it asks for is enough: the critical model sees no OOM
VDEV_SIM_GPUS=1x501MiB run demo --priority --steps 10
[ $rc -eq 0 ] && [ -z "$err" ] && ok || bad "501 MiB card: exit $rc: $err"
has "$out" "critical model: 30 steps, 0 out-of-memory errors;" && ok || bad "501 MiB card: $out"

# ---- options: --steps as the other demo options, usage errors with the usage ----
# usage_error (tests/testlib.sh) checks a refusal against these usage lines.
usage_marks=("usage: vdev demo" "vdev demo --priority [--steps N]")
for v in 5 0 9 100001 10abc -3 ""; do
  usage_error "--steps '$v'" "vdev demo: --steps takes a whole number from 10 to 100000, not '$v'" \
    demo --priority --steps "$v"
done
usage_error "bare --steps" "vdev demo: --steps needs a number" demo --priority --steps
usage_error "--steps=5" "vdev demo: --steps takes a whole number from 10 to 100000, not '5'" \
  demo --priority --steps=5
usage_error "--priority --epochs" "vdev demo: --priority takes --steps N and --report DIR, not --epochs" \
  demo --priority --epochs 3
usage_error "--priority --bogus" "vdev demo: unknown option '--bogus'" demo --priority --bogus

finish cli_priority
