#!/usr/bin/env bash
# cli_demo_mirrored.sh — `vdev demo --mirrored`: one model trained
# data-parallel on every logical GPU. The loss falls, the replicas stay
# identical bit for bit, no replica holds more memory than another (the
# imbalance figure is 1.000), the step rate against one GPU is printed; a
# replica without rows shows "-" for its loss, and the last line says
# whether the loss fell, rose or stayed; it
# runs on every GPU there is (simulated ones without a GPU, and logical GPUs
# of one card), takes the demo's options, and a second scenario beside it is
# a usage error; with every GPU hidden it refuses, saying nothing else.
# Usage: cli_demo_mirrored.sh VDEV DATA
set -u
vdev=$1
. "${BASH_SOURCE%/*}/testlib.sh"
for v in $(compgen -e); do
  case $v in VDEV_*|TF_*) unset "$v" ;; esac
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
run() {
  "$vdev" "$@" >"$tmp/out" 2>"$tmp/err"; rc=$?
  out=$(cat "$tmp/out"); err=$(cat "$tmp/err")
}

# Three simulated GPUs: three replicas.
VDEV_SIM_GPUS=3x2GiB run demo --mirrored --steps 60 --batch 96 --seed 2
[ $rc -eq 0 ] && ok || bad "exit $rc: $err"
[ -z "$err" ] && ok || bad "stderr: $err"
has "$out" "Replicas: 3, on /device:GPU:0 /device:GPU:1 /device:GPU:2" && ok || bad "devices: $out"
has "$out" "global batch 96 (32 per replica), 60 steps" && ok || bad "batch: $out"
has "$out" "replicas identical bit for bit: yes" && ok || bad "replicas differ: $out"
has "$out" "Memory imbalance (largest peak / smallest): 1.000" && ok || bad "imbalance: $out"
grep -Eq "^step +0  loss [0-9.]+  replicas [0-9.]+ [0-9.]+ [0-9.]+$" <<<"$out" && ok ||
  bad "no per-replica losses: $out"
ratio=$(sed -n 's/^Loss fell \([0-9.]*\) -> \([0-9.]*\);.*/\2 \1/p' <<<"$out" | awk '{ print $1 / $2 }')
awk -v r="${ratio:-1}" 'BEGIN { exit !(r < 0.5) }' && ok || bad "loss fell only to $ratio of its first"
grep -Eq "^Step rate: 3 replicas [0-9.]+ steps/s \([0-9]+ examples/s\); one GPU, same global batch, [0-9.]+ steps/s: [0-9.]+x$" <<<"$out" \
  && ok || bad "no step rate: $out"
for r in 0 1 2; do
  grep -q "^  replica $r  /device:GPU:$r " <<<"$out" && ok || bad "no memory line for replica $r"
done

# No GPU: four simulated ones. One card split in two: two replicas on it.
run demo --mirrored --steps 3 --batch 8
[ $rc -eq 0 ] && ok || bad "no GPU: exit $rc: $err"
has "$out" "running on simulated GPUs, VDEV_SIM_GPUS=4x16GiB" && ok || bad "no GPU: $out"
has "$out" "Replicas: 4," && ok || bad "no GPU: not four replicas: $out"
VDEV_SIM_GPUS=1x8GiB VDEV_LOGICAL_DEVICES="0:2GiB,2GiB" run demo --mirrored --steps 3 --batch 7
[ $rc -eq 0 ] && ok || bad "one card: exit $rc: $err"
has "$out" "Replicas: 2, on /device:GPU:0 /device:GPU:1" && ok || bad "one card: $out"
has "$out" "(3 per replica, a row more on some)" && ok || bad "uneven batch: $out"
has "$out" "replicas identical bit for bit: yes" && ok || bad "one card: replicas differ: $out"

# Options and usage.
VDEV_SIM_GPUS=2x1GiB run demo --mirrored --help
[ $rc -eq 0 ] && ok || bad "--help: exit $rc"
has "$out" "  vdev demo --mirrored " && ok || bad "--help lacks --mirrored: $out"
has "$out" "usage: vdev demo [--tf-placement [--vdev-placement] | --split]" && ok || bad "--help: $out"
run help demo
has "$out" "  vdev demo --mirrored [--epochs N]" && ok || bad "help demo: $out"
run demo --mirrored --split
[ $rc -eq 2 ] && ok || bad "two scenarios: exit $rc"
[ "$(head -1 <<<"$err")" = "vdev demo: --mirrored and --split are two scenarios: choose one" ] && ok ||
  bad "two scenarios: $err"
run demo --mirrored --steps 0
[ $rc -eq 2 ] && ok || bad "--steps 0: exit $rc"
[ "$(head -1 <<<"$err")" = "vdev demo: --steps takes a whole number from 1 to 1000000, not '0'" ] && ok ||
  bad "--steps 0: $err"
# Every GPU hidden: stops, saying so, as the other scenarios do.
VDEV_SIM_GPUS=2x1GiB VDEV_VISIBLE_DEVICES= run demo --mirrored --steps 2
[ $rc -eq 1 ] && ok || bad "no visible GPU: exit $rc"
[ "$err" = 'vdev demo: no GPU is visible (VDEV_VISIBLE_DEVICES="" hides the 2 simulated GPUs of VDEV_SIM_GPUS); the demo needs at least one GPU, real or simulated' ] &&
  ok || bad "no visible GPU: stderr '$err'"
