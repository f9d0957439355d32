#!/usr/bin/env bash
# driver_load_test.sh BUILD — a libcuda.so.1 that is found but does not load
# (here a text file first on LD_LIBRARY_PATH; on a machine, a driver half
# installed or of the wrong architecture) is reported in the loader's words,
# not as "not found": `vdev devices` shows the plugin's one-line reason.
set -euo pipefail
build=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf 'not a shared library, only text long enough to be read as an ELF header\n' \
  >"$tmp/libcuda.so.1"
out=$(env -u VDEV_SIM_GPUS LD_LIBRARY_PATH="$tmp" "$build/vdev" devices 2>&1 || true)
want="GPUs: none (CUDA plugin: libcuda.so.1 cannot be loaded: $tmp/libcuda.so.1: invalid ELF"
want+=" header); ops run on the CPU."
if grep -qxF "$want" <<<"$out"; then
  echo "ok: $want"
else
  echo "FAIL: vdev devices with a broken libcuda.so.1 printed:"
  echo "$out"
  echo "expected the line: $want"
  exit 1
fi
