#!/usr/bin/env bash
# cli_demo_examples.sh — the example programs beside the vdev command
# (examples/example_*), each as a program of its own: its --help names it and
# lists only what it takes (every option printed is accepted; `vdev demo`'s
# --report DIR and scenario switches are neither printed nor accepted) with
# its own defaults, example_mirrored's being the ones it runs with
# (example_priority's usage is its own: --steps N); its usage
# errors show its own usage; with no GPU and every GPU hidden, each names the
# simulated GPUs it would have made. `vdev demo --help` lists --log-placement and
# --report DIR for --mirrored too, and a usage error of a scenario shows the
# usage of every scenario.
# Usage: cli_demo_examples.sh VDEV DATA
set -u
vdev=$1
ex=$(dirname "$vdev")/examples
. "${BASH_SOURCE%/*}/testlib.sh"
for v in $(compgen -e); do
  case $v in VDEV_*|TF_*) unset "$v" ;; esac
done
export VDEV_SIM_GPUS=2x1GiB
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# run PROGRAM ARGS...: sets rc, out (stdout) and err (stderr).
run() {
  "$@" >"$tmp/out" 2>"$tmp/err"; rc=$?
  out=$(cat "$tmp/out"); err=$(cat "$tmp/err")
}

# name:epochs:steps:batch:simulated GPUs
for spec in chain3:5:100:64:3x16GiB tf_placement:1:50:64:3x16GiB split:1:60:256:1x8GiB \
            mirrored:1:200:1024:4x16GiB; do
  IFS=: read -r name epochs steps batch sim <<<"$spec"
  p=example_$name
  [ -x "$ex/$p" ] || { bad "no $ex/$p"; continue; }
  run "$ex/$p" --help
  [ $rc -eq 0 ] && [ -z "$err" ] && ok || bad "$p --help: exit $rc: $err"
  [[ $(head -1 <<<"$out") == "usage: $p ["* ]] && ok || bad "$p --help: first line: $out"
  for s in "--epochs N        epochs (default $epochs)" \
           "--steps N         training steps per epoch (default $steps)" \
           "--batch N         examples per step (default $batch)" \
           "--seed N          seed of the data and the weights (default 1)" \
           "--log-placement   print the device of every op" "(VDEV_SIM_GPUS=$sim)"; do
    has "$out" "$s" && ok || bad "$p --help lacks '$s': $out"
  done
  has "$out" "usage: vdev demo" && bad "$p --help is vdev demo's: $out" || ok
  # Every option it prints, it takes (an option before --help is parsed
  # first: one it refused would be a usage error, exit 2).
  opts=$(grep -o -- '--[a-z][a-z-]*' <<<"$out" | sort -u)
  for o in $opts; do
    case $o in --report|--split|--tf-placement|--mirrored|--priority)
      bad "$p --help prints $o, which only vdev demo takes"; continue ;;
    esac
    arg=(); grep -qF -- "[$o N]" <<<"$out" && arg=(1)
    run "$ex/$p" "$o" "${arg[@]}" --help
    [ $rc -eq 0 ] && ok || bad "$p --help prints $o, which $p refuses: exit $rc: $err"
  done
  has "$opts" "--vdev-placement" && [ "$name" != tf_placement ] &&
    bad "$p --help prints --vdev-placement" || ok
  # What it refuses: its own usage, after one line naming it.
  for o in --report --split --tf-placement --mirrored --priority; do
    run "$ex/$p" "$o" /tmp
    [ $rc -eq 2 ] && [ -z "$out" ] && ok || bad "$p $o: exit $rc: $out"
    [ "$(head -1 <<<"$err")" = "$p: unknown option '$o'" ] && ok || bad "$p $o: $err"
    has "$err" "usage: $p [" && ok || bad "$p $o: not its usage: $err"
  done
  if [ "$name" != tf_placement ]; then
    run "$ex/$p" --vdev-placement
    [ $rc -eq 2 ] && [ "$(head -1 <<<"$err")" = "$p: unknown option '--vdev-placement'" ] &&
      ok || bad "$p --vdev-placement: exit $rc: $err"
  fi
  # No GPU and every GPU hidden: it names the simulated GPUs it would have made.
  n=${sim%%x*}
  want="$p: no GPU is visible (VDEV_VISIBLE_DEVICES=\"\" hides the $n simulated GPU$([ "$n" = 1 ] ||
    echo s) the demo would make); the demo needs at least one GPU, real or simulated"
  run env -u VDEV_SIM_GPUS VDEV_CUDA_PLUGIN=/nonexistent/libvdev-cuda.so VDEV_VISIBLE_DEVICES= \
    "$ex/$p" --steps 1
  [ $rc -eq 1 ] && [ "$err" = "$want" ] && [ -z "$out" ] && ok ||
    bad "$p, every GPU hidden: exit $rc: '$err', expected '$want'"