[ -z "$out" ] && ok || bad "no visible GPU: stdout '$out'"
# No GPU at all and every simulated one hidden: the refusal alone, with no
# word of "running on simulated GPUs" (it runs nothing); the same for the
# other scenarios (examples/demo.c).
VDEV_CUDA_PLUGIN=/nonexistent/libvdev-cuda.so VDEV_VISIBLE_DEVICES= run demo --mirrored --steps 2
[ $rc -eq 1 ] && ok || bad "no GPU, all hidden: exit $rc"
[ "$err" = 'vdev demo: no GPU is visible (VDEV_VISIBLE_DEVICES="" hides the 4 simulated GPUs the demo would make); the demo needs at least one GPU, real or simulated' ] &&
  ok || bad "no GPU, all hidden: stderr '$err'"
[ -z "$out" ] && ok || bad "no GPU, all hidden: stdout '$out'"
VDEV_CUDA_PLUGIN=/nonexistent/libvdev-cuda.so VDEV_VISIBLE_DEVICES= run demo --steps 2
[ $rc -eq 1 ] && ok || bad "demo, no GPU, all hidden: exit $rc"
[ "$err" = 'vdev demo: no GPU is visible (VDEV_VISIBLE_DEVICES="" hides the 3 simulated GPUs the demo would make); the demo needs at least one GPU, real or simulated' ] &&
  ok || bad "demo, no GPU, all hidden: stderr '$err'"
[ -z "$out" ] && ok || bad "demo, no GPU, all hidden: stdout '$out'"

# Fewer rows than replicas: a replica without rows has no mean ("-"), and
# the last line says which way the loss went, by the numbers it printed.
# expect_direction: the "Loss ..." line from the first and last step lines.
expect_direction() {
  local first last
  first=$(grep -E '^step ' <<<"$out" | head -1 | awk '{ print $4 }')
  last=$(grep -E '^step ' <<<"$out" | tail -1 | awk '{ print $4 }')
  if [ "$first" = "$last" ]; then echo "Loss stayed at $first; replicas identical bit for bit: yes"
  elif awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a) }'; then
    echo "Loss fell $first -> $last; replicas identical bit for bit: yes"
  else echo "Loss rose $first -> $last; replicas identical bit for bit: yes"; fi
}
VDEV_SIM_GPUS=4x1GiB run demo --mirrored --batch 1 --steps 2
has "$out" "global batch 1 (a row on 1 of the 4 replicas, none on the others), 2 steps" && ok ||
  bad "batch 1: $out"
[ $rc -eq 0 ] && ok || bad "batch 1: exit $rc: $err"
grep -Eq '^step +0  loss [0-9.]+  replicas [0-9.]+ - - -$' <<<"$out" && ok || bad "batch 1, step 0: $out"
grep -Eq '^step +1  loss [0-9.]+  replicas [0-9.]+ - - -$' <<<"$out" && ok || bad "batch 1, step 1: $out"
want=$(expect_direction)
[ "$(grep '^Loss ' <<<"$out")" = "$want" ] && ok || bad "batch 1: '$(grep '^Loss ' <<<"$out")', expected '$want'"
# these two steps raise the loss (0.9488 -> 1.0703 when written): say "rose"
has "$want" "Loss rose " && ok || bad "batch 1: the loss no longer rises, the check of 'rose' is gone: $want"
VDEV_SIM_GPUS=4x1GiB run demo --mirrored --batch 3 --steps 1
has "$out" "global batch 3 (a row on 3 of the 4 replicas, none on the other), 1 step" && ok ||
  bad "batch 3: $out"
# under 20 steps every step prints its losses: no step is timed, and it says so
[ "$(grep '^Step rate' <<<"$out")" = "Step rate: not measured: only the steps that print no losses are timed, and under 20 steps every step prints them" ] &&
  ok || bad "one step, step rate: $out"
[ $rc -eq 0 ] && ok || bad "one step: exit $rc: $err"
grep -Eq '^step +0  loss [0-9.]+  replicas [0-9.]+ [0-9.]+ [0-9.]+ -$' <<<"$out" && ok || bad "batch 3: $out"
want=$(expect_direction)
[ "$(grep '^Loss ' <<<"$out")" = "$want" ] && has "$want" "Loss stayed at " && ok ||
  bad "one step: '$(grep '^Loss ' <<<"$out")', expected '$want'"

# Under the strict placement policy the strategy's own moves between devices
# are explicit copies (TensorFlow's strategy makes them under any policy): the
# same losses as under the copy policy, not NaN from a reduce that failed.
VDEV_SIM_GPUS=3x1GiB run demo --mirrored --batch 30 --steps 3
copy_lines=$(grep -E '^(step |Loss |One GPU)' <<<"$out")
VDEV_SIM_GPUS=3x1GiB VDEV_PLACEMENT=strict run demo --mirrored --batch 30 --steps 3
[ $rc -eq 0 ] && ok || bad "strict: exit $rc: $err"
[ -z "$err" ] && ok || bad "strict: stderr: $err"
has "$out" "nan" && bad "strict: a NaN: $out" || ok
[ "$(grep -E '^(step |Loss |One GPU)' <<<"$out")" = "$copy_lines" ] && [ -n "$copy_lines" ] && ok ||
  bad "strict: not the copy policy's losses: $out (copy: $copy_lines)"

finish
