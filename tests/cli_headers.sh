#!/usr/bin/env bash
# cli_headers.sh — the public headers hold together: include/vdev.h only
# includes the parts under include/vdev/ (it declares nothing itself) and
# names every one of them; each part opens with a comment naming it, has an
# include guard of its own (VDEV_VDEV_<PART>_H) that no other header of the
# project uses, and compiles alone (C11, -Wpedantic -Werror, plus this build's
# flags), included twice and before vdev.h; with a C++ compiler, each part
# compiles alone as C++ too and declares its functions with C linkage (an
# object that takes a part's first function refers to it unmangled). Exit 77
# without a C compiler.
# Usage: cli_headers.sh VDEV DATA [CC LIBVDEV "CFLAGS"]
set -u
cc=${3:-cc}
cflags=${5:-}
src=$(cd "$(dirname "$0")/.." && pwd)
. "${BASH_SOURCE%/*}/testlib.sh"
command -v "$cc" >/dev/null 2>&1 || { echo "cli_headers: skipped: no C compiler '$cc'"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
inc=$src/include
strict="-std=c11 -Wall -Wextra -Wpedantic -Werror"

parts=$(cd "$inc/vdev" && ls -- *.h)
[ -n "$parts" ] && ok || { bad "no part under include/vdev/"; finish; exit 1; }

# ---- vdev.h: includes, and nothing else, of every part ----
# Its code once comments are gone: the guard, then the includes.
code=$(sed 's|/\*.*\*/||' "$inc/vdev.h" | sed '/\/\*/,/\*\//d' | grep -v '^[[:space:]]*$')
others=$(grep -v '^#ifndef VDEV_H$\|^#define VDEV_H$\|^#include "vdev/[a-z_]*\.h"$\|^#endif' \
  <<<"$code")
[ -z "$others" ] && ok || bad "vdev.h holds more than the parts' includes: $others"
for p in $parts; do
  grep -qx "#include \"vdev/$p\"" <<<"$code" && ok || bad "vdev.h does not include vdev/$p"
done
for p in $(sed -n 's|^#include "vdev/\([a-z_]*\.h\)"$|\1|p' <<<"$code"); do
  [ -f "$inc/vdev/$p" ] && ok || bad "vdev.h includes vdev/$p, which does not exist"
done

# ---- each part: its comment, its guard ----
# The guards of every other header of the project, which a part's must not reuse.
find "$src" -path "$inc" -prune -o -path "$src/build*" -prune -o -name '*.h' -print |
  xargs sed -n 's/^#ifndef \([A-Z0-9_]*\)$/\1/p' | sort >"$tmp/guards"
for p in $parts; do
  f=$inc/vdev/$p
  head -1 "$f" | grep -q "^/\* vdev/$p — " && ok ||
    bad "vdev/$p does not open with '/* vdev/$p — '"
  guard=$(grep -m 1 '^#ifndef ' "$f" | awk '{print $2}')
  [ -n "$guard" ] && grep -qx "#define $guard" "$f" &&
    [ "$(tail -1 "$f")" = "#endif /* $guard */" ] && ok ||
    bad "vdev/$p: no include guard around the whole file ('$guard')"
  want=VDEV_VDEV_$(basename "$p" .h | tr a-z A-Z)_H
  [ "$guard" = "$want" ] && ok || bad "vdev/$p: guard $guard, not $want"
  # the guard comes right after the opening comment: nothing outside it
  sed -n '/\*\//{n;p;q}' "$f" | grep -qx "#ifndef $guard" && ok ||
    bad "vdev/$p: the guard does not follow the opening comment"
  grep -qx "$guard" "$tmp/guards" && bad "vdev/$p: guard $guard is also a private header's" || ok
  echo "$guard" >>"$tmp/part_guards"
done
dups=$(sort "$tmp/part_guards" | uniq -d)
[ -z "$dups" ] && ok || bad "parts share a guard: $dups"

# ---- each part compiles alone, twice, and before vdev.h ----
for p in $parts; do
  printf '#include "vdev/%s"\n' "$p" >"$tmp/alone.c"
  printf '#include "vdev/%s"\n#include "vdev/%s"\n#include "vdev.h"\n' "$p" "$p" >"$tmp/twice.c"
  for t in alone twice; do
    # shellcheck disable=SC2086
    "$cc" $strict $cflags -I"$inc" -fsyntax-only "$tmp/$t.c" >"$tmp/cc.log" 2>&1 && ok ||
      bad "vdev/$p ($t): $(cat "$tmp/cc.log")"
  done
done
printf '#include <vdev.h>\n#include "vdev.h"\n' >"$tmp/umbrella.c"
# shellcheck disable=SC2086
"$cc" $strict $cflags -I"$inc" -fsyntax-only "$tmp/umbrella.c" >"$tmp/cc.log" 2>&1 && ok ||
  bad "vdev.h: $(cat "$tmp/cc.log")"

# ---- C++: each part alone, its functions with C linkage ----
cxx=$(command -v c++ || command -v g++ || command -v clang++) || cxx=""
if [ -n "$cxx" ] && command -v nm >/dev/null 2>&1; then
  for p in $parts; do
    fn=$(grep -m 1 '^VDEV_API ' "$inc/vdev/$p" | sed 's/(.*//' | awk '{print $NF}' | tr -d '*')
    [ -n "$fn" ] || continue
    printf '#include "vdev/%s"\nvoid *vdev_ref(void);\n%s\n' "$p" \
      "void *vdev_ref(void) { return (void *)&$fn; }" >"$tmp/cxx.cpp"
    "$cxx" -Wall -Wextra -Werror -I"$inc" -c -o "$tmp/cxx.o" "$tmp/cxx.cpp" >"$tmp/cc.log" 2>&1 ||
      { bad "vdev/$p as C++: $(cat "$tmp/cc.log")"; continue; }
    nm -u "$tmp/cxx.o" | awk '{print $NF}' | grep -qx "$fn" && ok ||
      bad "vdev/$p as C++: $fn has no C linkage: $(nm -u "$tmp/cxx.o" | tr '\n' ' ')"
  done
fi

finish
