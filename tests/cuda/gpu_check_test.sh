#!/usr/bin/env bash
# gpu_check_test.sh SOURCE_DIR BUILD_DIR — scripts/gpu-check on a machine
# without a GPU, with a stand-in nvidia-smi that reports one: every step that
# needs the GPU must fail, each with its reason, and the verdict must be FAIL
# (the check once passed with test_cuda skipped and the demo on simulated
# GPUs). Then a driver older than the toolkit needs must stop it at once.
set -euo pipefail
src=$1 build=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/bin"
cat >"$tmp/bin/nvidia-smi" <<'SMI'
#!/bin/sh
drv=${FAKE_DRIVER:-580.159.03}
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
  "$src/scripts/gpu-check" --no-build --no-traces >"$tmp/console" 2>&1 || rc=$?
cat "$tmp/out/results.txt"
[ $rc -eq 1 ] && echo "ok: exit 1" || { echo "FAIL: exit $rc, expected 1"; fail=1; }
r=$tmp/out/results.txt
expect "$r" '^ok   preflight: NVIDIA H200, driver 580.159.03, CUDA 1[0-9]\.[0-9]+$'
expect "$r" '^FAIL tests: a GPU test was skipped or not run: SKIP: no GPU: CUDA plugin: '
expect "$r" '^FAIL devices: no GPU from the cuda backend: GPUs: none '
expect "$r" '^FAIL demo: the models did not run on the cuda backend \(0 of 3 did\)$'
expect "$r" '^FAIL mirrored: '
expect "$r" '^FAIL bench: '
expect "$r" '^gpu-check: FAIL: tests, devices, demo, mirrored, bench \([0-9]+ s\)$'
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
exit $fail
