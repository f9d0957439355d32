#!/usr/bin/env bash
# cli_demo.sh — the main job end to end, through the vdev command:
# losses fall to below half (one epoch says it has none to compare), memory
# per step is steady, the placement audit
# finds the bug under TensorFlow's rule and nothing under vdev's (whatever
# VDEV_PLACEMENT says), the default scenario trains the same under the strict
# policy (it copies each model's input itself), and the split scenario
# recovers from an out-of-memory
# batch. The devices are sized from
# what there is (one 8 GiB or 2 GiB GPU, two GPUs, three, none, none visible,
# too little memory: refused, at batch 1 as a GPU too small; the estimate
# checked at its boundary), every scenario takes the same options, usage
# errors print "vdev demo: ..." and the usage on stderr and exit 2, --report
# names its folder and leaves no picture it could not write, and a write
# error on standard output is one line and exit 1.
# Usage: cli_demo.sh VDEV DATA
set -u
vdev=$1
. "${BASH_SOURCE%/*}/testlib.sh"
for v in $(compgen -e); do
  case $v in VDEV_*|TF_*) unset "$v" ;; esac
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# run ARGS...: runs vdev, sets rc, out (stdout) and err (stderr).
run() {
  "$vdev" "$@" >"$tmp/out" 2>"$tmp/err"; rc=$?
  out=$(cat "$tmp/out"); err=$(cat "$tmp/err")
}

# ---- the main job: losses, steady memory, audit ----
export VDEV_SIM_GPUS=3x2GiB
run demo --epochs 3 --steps 40 --seed 1
[ $rc -eq 0 ] && ok || bad "demo exit $rc: $out $err"
has "$out" "Memory per step: steady" && ok || bad "memory not steady: $out"
ratios=$(sed -n 's/^Final loss \/ first loss: //p' <<<"$out" | grep -o '[0-9]\.[0-9]*')
[ "$(echo "$ratios" | wc -l)" -eq 3 ] && ok || bad "no loss ratios: $out"
for r in $ratios; do
  awk -v r="$r" 'BEGIN { exit !(r < 0.5) }' && ok || bad "a loss fell only to $r of its first"
done
has "$out" "none: every op ran on the device of the variables it uses" && ok || bad "audit not empty"
# One epoch has no first loss to compare with: no ratio of 1 that reads as no learning.
run demo --epochs 1 --steps 2
[ $rc -eq 0 ] &&
  has "$out" "Final loss / first loss: one epoch, nothing to compare (--epochs 2 or more)" &&
  ok || bad "one epoch: exit $rc: $out"
for k in 0 1 2; do
  grep -q "^/device:GPU:$k  *[1-9]" <<<"$out" && ok || bad "GPU:$k ran no ops"
done

run demo --tf-placement --steps 5
[ $rc -eq 0 ] && ok || bad "tf-placement exit $rc"
grep -Eq "Placement audit: [1-9][0-9]* kinds? of op ran away" <<<"$out" && ok || bad "audit empty under tf rule: $out"
grep -q "MatMul .*ran on /device:GPU:0, variables on /device:GPU:1" <<<"$out" && ok || bad "MatMul not audited"
run demo --tf-placement --vdev-placement --steps 5
has "$out" "Placement audit: 0 kinds of op" && ok || bad "audit not empty under vdev's rule: $out"
# --vdev-placement sets vdev's rule in code, over VDEV_PLACEMENT, as the label says.
for p in tf strict; do
  VDEV_PLACEMENT=$p run demo --tf-placement --vdev-placement --epochs 1 --steps 2
  [ $rc -eq 0 ] && has "$out" "Placement rule: vdev's (unscoped ops follow their variables)" &&
    has "$out" "Placement audit: 0 kinds of op" && ok ||
    bad "VDEV_PLACEMENT=$p --vdev-placement: exit $rc: $out $err"
done

VDEV_SIM_GPUS=1x8GiB run demo --split --steps 24
[ $rc -eq 0 ] && ok || bad "split exit $rc: $out $err"
has "$out" "Devices: GPU 0 (budget 6.50 GiB) split into logical GPUs of 4.00 GiB (model A) and 2.00 GiB (model B)" \
  && ok || bad "split 1x8GiB: $out"
