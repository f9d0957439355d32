#!/usr/bin/env bash
# cli_readme.sh — every C example of the README builds and runs as the README
# says, and prints what the README shows.
#
# Each ```c block of README.md is a complete program. After it (before the
# next ```c block) come a ```sh block whose first line builds and runs it,
# naming its file (example.c) and the simulated GPUs it runs on
# (VDEV_SIM_GPUS=...), and a ```text block with exactly what it prints. The
# command is run as written in a folder where include/ and build/ are this
# build's (cc adds this build's warnings and sanitizers, so the examples also
# compile cleanly under -Werror). Then the same command without VDEV_SIM_GPUS,
# on a machine with no GPU, must fail with exit 1 and a message that says how
# to simulate one, rather than print nothing and exit 0.
# Also: the `vdev fit` example prints what the README shows, every command of
# `vdev --help` has a row in the README's table of commands, and every variable
# of `vdev --help` (src/config/envvars.c's table) a row in its table of
# environment variables (tests/cli_devices.sh checks the other way round).
# Usage: cli_readme.sh VDEV DATA [CC LIBVDEV "CFLAGS"]
set -u
vdev=$1
cc_real=${3:-cc}
lib=${4:-$(dirname "$vdev")/libvdev.so}
cflags=${5:-}
src=$(cd "$(dirname "$0")/.." && pwd)
. "${BASH_SOURCE%/*}/testlib.sh"
[ -f "$lib" ] || { echo "FAIL: no shared library at '$lib'"; exit 1; }
for v in $(compgen -e); do
  case $v in VDEV_*|TF_*) unset "$v" ;; esac
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The blocks: $tmp/K/code.c, $tmp/K/cmd, $tmp/K/expected for the K-th C example.
awk -v tmp="$tmp" '
  /^```c$/ { k++; mode = "c"; system("mkdir -p " tmp "/" k); next }
  /^```sh$/ && k && !sh[k] { mode = "sh"; next }
  /^```text$/ && k && !text[k] { mode = "text"; next }
  /^```/ { if (mode == "sh") sh[k] = 1; if (mode == "text") text[k] = 1; mode = ""; next }
  mode == "c" { print > (tmp "/" k "/code.c") }
  mode == "sh" && !sh[k] { print > (tmp "/" k "/cmd"); sh[k] = 1; mode = "sh-rest" }
  mode == "text" { print > (tmp "/" k "/expected") }
' "$src/README.md"
n=$(find "$tmp" -name code.c | wc -l)
[ "$n" -ge 1 ] && ok || bad "README.md has no C example"

# cc: the build's compiler (an absolute path, not this wrapper) with its flags.
cc_path=$(command -v "$cc_real") || { echo "FAIL: no C compiler '$cc_real'"; exit 1; }
mkdir "$tmp/bin"
printf '#!/bin/sh\nexec "%s" %s "$@"\n' "$cc_path" "$cflags" >"$tmp/bin/cc"
chmod +x "$tmp/bin/cc"

