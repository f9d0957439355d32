#!/usr/bin/env bash
# gpu_check_test.sh SOURCE_DIR BUILD_DIR — scripts/gpu-check on a machine
# without a GPU, with a stand-in nvidia-smi that reports one: every step that
# needs the GPU must fail, each with its reason, and the verdict must be FAIL
# (the check once passed with test_cuda skipped and the demo on simulated
# GPUs). Then a driver older than the toolkit needs must stop it at once.
# Last, the verdict itself on made-up results: a step that did not run makes
# it INCOMPLETE (exit 3), never PASS (it once read "PASS; NOT RUN: torch"),
# unless the caller's flag left it out, which the verdict names.
set -euo pipefail
src=$1 build=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/bin"
cat >"$tmp/bin/nvidia-smi" <<'SMI'
#!/bin/sh
drv=${FAKE_DRIVER:-580.159.04}
case "$*" in
  *--query-gpu*) echo "0, NVIDIA H200, $drv, 143771 MiB, 0 MiB" ;;
  *) echo "| NVIDIA-SMI $drv    Driver Version: $drv    CUDA Version: 13.0 |" ;;
esac
SMI
chmod +x "$tmp/bin/nvidia-smi"
fail=0
expect() { # FILE PATTERN: a line of FILE matches the extended regex
  if grep -Eq "$2" "$1"; then echo "ok: $2"; else echo "FAIL: no line matching: $2"; fail=1; fi
}

rc=0
OUT=$tmp/out GPU_CHECK_BUILD=$build GPU_CHECK_DEVICE_NODE=/dev/null PATH="$tmp/bin:$PATH" \
  "$src/scripts/gpu-check" --no-build --no-traces --no-torch >"$tmp/console" 2>&1 || rc=$?
cat "$tmp/out/results.txt"
[ $rc -eq 1 ] && echo "ok: exit 1" || { echo "FAIL: exit $rc, expected 1"; fail=1; }
r=$tmp/out/results.txt
expect "$r" '^ok   preflight: NVIDIA H200, driver 580.159.04, CUDA 1[0-9]\.[0-9]+$'
expect "$r" '^FAIL tests: a GPU test was skipped or not run: SKIP: no GPU: CUDA plugin: '
expect "$r" '^FAIL devices: no GPU from the cuda backend: GPUs: none '
expect "$r" '^FAIL demo: the models did not run on the cuda backend \(0 of 3 did\)$'
expect "$r" '^FAIL mirrored: '
expect "$r" '^FAIL bench: '
expect "$r" '^NOT RUN torch: left out \(--no-torch\)$'
expect "$r" '^gpu-check: FAIL: tests, devices, demo, mirrored, bench \([0-9]+ s\); NOT RUN: torch$'
[ "$(tail -1 "$r")" = "$(tail -1 "$tmp/console")" ] && echo "ok: the verdict is the last line" ||
  { echo "FAIL: the verdict is not the last line printed"; fail=1; }
for f in gpu-check.log ctest.log nvidia-smi.txt; do
  [ -s "$tmp/out/$f" ] && echo "ok: $f written" || { echo "FAIL: no $f"; fail=1; }
done
expect "$tmp/out/ctest.log" 'Test +#[0-9]+: test_cuda \.+\*\*\*Skipped'

rc=0
FAKE_DRIVER=550.54.15 OUT=$tmp/out2 GPU_CHECK_BUILD=$build GPU_CHECK_DEVICE_NODE=/dev/null \
  PATH="$tmp/bin:$PATH" "$src/scripts/gpu-check" --no-build --no-traces >/dev/null 2>&1 || rc=$?
r=$tmp/out2/results.txt
cat "$r"
[ $rc -eq 1 ] && echo "ok: exit 1" || { echo "FAIL: exit $rc, expected 1"; fail=1; }
expect "$r" '^FAIL preflight: driver 550\.54\.15 is older than CUDA 1[0-9]\.[0-9]+ needs \(580 or newer\): the plugin would refuse it$'
expect "$r" '^gpu-check: FAIL: preflight \([0-9]+ s\)$'
[ ! -e "$tmp/out2/ctest.log" ] && echo "ok: nothing run after the preflight" || { echo "FAIL: steps ran after the preflight failed"; fail=1; }

# ---- the verdict on made-up results (gpu-check's own verdict function) ----
verdict_of() { # FAILED NOT_RUN EXCLUDED(step=flag ...): prints the line, then "exit N"
  (
    RES=$tmp/verdict.txt SECONDS=0 gpu_name="NVIDIA H200" driver=580.159.04 passed=7
    res() { echo "$*"; }
    eval "$(sed -n '/^verdict() {/,/^}/p' "$src/scripts/gpu-check")"
    read -r -a failed <<<"$1"
    read -r -a not_run <<<"$2"
    declare -A excluded_by=()
    for e in $3; do excluded_by[${e%%=*}]=${e#*=}; done
    set +e
    (verdict)
    echo "exit $?"
  )
}
check_verdict() { # FAILED NOT_RUN EXCLUDED WANT_LINE WANT_EXIT
  local got want
  # the elapsed seconds are the clock's, never checked: "(N s)" on both sides
  got=$(verdict_of "$1" "$2" "$3" | sed -E 's/\([0-9]+ s\)/(N s)/')
  want=$(printf '%s\nexit %s' "$4" "$5" | sed -E 's/\([0-9]+ s\)/(N s)/')
  if [ "$got" = "$want" ]; then echo "ok: $4"; else
    echo "FAIL: verdict for failed='$1' not_run='$2' excluded='$3':"; echo "$got"
    echo "expected:"; echo "$want"; fail=1
  fi
}
check_verdict "" "" "" "gpu-check: PASS: 7 steps on NVIDIA H200, driver 580.159.04 (0 s)" 0
check_verdict "" "torch" "" \
  "gpu-check: INCOMPLETE: 7 steps passed on NVIDIA H200, driver 580.159.04 (0 s); NOT RUN: torch" 3
check_verdict "" "torch" "torch=--no-torch" \
  "gpu-check: PASS (torch excluded by --no-torch): 7 steps on NVIDIA H200, driver 580.159.04 (0 s); NOT RUN: torch" 0
check_verdict "" "bench-alloc torch" "bench-alloc=--no-traces" \
  "gpu-check: INCOMPLETE: 7 steps passed on NVIDIA H200, driver 580.159.04 (0 s); NOT RUN: bench-alloc, torch" 3
check_verdict "" "bench-alloc torch" "bench-alloc=--no-traces torch=--no-torch" \
  "gpu-check: PASS (bench-alloc excluded by --no-traces, torch excluded by --no-torch): 7 steps on NVIDIA H200, driver 580.159.04 (0 s); NOT RUN: bench-alloc, torch" 0
check_verdict "demo bench" "torch" "torch=--no-torch" \
  "gpu-check: FAIL: demo, bench (0 s); NOT RUN: torch" 1
# bench_cuda's allocation part skipped (no traces) is recorded as not run
grep -q "grep -q '^| alloc | skipped' \"\$OUT/bench.md\"" "$src/scripts/gpu-check" &&
  echo "ok: gpu-check looks for bench_cuda's skipped allocation part" ||
  { echo "FAIL: gpu-check does not look for bench_cuda's skipped allocation part"; fail=1; }
grep -q 'row("| alloc | skipped: no traces' "$src/bench/bench_cuda.cu" &&
  echo "ok: bench_cuda writes the row gpu-check looks for" ||
  { echo "FAIL: bench_cuda no longer writes '| alloc | skipped'"; fail=1; }
exit $fail