has "$out" "OOM when allocating tensor with shape[65536,8192] and type float" && ok || bad "no OOM: $out"
has "$out" "model B lowers its batch" && ok || bad "no recovery"
grep -Eq "^Loss: model A fell [0-9.]+ -> [0-9.]+, model B fell [0-9.]+ -> [0-9.]+$" <<<"$out" \
  && ok || bad "no final losses: $out"
VDEV_PLACEMENT_REPORT=1 run demo --epochs 1 --steps 2
has "$err" "Placement audit" && ok || bad "no report at exit: $err"
# One report, of the run: the start-up that measures the card prints none,
# writes no trace and serves no metrics.
VDEV_SIM_GPUS=1x8GiB VDEV_PLACEMENT_REPORT=1 VDEV_TRACE_FILE=$tmp/t.json \
  VDEV_METRICS_ADDR=127.0.0.1:0 run demo --epochs 1 --steps 2
[ $rc -eq 0 ] && ok || bad "observed demo: exit $rc: $err"
[ "$(grep -c "^Placement audit" <<<"$err")" -eq 1 ] && ok || bad "not one placement report: $err"
grep -q '"/device:GPU:2 (sim)' "$tmp/t.json" && ok || bad "the trace is not the run's: $(head -c 600 "$tmp/t.json")"

# ---- devices sized from what there is ----
# devices_case SIM DEVICES-LINE MODEL-3-LINE: the main job runs, says what it chose.
devices_case() {
  VDEV_SIM_GPUS=$1 run demo --epochs 2 --steps 10
  [ $rc -eq 0 ] && ok || bad "VDEV_SIM_GPUS=$1 demo: exit $rc: $err"
  [ -z "$err" ] && ok || bad "VDEV_SIM_GPUS=$1 demo wrote to stderr: $err"
  [ "$(head -1 <<<"$out")" = "$2" ] && ok || bad "VDEV_SIM_GPUS=$1: first line is not '$2': $out"
  has "$out" "$3" && ok || bad "VDEV_SIM_GPUS=$1: no '$3' in: $out"
  has "$out" "Memory per step: steady" && ok || bad "VDEV_SIM_GPUS=$1: memory not steady"
  for k in 0 1 2; do
    grep -q "^/device:GPU:$k  *[1-9]" <<<"$out" && ok || bad "VDEV_SIM_GPUS=$1: GPU:$k ran no ops"
  done
}
devices_case 1x8GiB \
  "Devices: GPU 0 (budget 6.50 GiB) split into three logical GPUs of 2.17 GiB, one model on each" \
  "  model 3 on /device:GPU:2: simulated GPU 0, limit 2.17 GiB"
devices_case 1x2GiB \
  "Devices: GPU 0 (budget 512.00 MiB) split into three logical GPUs of 170.00 MiB, one model on each" \
  "  model 3 on /device:GPU:2: simulated GPU 0, limit 170.00 MiB"
devices_case 2x8GiB \
  "Devices: GPU 0 (budget 6.50 GiB) split into two logical GPUs of 3.25 GiB for models 1 and 2; GPU 1 (budget 6.50 GiB) for model 3" \
  "  model 3 on /device:GPU:2: simulated GPU 1, limit 6.50 GiB"
devices_case 3x16GiB "Devices: 3 GPUs, one model on each" \
  "  model 3 on /device:GPU:2: simulated GPU 2, limit 14.50 GiB"
devices_case 4x1GiB "Devices: 4 GPUs, one model on each of the first three" \
  "  model 3 on /device:GPU:2: simulated GPU 2, limit 799.00 MiB"
# The environment's own split is used as it is.
VDEV_LOGICAL_DEVICES="0:100MiB,100MiB,100MiB" devices_case 1x1GiB \
  "Devices: 3 logical GPUs, one model on each" \
  "  model 3 on /device:GPU:2: simulated GPU 0, limit 100.00 MiB"
# A split of the demo's own replaces the environment's on that GPU: sized from
# the whole card's budget, and the override is told once (the probe is silent).
VDEV_SIM_GPUS=1x2GiB VDEV_LOGICAL_DEVICES="0:100MiB,100MiB" run demo --split --steps 2
[ $rc -eq 0 ] && ok || bad "split over the environment's: exit $rc: $err"
has "$out" "Devices: GPU 0 (budget 512.00 MiB) split into logical GPUs of 341.00 MiB (model A) and 170.00 MiB (model B)" \
  && ok || bad "split over the environment's: $out"
