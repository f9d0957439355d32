#!/usr/bin/env bash
# elf_check.sh PLUGIN BENCH TOOLKIT_LIB_DIR — how the CUDA plugin and the GPU
# benchmark are linked, checked on their ELF headers (no GPU needed):
#  - the plugin needs neither libcuda (dlopened, so the plugin loads without
#    a driver) nor libcublas/libcublasLt (dlopened on the first product, so a
#    process that never multiplies does not map half a gigabyte), and its
#    RUNPATH names the toolkit's library folder (where cuBLAS is looked for);
#  - bench_cuda (when built: not in sanitizer builds) has that folder in its
#    RUNPATH (it links cuBLAS directly, as its baseline) and the plugin's
#    folder (its core finds the plugin there), and starts without help from
#    LD_LIBRARY_PATH.
set -euo pipefail
plugin=$1 bench=$2 libdir=$3
fail=0
say() { echo "$*"; }
bad() { echo "FAIL: $*"; fail=1; }

dyn=$(readelf -d "$plugin")
for lib in libcuda.so libcublas.so libcublasLt.so; do
  if grep -q "NEEDED.*\[$lib" <<<"$dyn"; then bad "$plugin needs $lib at load time"; else say "ok: the plugin does not need $lib"; fi
done
if grep -Eq "R(UN)?PATH.*$libdir" <<<"$dyn"; then say "ok: the plugin's RUNPATH has $libdir"; else bad "the plugin's RUNPATH lacks $libdir"; fi

if [ -e "$bench" ]; then
  if readelf -d "$bench" | grep -Eq "R(UN)?PATH.*$libdir"; then say "ok: bench_cuda's RUNPATH has $libdir"; else bad "bench_cuda's RUNPATH lacks $libdir"; fi
  # the core in it finds the plugin through that RUNPATH (else it reports
  # "no CUDA GPU: libvdev-cuda.so not built or not found" on a GPU machine)
  pdir=$(cd "$(dirname "$plugin")" && pwd)
  rp=$(readelf -d "$bench" | sed -n 's/.*R[UNPATH]*).*\[\(.*\)\]$/\1/p' | tr ':' '\n')
  if grep -qxF "$pdir" <<<"$rp"; then say "ok: bench_cuda's RUNPATH has the plugin's folder"; else bad "bench_cuda's RUNPATH lacks the plugin's folder $pdir"; fi
  rc=0
  env -u LD_LIBRARY_PATH "$bench" --no-such-option >/dev/null 2>&1 || rc=$?
  if [ $rc -eq 2 ]; then say "ok: bench_cuda starts (usage, exit 2)"; else bad "bench_cuda did not start: exit $rc"; fi
else
  say "note: $bench not built (sanitizer build)"
fi
exit $fail
