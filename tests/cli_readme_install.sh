#!/usr/bin/env bash
# cli_readme_install.sh — the README's first two commands (install, build and
# run; install and test) work as root in a fresh Debian container, which has
# no sudo and no package lists yet, and as a user with sudo; they install
# what the build and the tests need (every pkg-config module of the CMake
# files, the tools the tests call), the second all that the first does, and
# .ci/run installs the second's packages. apt-get and sudo are stand-ins here
# that record how they were called; nothing is installed.
# Usage: cli_readme_install.sh VDEV DATA
set -u
src=$(cd "$(dirname "$0")/.." && pwd)
. "${BASH_SOURCE%/*}/testlib.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The commands: the README's first ```sh block.
awk '/^```sh$/ { n++; next } /^```/ { if (n) exit } n == 1' "$src/README.md" >"$tmp/commands"
[ "$(wc -l <"$tmp/commands")" -eq 2 ] && ok || bad "the README's first block is not two lines: $(cat "$tmp/commands")"
line1=$(sed -n 1p "$tmp/commands")
line2=$(sed -n 2p "$tmp/commands")
[[ $line1 == *" && ./build/vdev demo" ]] && ok || bad "the first command does not end by running the demo: $line1"
[[ $line2 == *" && scripts/test" ]] && ok || bad "the second command does not end with scripts/test: $line2"

# A machine without sudo (the usual tools of a shell, and no sudo), and one
# with a sudo that records and runs its command; apt-get records and succeeds.
mkdir -p "$tmp/nosudo" "$tmp/sudo"
for b in bash sh env id dirname basename sed grep awk cat tr sort head tail cut uname \
         mkdir rm cp mv ln ls chmod true false test printf echo; do
  f=$(command -v "$b") && [ -x "$f" ] && ln -s "$f" "$tmp/nosudo/$b"
done
printf '#!/bin/bash\necho "apt-get $*" >>"%s/log"\n' "$tmp" >"$tmp/nosudo/apt-get"
printf '#!/bin/bash\necho "sudo $*" >>"%s/log"\nexec "$@"\n' "$tmp" >"$tmp/sudo/sudo"
chmod +x "$tmp/nosudo/apt-get" "$tmp/sudo/sudo"

for k in 1 2; do
  line=$(sed -n ${k}p "$tmp/commands")
  # The installing part: up to the build (cmake) or the tests (scripts/test).
  install=$(sed 's/ && \(cmake\|scripts\/test\|\.\/build\).*//' <<<"$line")
  pkgs=$(sed -n 's/.*apt-get install \(-[^ ]* \)*//p' <<<"$install")
  [ -n "$pkgs" ] && ok || bad "command $k installs nothing: $line"
  printf '%s\n' $pkgs | sort >"$tmp/pkgs$k"

  # As root, without sudo: apt-get update, then install, and nothing else.
  rm -f "$tmp/log"
  (cd "$tmp" && PATH="$tmp/nosudo" bash -c "$install") >"$tmp/out" 2>"$tmp/err"; rc=$?
  [ $rc -eq 0 ] && ok || bad "command $k without sudo: exit $rc: $(cat "$tmp/err")"
  [ ! -s "$tmp/err" ] && ok || bad "command $k without sudo: $(cat "$tmp/err")"
  [ "$(head -1 "$tmp/log" 2>/dev/null)" = "apt-get update" ] && ok ||
    bad "command $k without sudo does not start with apt-get update: $(cat "$tmp/log" 2>/dev/null)"
  grep -qx "apt-get install -y .*$(tail -1 "$tmp/pkgs$k")\( .*\)\?" "$tmp/log" 2>/dev/null && ok ||
    bad "command $k without sudo does not install: $(cat "$tmp/log" 2>/dev/null)"
  grep -q "^sudo" "$tmp/log" 2>/dev/null && bad "command $k used a sudo that is not there" || ok

  # As a user with sudo: both apt-get calls go through it.
  rm -f "$tmp/log"
  (cd "$tmp" && PATH="$tmp/sudo:$tmp/nosudo" bash -c "$install") >"$tmp/out" 2>"$tmp/err"; rc=$?
  [ $rc -eq 0 ] && ok || bad "command $k with sudo: exit $rc: $(cat "$tmp/err")"
  grep -qx "sudo apt-get update" "$tmp/log" 2>/dev/null && ok ||
    bad "command $k with sudo: apt-get update not run through sudo: $(cat "$tmp/log" 2>/dev/null)"
  grep -q "^sudo apt-get install " "$tmp/log" 2>/dev/null && ok ||
    bad "command $k with sudo: apt-get install not run through sudo: $(cat "$tmp/log" 2>/dev/null)"
done

# What the packages must hold.
has_pkg() { grep -qx -- "$2" "$tmp/pkgs$1"; }
[ -z "$(comm -23 "$tmp/pkgs1" "$tmp/pkgs2")" ] && ok ||
  bad "the test command lacks packages of the build command: $(comm -23 "$tmp/pkgs1" "$tmp/pkgs2")"
for p in build-essential cmake pkg-config libyajl-dev; do
  has_pkg 1 "$p" && ok || bad "the build command does not install $p"
done
for p in python3 curl prometheus; do # tools the tests call
  has_pkg 2 "$p" && ok || bad "the test command does not install $p"
done
# Each library the CMake files look for, by the Debian package that has it.
modules=$(grep -rhoE --include=CMakeLists.txt 'pkg_check_modules\([^)]*\)' "$src" |
  sed 's/pkg_check_modules(//; s/)//' |
  awk '{ for (i = 2; i <= NF; i++) if ($i !~ /^[A-Z_]+$/) { sub(/[<>=].*/, "", $i); print $i } }' | sort -u)
grep -rqE --include=CMakeLists.txt 'find_package\(ZLIB' "$src" && modules="$modules zlib"
[ -n "$modules" ] && ok || bad "no pkg-config module found in the CMake files"
for m in $modules; do
  case $m in
    openblas) p=libopenblas-dev ;;
    libmicrohttpd) p=libmicrohttpd-dev ;;
    yajl) p=libyajl-dev ;;
    zlib) p=zlib1g-dev ;;
    *) bad "the CMake files need '$m': add its Debian package to the README's commands and here"; continue ;;
  esac
  has_pkg 1 "$p" && has_pkg 2 "$p" && ok || bad "'$m' is needed, but $p is not in both commands"
done
# CI installs what the test command does (run in a copy with no scripts/, and
# with the stand-in apt-get, so that it can install and test nothing).
mkdir -p "$tmp/ci/.ci"
cp "$src/.ci/run" "$tmp/ci/.ci/run"
cp "$src/README.md" "$tmp/ci/README.md"
ci=$(PATH="$tmp/nosudo" "$tmp/ci/.ci/run" --packages 2>"$tmp/err" | tr ' ' '\n' | sort)
[ "$ci" = "$(cat "$tmp/pkgs2")" ] && ok || bad ".ci/run installs '$ci', the README's test command $(cat "$tmp/pkgs2")"
finish