[ "$(grep -c 'win over those of VDEV_LOGICAL_DEVICES' <<<"$err")" -eq 1 ] && ok \
  || bad "split over the environment's: the override told other than once: $err"

# The other scenarios on small cards.
VDEV_SIM_GPUS=1x2GiB run demo --tf-placement --steps 5
[ $rc -eq 0 ] && ok || bad "tf-placement on 1x2GiB: exit $rc: $err"
has "$out" "  model 3 built on /device:GPU:2 (limit 170.00 MiB)" && ok || bad "tf-placement 1x2GiB: $out"
grep -Eq "Placement audit: [1-9][0-9]* kinds? of op ran away" <<<"$out" && ok || bad "tf-placement 1x2GiB audit: $out"
VDEV_SIM_GPUS=1x2GiB run demo --split --steps 24
[ $rc -eq 0 ] && ok || bad "split on 1x2GiB: exit $rc: $err"
has "$out" "Devices: GPU 0 (budget 512.00 MiB) split into logical GPUs of 341.00 MiB (model A) and 170.00 MiB (model B)" \
  && ok || bad "split 1x2GiB: $out"
has "$out" "OOM when allocating tensor with shape[8192,8192] and type float (256.00 MiB) on /job:localhost/replica:0/task:0/device:GPU:1" \
  && ok || bad "split 1x2GiB: no OOM of model B: $out"
has "$out" "model B lowers its batch" && ok || bad "split 1x2GiB: no recovery: $out"
grep -q "^Loss: model A " <<<"$out" && ok || bad "split 1x2GiB: did not finish: $out"
grep -q "model A lowers" <<<"$out" && bad "split 1x2GiB: model A ran out of memory: $out" || ok
grep -q "^  /device:GPU:0: 1.97 MiB in use, peak 42.12 MiB, limit 341.00 MiB$" <<<"$out" \
  && ok || bad "split 1x2GiB: model A's memory: $out"

# No GPU at all: the demo runs on simulated GPUs and says so.
unset VDEV_SIM_GPUS
VDEV_CUDA_PLUGIN=/nonexistent/libvdev-cuda.so run demo --epochs 1 --steps 3
[ $rc -eq 0 ] && ok || bad "no GPU: exit $rc: $err"
grep -q "^No GPU found (CUDA plugin: .*): running on simulated GPUs, VDEV_SIM_GPUS=3x16GiB$" <<<"$out" \
  && ok || bad "no GPU: no note: $out"
has "$out" "Devices: 3 GPUs, one model on each" && ok || bad "no GPU: $out"
VDEV_CUDA_PLUGIN=/nonexistent/libvdev-cuda.so run demo --split --steps 3
[ $rc -eq 0 ] && ok || bad "no GPU --split: exit $rc: $err"
has "$out" "running on simulated GPUs, VDEV_SIM_GPUS=1x8GiB" && ok || bad "no GPU --split: $out"
# one step: the loss neither fell nor rose
VDEV_SIM_GPUS=1x2GiB run demo --split --steps 1
n='\([0-9.]*\)'
want=$(sed -n "s/^step   0  loss  model A $n  model B $n\$/Loss: model A stayed at \1, model B stayed at \2/p" \
       <<<"$out")
[ -n "$want" ] && [ "$(grep '^Loss' <<<"$out")" = "$want" ] && ok ||
  bad "split, one step: '$(grep '^Loss' <<<"$out")', expected '$want'"

