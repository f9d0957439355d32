#!/usr/bin/env bash
# runpath_check.sh BUILD — no RUNPATH or RPATH of a binary the build made, in
# the build tree or installed (`cmake --install` to a scratch prefix), has an
# empty entry, "." or any other relative folder: the loader reads those
# against the current folder, so every dlopen of the process (libcuda.so.1,
# cuBLAS, NCCL, the plugins) would first search wherever the user stands.
# Entries must be absolute or start with $ORIGIN (the binary's own folder).
# (CMake pads the build-tree RUNPATH of an installed target with a trailing
# ':' unless it is linked with its install RUNPATH: see the root
# CMakeLists.txt.) And no RUNPATH entry of the installed library, command or
# MPI plugin is a folder holding a library the binary needs that the loader
# finds by itself (ldconfig's cache): Debian's OpenBLAS is linked from
# .../openblas-pthread, but libopenblas.so.0 is found in the system folder,
# where the BLAS alternatives point it; the entry would bypass that choice
# (cmake/install.cmake).
set -euo pipefail
build=$(cd "$1" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0 checked=0

# every ELF file with a dynamic section under $1, skipping CMake's own probes
check_tree() {
  local f rp e
  while IFS= read -r -d '' f; do
    [ "$(head -c 4 "$f" | od -An -tx1 | tr -d ' \n')" = 7f454c46 ] || continue
    checked=$((checked + 1))
    rp=$(readelf -d "$f" 2>/dev/null | sed -n 's/.*(R\(UN\)\{0,1\}PATH).*\[\(.*\)\]$/\2/p')
    while IFS= read -r line; do
      [ -n "$line" ] || continue
      IFS=: read -r -a entries <<<"$line:end"
      for e in "${entries[@]:0:${#entries[@]}-1}"; do
        case "$e" in
          /* | '$ORIGIN' | '$ORIGIN/'* | '${ORIGIN}' | '${ORIGIN}/'*) ;;
          *) echo "FAIL: $f: RUNPATH [$line] has the entry '$e' (the current folder)"
             fail=1 ;;
        esac
      done
    done <<<"$rp"
  done < <(find "$2" -path '*/CMakeFiles' -prune -o -type f \( -name '*.so*' -o -perm -u+x \) \
             -print0)
  echo "$1: $checked ELF files checked"
}

check_tree "build tree" "$build"
n_build=$checked
cmake --install "$build" --prefix "$tmp/p" >"$tmp/install.log" 2>&1 ||
  { cat "$tmp/install.log"; echo "FAIL: cmake --install"; exit 1; }
checked=0
check_tree "installed tree" "$tmp/p"
ldconfig=$(command -v ldconfig || echo /sbin/ldconfig)
cache=$("$ldconfig" -p 2>/dev/null || true)
n_rule=0
while IFS= read -r -d '' f; do
  n_rule=$((n_rule + 1))
  rp=$(readelf -d "$f" | sed -n 's/.*(R\(UN\)\{0,1\}PATH).*\[\(.*\)\]$/\2/p')
  needed=$(readelf -d "$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]$/\1/p')
  IFS=: read -r -a entries <<<"$rp"
  for e in "${entries[@]}"; do
    case "$e" in /*) ;; *) continue ;; esac
    for lib in $needed; do
      [ -e "$e/$lib" ] || continue
      sys=$(awk -v n="$lib" '$1 == n {print $NF; exit}' <<<"$cache")
      if [ -n "$sys" ] && [ "$(realpath "$(dirname "$sys")")" != "$(realpath "$e")" ]; then
        echo "FAIL: ${f#"$tmp/p/"}: RUNPATH [$rp] has $e, which holds $lib; the loader" \
          "finds it by itself ($sys), and the entry bypasses that choice"
        fail=1
      fi
    done
  done
done < <(find "$tmp/p" -type f \( -name 'libvdev.so.*' -o -name 'libvdev-mpi.so' \
           -o -path '*/bin/vdev' \) -print0)
echo "installed tree: $n_rule RUNPATHs checked for folders the loader searches by itself"
if [ "$n_build" -eq 0 ] || [ "$checked" -eq 0 ] || [ "$n_rule" -lt 2 ]; then
  echo "FAIL: no binary found to check"
  fail=1
fi
exit $fail
