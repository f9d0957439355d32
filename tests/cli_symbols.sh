#!/usr/bin/env bash
# cli_symbols.sh — what the build's libraries export, read with nm: libvdev.so
# exports exactly the functions that the public headers declare with VDEV_API
# (all named vdev_*), every global name in libvdev.a is a vdev_* name (so a
# program linking it statically cannot clash with vdev's internals), and the
# CUDA plugin, when built, exports its entry point alone. Needs nm (exit 77
# without). Usage: cli_symbols.sh VDEV SHARED (VDEV: the build's vdev command,
# whose folder is the build folder).
set -u
build=$(cd "$(dirname "$1")" && pwd)
src=$(cd "$(dirname "$0")/.." && pwd)
. "${BASH_SOURCE%/*}/testlib.sh"
command -v nm >/dev/null 2>&1 || { echo "cli_symbols: skipped: nm not found"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The shared library: its dynamic symbols against the headers' declarations.
lib=$build/libvdev.so
[ -f "$lib" ] && ok || { bad "no $lib"; finish; exit 1; }
nm -D --defined-only "$lib" | awk '{print $NF}' | sed 's/@.*//' | sort -u >"$tmp/exported"
[ -s "$tmp/exported" ] && ok || bad "nm -D found no symbol in $lib"
others=$(grep -v '^vdev_' "$tmp/exported")
[ -z "$others" ] && ok || bad "libvdev.so exports names outside vdev_*: $(echo $others)"
# Each VDEV_API declaration names its function just before the first '('.
cat "$src"/include/vdev.h $(ls "$src"/include/vdev/*.h 2>/dev/null) |
  grep '^VDEV_API ' | sed 's/(.*//' | awk '{print $NF}' | tr -d '*' | sort -u >"$tmp/declared"
extra=$(comm -23 "$tmp/exported" "$tmp/declared")
[ -z "$extra" ] && ok || bad "libvdev.so exports names no public header declares: $(echo $extra)"
missing=$(comm -13 "$tmp/exported" "$tmp/declared")
[ -z "$missing" ] && ok || bad "declared VDEV_API but not exported by libvdev.so: $(echo $missing)"

# The static library: every global it defines is a vdev_* name (AddressSanitizer
# adds an __odr_asan.NAME beside each global NAME).
archive=$build/libvdev.a
if [ -f "$archive" ]; then
  ok
  others=$(nm -g --defined-only "$archive" 2>/dev/null | awk 'NF == 3 {print $3}' |
    sed 's/^__odr_asan[.]//' | grep -v '^vdev_' | sort -u)
  [ -z "$others" ] && ok || bad "libvdev.a defines global names outside vdev_*: $(echo $others)"
else
  bad "no $archive"
fi

# The CUDA plugin, when built: its entry point alone.
plugin=$build/libvdev-cuda.so
if [ -f "$plugin" ]; then
  exports=$(nm -D --defined-only "$plugin" | awk '{print $NF}' | sed 's/@.*//')
  [ "$exports" = "vdev_cuda_plugin_open" ] && ok || bad "libvdev-cuda.so exports: $(echo $exports)"
fi

finish