for k in $(seq 1 "$n"); do
  d=$tmp/$k
  what="README C example $k"
  if [ ! -f "$d/cmd" ] || [ ! -f "$d/expected" ]; then
    bad "$what: no \`\`\`sh command or no \`\`\`text output after it"
    continue
  fi
  cmd=$(cat "$d/cmd")
  file=$(grep -o '[A-Za-z0-9_]*\.c' <<<"$cmd" | head -1)
  [ -n "$file" ] && ok || { bad "$what: the command names no .c file: $cmd"; continue; }
  grep -q 'VDEV_SIM_GPUS=[^ ]' <<<"$cmd" && ok ||
    bad "$what: the command does not say how to run it on simulated GPUs: $cmd"
  mkdir "$d/run"
  ln -s "$src/include" "$d/run/include"
  ln -s "$(cd "$(dirname "$lib")" && pwd)" "$d/run/build"
  cp "$d/code.c" "$d/run/$file"

  # As the README says: built, then run on simulated GPUs.
  (cd "$d/run" && PATH="$tmp/bin:$PATH" bash -c "$cmd") >"$d/out" 2>"$d/err"; rc=$?
  [ $rc -eq 0 ] && ok || bad "$what: exit $rc: $(cat "$d/err")"
  [ ! -s "$d/err" ] && ok || bad "$what: wrote to stderr: $(cat "$d/err")"
  if cmp -s "$d/out" "$d/expected"; then ok; else
    bad "$what: prints what the README does not show:"
    diff "$d/expected" "$d/out"
  fi

  # Without a GPU and without VDEV_SIM_GPUS: a clear failure.
  nogpu=$(sed 's/VDEV_SIM_GPUS=[^ ]* //' <<<"$cmd")
  (cd "$d/run" && PATH="$tmp/bin:$PATH" \
    VDEV_CUDA_PLUGIN=/nonexistent/libvdev-cuda.so bash -c "$nogpu") >"$d/out" 2>"$d/err"; rc=$?
  [ $rc -eq 1 ] && ok || bad "$what without a GPU: exit $rc, expected 1 (stdout: $(cat "$d/out"))"
  [ ! -s "$d/out" ] && ok || bad "$what without a GPU: printed $(cat "$d/out")"
  grep -q "VDEV_SIM_GPUS=" "$d/err" && ok ||
    bad "$what without a GPU: does not say how to simulate one: $(cat "$d/err")"
done

# The `vdev fit` example: its command, run from the source folder with this
# build's vdev, prints exactly the ```text block after it.
awk -v tmp="$tmp" '
  /^```sh$/ { insh = 1; next }
  insh && /^\.\/build\/vdev fit / { print > (tmp "/fit.cmd"); found = 1 }
  /^```text$/ && found == 1 { intext = 1; found = 2; next }
  /^```/ { insh = 0; intext = 0; next }
  intext { print > (tmp "/fit.expected") }
' "$src/README.md"
if [ -f "$tmp/fit.cmd" ] && [ -f "$tmp/fit.expected" ]; then
  fitcmd=$(sed "s|^\./build/vdev |\"$vdev\" |" "$tmp/fit.cmd")
  (cd "$src" && bash -c "$fitcmd") >"$tmp/fit.out" 2>"$tmp/fit.err"; rc=$?
  [ $rc -eq 0 ] && ok || bad "README's vdev fit example: exit $rc: $(cat "$tmp/fit.err")"
  if cmp -s "$tmp/fit.out" "$tmp/fit.expected"; then ok; else
    bad "README's vdev fit example prints what the README does not show:"
    diff "$tmp/fit.expected" "$tmp/fit.out"
  fi
else
  bad "README.md has no \`./build/vdev fit\` example followed by its output"
fi

# Every command `vdev --help` lists has a row in the README's table of commands.
help=$("$vdev" --help)
cmds=$(sed -n '/^commands:/,/^$/s/^  \([a-z][a-z-]*\)  .*/\1/p' <<<"$help")
[ "$(wc -w <<<"$cmds")" -ge 6 ] && ok || bad "vdev --help lists only these commands: $cmds"
table=$(sed -n '/^## The vdev command/,/^## /p' "$src/README.md")
for c in $cmds; do
  grep -q "^| \`vdev $c[\` ]" <<<"$table" && ok ||
    bad "README's table of commands has no row for 'vdev $c'"
done

# Every variable `vdev --help` describes has a row in the README's table.
vars=$(sed -n '/^Environment/,$s/^  \([A-Z][A-Z0-9_]*\)  .*/\1/p' <<<"$help")
[ "$(wc -w <<<"$vars")" -ge 18 ] && ok || bad "vdev --help describes only these variables: $vars"
envtable=$(sed -n '/^### Environment variables/,/^#/p' "$src/README.md")
for v in $vars; do
  grep -q "^| \`$v\`\|^| \`[A-Z0-9_]*\`, \`$v\`" <<<"$envtable" && ok ||
    bad "README's table of environment variables has no row for $v (vdev --help has one)"
done
finish