done

# example_priority has a usage of its own (examples/priority.c): --steps N.
run "$ex/example_priority" --help
[ $rc -eq 0 ] && [ "$(head -1 <<<"$out")" = "usage: example_priority [--steps N]" ] && ok ||
  bad "example_priority --help: exit $rc: $out"
has "$out" "--report" && bad "example_priority --help prints --report: $out" || ok
run "$ex/example_priority" --steps 10 --help
[ $rc -eq 0 ] && ok || bad "example_priority --steps 10 --help: exit $rc: $err"
# The other scenarios' options: refused in the program's own words (not
# `vdev demo --priority`'s, which also takes --report).
run "$ex/example_priority" --epochs 1
want="example_priority: this example takes --steps N only, not --epochs"
[ $rc -eq 2 ] && [ "$(head -1 <<<"$err")" = "$want" ] && ok ||
  bad "example_priority --epochs: exit $rc: $err"
run "$ex/example_priority" --report /tmp
[ $rc -eq 2 ] && [ "$(head -1 <<<"$err")" = "example_priority: unknown option '--report'" ] &&
  ok || bad "example_priority --report: exit $rc: $err"

# example_mirrored runs with the defaults it prints: a global batch of 1024
# in one epoch, of 200 steps.
run "$ex/example_mirrored" --steps 2
[ $rc -eq 0 ] && ok || bad "example_mirrored --steps 2: exit $rc: $err"
has "$out" "global batch 1024 (512 per replica), 2 steps" && ok || bad "example_mirrored: $out"
run "$ex/example_mirrored" --batch 2
[ $rc -eq 0 ] && ok || bad "example_mirrored --batch 2: exit $rc: $err"
has "$out" "global batch 2 (1 per replica), 200 steps" && ok || bad "example_mirrored: $out"

# vdev demo --help: --mirrored with every option it takes.
run "$vdev" demo --help
[ $rc -eq 0 ] && ok || bad "vdev demo --help: exit $rc"
mirrored=$(grep -A1 "^  vdev demo --mirrored " <<<"$out")
for s in "[--epochs N] [--steps N] [--batch N] [--seed N]" "[--log-placement] [--report DIR]"; do
  has "$mirrored" "$s" && ok || bad "vdev demo --help: --mirrored lacks '$s': $mirrored"
done
has "$out" "(VDEV_SIM_GPUS=3x16GiB; 1x8GiB" && ok || bad "vdev demo --help: simulated GPUs: $out"
# Both work with --mirrored.
run "$vdev" demo --mirrored --steps 2 --batch 8 --log-placement --report "$tmp/report"
[ $rc -eq 0 ] && ok || bad "demo --mirrored --log-placement --report: exit $rc: $err"
has "$out$err" "Executing op MatMul in device" && ok || bad "--mirrored --log-placement: no log"
has "$out" "Report: $tmp/report/memory.svg" && [ -s "$tmp/report/memory.svg" ] && ok ||
  bad "--mirrored --report: $out"
# A usage error under vdev demo shows the usage of every scenario.
for sc in "" --tf-placement --split --mirrored; do
  run "$vdev" demo $sc --bogus
  [ $rc -eq 2 ] && [ "$(head -1 <<<"$err")" = "vdev demo: unknown option '--bogus'" ] && ok ||
    bad "demo $sc --bogus: exit $rc: $err"
  for s in "usage: vdev demo [" "  vdev demo --priority " "  vdev demo --mirrored "; do
    has "$err" "$s" && ok || bad "demo $sc --bogus: usage lacks '$s': $err"
  done
done
run "$vdev" demo --mirrored --vdev-placement
[ $rc -eq 2 ] && [ "$(head -1 <<<"$err")" = "vdev demo: --vdev-placement goes with --tf-placement" ] &&
  ok || bad "demo --mirrored --vdev-placement: exit $rc: $err"
finish