# run-time errors: exit 1, one line "vdev demo: ..." on stderr.
one_error() { # one_error WHAT CODE MESSAGE
  [ $rc -eq "$2" ] && ok || bad "$1: exit $rc, expected $2"
  [ "$(head -1 <<<"$err")" = "$3" ] && ok || bad "$1: stderr starts '$(head -1 <<<"$err")', expected '$3'"
}
VDEV_SIM_GPUS=2x8GiB VDEV_VISIBLE_DEVICES= run demo
one_error "no visible GPU" 1 'vdev demo: no GPU is visible (VDEV_VISIBLE_DEVICES="" hides the 2 simulated GPUs of VDEV_SIM_GPUS); the demo needs at least one GPU, real or simulated'
[ "$(lines "$err")" -eq 1 ] && ok || bad "no visible GPU: not one line: $err"
VDEV_SIM_GPUS=1x8MiB run demo --batch 1000
one_error "card too small" 1 "vdev demo: /device:GPU:0 has 2.00 MiB, less than the 5.63 MiB its model needs at batch 1000; give a smaller --batch, or run on larger GPUs (VDEV_SIM_GPUS=3x16GiB)"
# At batch 1 there is no smaller batch to give.
VDEV_SIM_GPUS=1x3MiB run demo --split --batch 1
one_error "split card too small at batch 1" 1 "vdev demo: /device:GPU:0 has 2.00 MiB, less than the 8.19 MiB its model needs at batch 1, the smallest batch: the GPU is too small; run on larger GPUs (VDEV_SIM_GPUS=1x8GiB)"
VDEV_SIM_GPUS=3x1MiB run demo --tf-placement --batch 1
one_error "tf-placement card too small at batch 1" 1 "vdev demo: /device:GPU:0 has 1.00 MiB, less than the 2.26 MiB the three models need there at batch 1, the smallest batch: the GPU is too small; run on larger GPUs (VDEV_SIM_GPUS=3x16GiB)"
# The estimate is what the models allocate (768 KiB and 5 KiB per example),
# not four times it: 1 MiB GPUs run the main job at batch 1 and 51, 2 MiB
# GPUs at the default batch 64, 3 MiB GPUs at batch 300.
for c in 3x1MiB:1 3x1MiB:51 3x2MiB:64 3x3MiB:300; do
  VDEV_SIM_GPUS=${c%:*} run demo --batch "${c#*:}" --epochs 2 --steps 5
  [ $rc -eq 0 ] && [ -z "$err" ] && ok || bad "${c%:*} --batch ${c#*:}: exit $rc: $err"
done
# At the boundary: a limit of exactly the estimate runs without an OOM (the
# check is a safe bound), 256 bytes less is refused. Batch 1000: 768 KiB and
# 5 KiB per example, 5768 KiB; batch 10000: 50768 KiB.
for b in 1000:5768 10000:50768; do
  n=${b%:*} kib=${b#*:}
  VDEV_SIM_GPUS=1x1GiB VDEV_LOGICAL_DEVICES="0:${kib}KiB,${kib}KiB,${kib}KiB" \
    run demo --batch "$n" --epochs 2 --steps 5
  [ $rc -eq 0 ] && [ -z "$err" ] && ok || bad "batch $n at ${kib}KiB: exit $rc: $err"
  has "$out" "Memory per step: steady" && ok || bad "batch $n at ${kib}KiB: $out"
  VDEV_SIM_GPUS=1x1GiB VDEV_LOGICAL_DEVICES="0:$((kib * 1024 - 256)),${kib}KiB,${kib}KiB" \
    run demo --batch "$n" --epochs 2 --steps 5
  [ $rc -eq 1 ] && [[ $err == "vdev demo: /device:GPU:0 has "*" its model needs at batch $n; give a smaller --batch"* ]] &&
    ok || bad "batch $n below ${kib}KiB: exit $rc: $err"
done
# Under TensorFlow's rule GPU:0 holds the three models' work: three times it.
VDEV_SIM_GPUS=1x1GiB VDEV_LOGICAL_DEVICES="0:17304KiB,5768KiB,5768KiB" \
  run demo --tf-placement --batch 1000 --steps 5
[ $rc -eq 0 ] && [ -z "$err" ] && ok || bad "tf-placement at the boundary: exit $rc: $err"
VDEV_SIM_GPUS=1x1GiB run demo --split --batch 4096
one_error "split batch too large" 1 "vdev demo: /device:GPU:0 has 532.00 MiB, less than the 776.00 MiB its model needs at batch 4096; give a smaller --batch, or run on larger GPUs (VDEV_SIM_GPUS=1x8GiB)"
# --split's logical GPUs stop at 4 GiB and 2 GiB: past them a larger GPU
# does not help, only a smaller batch.
VDEV_SIM_GPUS=1x400GiB run demo --split --batch 30000 --steps 2
one_error "split batch past 4 GiB" 1 "vdev demo: /device:GPU:0 has 4.00 GiB, less than the 5.50 GiB its model needs at batch 30000; give a smaller --batch (--split's logical GPUs are 4 GiB and 2 GiB at most)"
VDEV_SIM_GPUS=1x5GiB run demo --split --batch 30000 --steps 2
one_error "split batch past 4 GiB, small card" 1 "vdev demo: /device:GPU:0 has 2.33 GiB, less than the 5.50 GiB its model needs at batch 30000; give a smaller --batch (--split's logical GPUs are 4 GiB and 2 GiB at most)"
# stdout and stderr into one file: the line printed before the error comes first
VDEV_SIM_GPUS=1x400GiB "$vdev" demo --split --batch 30000 >"$tmp/both" 2>&1
[ "$(cut -c1-8 "$tmp/both" | tr '\n' ' ')" = "Devices: vdev dem " ] && ok ||
  bad "stdout and stderr out of order: $(cat "$tmp/both")"
VDEV_SIM_GPUS=3x16GiB VDEV_MEMORY_GROWTH=maybe run demo
[ $rc -eq 1 ] && ok || bad "bad environment: exit $rc"
[[ $err == 'vdev demo: start-up: VDEV_MEMORY_GROWTH="maybe" '* ]] && ok || bad "bad environment: $err"

# one step per epoch: "step", not "steps"
VDEV_SIM_GPUS=3x1GiB run demo --epochs 1 --steps 1
grep -qxF "Training 3 chained MLPs (batch 64, 1 step per epoch):" <<<"$out" && ok ||
  bad "one step per epoch: $out"

# ---- options: the same everywhere ----
export VDEV_SIM_GPUS=3x2GiB
run demo --help
[ $rc -eq 0 ] && ok || bad "--help: exit $rc"
[ -z "$err" ] && ok || bad "--help wrote to stderr: $err"
for s in "usage: vdev demo [--tf-placement [--vdev-placement] | --split] [--epochs N]" \
         "  --tf-placement " "  --split " "  --epochs N " "  --steps N " "  --batch N " \
         "  --seed N " "  --log-placement " "  --report DIR " "VDEV_SIM_GPUS=3x16GiB"; do
  has "$out" "$s" && ok || bad "--help lacks '$s': $out"
done
run help demo
has "$out" "  --split " && ok || bad "help demo: $out"
# The default scenario copies each model's input to its GPU itself: under the
# strict policy it trains the same losses as under the copy policy.
run demo --epochs 1 --steps 2
copy_losses=$(grep "^epoch " <<<"$out" | sed 's/ (.*//')
VDEV_PLACEMENT=strict run demo --epochs 1 --steps 2
[ $rc -eq 0 ] && [ -n "$copy_losses" ] &&
  [ "$(grep "^epoch " <<<"$out" | sed 's/ (.*//')" = "$copy_losses" ] && ok ||
  bad "demo under VDEV_PLACEMENT=strict: exit $rc: $out $err (copy policy: $copy_losses)"
for sc in "" --tf-placement --split; do
  run demo $sc --epochs 2 --steps 3 --batch 32 --seed 5
  [ $rc -eq 0 ] && ok || bad "demo $sc --epochs 2 ...: exit $rc: $err"
  [ -z "$err" ] && ok || bad "demo $sc --epochs 2 ...: stderr: $err"
  grep -q "^epoch 2/2 \|^step   5 " <<<"$out" && ok || bad "demo $sc: two epochs not run: $out"
  run demo $sc --steps 2 --epochs 1 --log-placement
  grep -q "^Executing op MatMul in device /job:localhost/replica:0/task:0/device:GPU:0" <<<"$out$err" \
    && ok || bad "demo $sc --log-placement: no placement log"
done
# usage_error (tests/testlib.sh) checks a refusal against this usage line.
usage_marks=("usage: vdev demo")
for sc in "" --tf-placement --split; do
  usage_error "demo $sc --bogus" "vdev demo: unknown option '--bogus'" demo $sc --bogus
  usage_error "demo $sc --steps 0" "vdev demo: --steps takes a whole number from 1 to 1000000, not '0'" \
    demo $sc --steps 0
  usage_error "demo $sc --epochs 0" "vdev demo: --epochs takes a whole number from 1 to 1000000, not '0'" \
    demo $sc --epochs 0
  usage_error "demo $sc --batch 12x" "vdev demo: --batch takes a whole number from 1 to 1048576, not '12x'" \
    demo $sc --batch 12x
  usage_error "demo $sc --seed" "vdev demo: --seed needs a number" demo $sc --seed
  # a number as written: no blank or sign before it, as the environment's numbers take none
  usage_error "demo $sc --epochs ' 2'" "vdev demo: --epochs takes a whole number from 1 to 1000000, not ' 2'" \
    demo $sc --epochs " 2"
  usage_error "demo $sc --seed +1" "vdev demo: --seed takes a whole number from 0 to 1000000000, not '+1'" \
    demo $sc --seed +1
done
usage_error "--priority --steps ' 20'" "vdev demo: --steps takes a whole number from 10 to 100000, not ' 20'" \
  demo --priority --steps " 20"
usage_error "--report without a folder" "vdev demo: --report needs a directory" demo --report
usage_error "two scenarios" "vdev demo: --tf-placement and --split are two scenarios: choose one" \
  demo --tf-placement --split
usage_error "--vdev-placement alone" "vdev demo: --vdev-placement goes with --tf-placement" \
  demo --split --vdev-placement

# --report with a scenario on a small card: trace and pictures.
VDEV_SIM_GPUS=1x2GiB run demo --split --steps 4 --report "$tmp/report"
[ $rc -eq 0 ] && ok || bad "--report: exit $rc: $err"
for f in run.json memory.svg placement.svg; do
  [ -s "$tmp/report/$f" ] && ok || bad "--report: no $f"
done
# --report names its folder, not the VDEV_TRACE_FILE it would set.
: >"$tmp/afile"
VDEV_SIM_GPUS=1x2GiB run demo --split --steps 4 --report "$tmp/afile"
one_error "--report a file" 1 "vdev demo: --report: $tmp/afile is not a directory"
[ "$(lines "$err")" -eq 1 ] && [ -z "$out" ] && ok || bad "--report a file: $out $err"
has "$err" VDEV_TRACE_FILE && bad "--report a file: names VDEV_TRACE_FILE: $err" || ok
VDEV_SIM_GPUS=1x2GiB run demo --split --steps 4 --report "$tmp/afile/sub"
one_error "--report under a file" 1 "vdev demo: --report: cannot create directory $tmp/afile/sub: Not a directory"
# A picture that cannot be written is named and not left behind, empty.
if [ -w /dev/full ]; then
  mkdir "$tmp/full" && ln -s /dev/full "$tmp/full/memory.svg"
  VDEV_SIM_GPUS=1x2GiB run demo --split --steps 4 --report "$tmp/full"
  one_error "--report write error" 1 "vdev demo: --report: $tmp/full/memory.svg: write error: No space left on device"
  [ "$(lines "$err")" -eq 1 ] && ok || bad "--report write error: not one line: $err"
  [ ! -e "$tmp/full/memory.svg" ] && [ ! -L "$tmp/full/memory.svg" ] && ok ||
    bad "--report write error: memory.svg left behind"
  [ -s "$tmp/full/placement.svg" ] && ok || bad "--report write error: no placement.svg"
  has "$out" "Report: $tmp/full/placement.svg" && ok || bad "--report write error: $out"
  has "$out" "Report: $tmp/full/memory.svg" && bad "--report write error: memory.svg reported: $out" || ok

  # ---- standard output that cannot be written: one line, exit 1 ----
  VDEV_SIM_GPUS=3x1GiB "$vdev" demo --epochs 1 --steps 2 >/dev/full 2>"$tmp/err"; rc=$?; err=$(cat "$tmp/err")
  one_error "demo >/dev/full" 1 "vdev demo: write error on standard output: No space left on device"
  [ "$(lines "$err")" -eq 1 ] && ok || bad "demo >/dev/full: not one line: $err"
  VDEV_SIM_GPUS=1x3GiB "$vdev" demo --priority --steps 10 >/dev/full 2>"$tmp/err"; rc=$?; err=$(cat "$tmp/err")
  one_error "demo --priority >/dev/full" 1 "vdev demo: write error on standard output: No space left on device"
  for h in --help "help demo" "demo --help" --version; do
    "$vdev" $h >/dev/full 2>"$tmp/err"; rc=$?; err=$(cat "$tmp/err")
    who=vdev; [[ $h == *demo* ]] && who="vdev demo"
    one_error "vdev $h >/dev/full" 1 "$who: write error on standard output: No space left on device"
  done
fi
finish
