#!/usr/bin/env bash
# cli_plot_files.sh — the files `vdev plot` reads and writes. -o FILE is
# written whole or not at all: the picture goes to a temporary file in
# FILE's folder, renamed over FILE once complete (FILE keeps its permissions;
# a new one gets 0666 less the umask); when the write fails (here: a file
# size limit, as a full disk would) the command says so in one line, exits
# 1, leaves the previous FILE as it was (and says so) and no temporary file
# behind. A gzip-compressed trace draws the same picture as the plain one;
# a cut or corrupt gzip stream is one line and exit 1; '-' reads the trace
# from standard input. Usage: cli_plot_files.sh VDEV SHARED
set -u
vdev=$1
case $vdev in /*) ;; *) vdev=$PWD/$vdev ;; esac # the tests below change folder
command -v python3 >/dev/null || { echo "python3 not found: skipped"; exit 77; }
command -v gzip >/dev/null || { echo "gzip not found: skipped"; exit 77; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
. "${BASH_SOURCE%/*}/testlib.sh"
unset VDEV_SIM_GPUS VDEV_PLACEMENT VDEV_LOGICAL_DEVICES VDEV_VISIBLE_DEVICES VDEV_MEMORY_GROWTH \
      VDEV_TRACE_FILE VDEV_ALLOC_TRACE VDEV_PLACEMENT_REPORT
svg() { python3 -c 'import sys, xml.etree.ElementTree as E; E.parse(sys.argv[1])' "$1" 2>/dev/null; }
# listing DIR: its entries, hidden ones too, on one line
listing() { (cd "$1" && ls -A | tr '\n' ' '); }

VDEV_SIM_GPUS=3x1GiB VDEV_TRACE_FILE=$tmp/run.json "$vdev" demo --epochs 1 --steps 5 >/dev/null 2>&1 \
  && ok || bad "demo failed"
mkdir "$tmp/out"
# a good picture, with permissions of its own
"$vdev" plot --placement "$tmp/run.json" -o "$tmp/out/m.svg" && svg "$tmp/out/m.svg" && ok ||
  bad "plot --placement -o"
chmod 640 "$tmp/out/m.svg" && cp -p "$tmp/out/m.svg" "$tmp/keep.svg"

# a write that fails (SIGXFSZ ignored: the write fails with EFBIG): the old
# picture stays, no temporary file is left, one line says so
err=$( (trap '' XFSZ; ulimit -f 2; "$vdev" plot "$tmp/run.json" -o "$tmp/out/m.svg") 2>&1 ); rc=$?
want="vdev plot: $tmp/out/m.svg: write error: File too large ($tmp/out/m.svg is left as it was)"
[ $rc -eq 1 ] && [ "$err" = "$want" ] && ok || bad "failed write: exit $rc: '$err', expected '$want'"
cmp -s "$tmp/out/m.svg" "$tmp/keep.svg" && ok || bad "failed write: the previous picture changed"
[ "$(listing "$tmp/out")" = "m.svg " ] && ok || bad "failed write: left in the folder: $(listing "$tmp/out")"
# the same for a new file: nothing is created
err=$( (trap '' XFSZ; ulimit -f 2; "$vdev" plot "$tmp/run.json" -o "$tmp/out/new.svg") 2>&1 ); rc=$?
want="vdev plot: $tmp/out/new.svg: write error: File too large"
[ $rc -eq 1 ] && [ "$err" = "$want" ] && ok || bad "failed new file: exit $rc: '$err', expected '$want'"
[ "$(listing "$tmp/out")" = "m.svg " ] && ok || bad "failed new file: left in the folder: $(listing "$tmp/out")"
# relative to the current folder too
err=$(cd "$tmp/out" && (trap '' XFSZ; ulimit -f 2; "$vdev" plot "$tmp/run.json" -o m.svg) 2>&1); rc=$?
[ $rc -eq 1 ] && [ "$err" = "vdev plot: m.svg: write error: File too large (m.svg is left as it was)" ] &&
  cmp -s "$tmp/out/m.svg" "$tmp/keep.svg" && [ "$(listing "$tmp/out")" = "m.svg " ] && ok ||
  bad "failed write in the current folder: exit $rc: '$err', left: $(listing "$tmp/out")"

# a write that succeeds replaces the picture, keeping its permissions
"$vdev" plot "$tmp/run.json" -o "$tmp/out/m.svg" && svg "$tmp/out/m.svg" &&
  ! cmp -s "$tmp/out/m.svg" "$tmp/keep.svg" && ok || bad "replacing the picture"
[ "$(stat -c %a "$tmp/out/m.svg")" = 640 ] && ok || bad "replaced picture: mode $(stat -c %a "$tmp/out/m.svg")"
(umask 027; "$vdev" plot "$tmp/run.json" -o "$tmp/out/n.svg") &&
  [ "$(stat -c %a "$tmp/out/n.svg")" = 640 ] && ok || bad "new picture under umask 027: mode $(stat -c %a "$tmp/out/n.svg")"
[ "$(listing "$tmp/out")" = "m.svg n.svg " ] && ok || bad "left in the folder: $(listing "$tmp/out")"
# not a regular file: written in place (standard output, a device)
"$vdev" plot "$tmp/run.json" -o /dev/null && ok || bad "-o /dev/null"
"$vdev" plot "$tmp/run.json" -o - | python3 -c 'import sys, xml.etree.ElementTree as E; E.parse(sys.stdin)' &&
  ok || bad "-o -"

# gzip: the same picture as the plain trace (the title names the file read)
gzip -c "$tmp/run.json" >"$tmp/run.json.gz"
"$vdev" plot "$tmp/run.json.gz" -o "$tmp/gz.svg"; rc=$?
"$vdev" plot "$tmp/run.json" -o "$tmp/plain.svg"
[ $rc -eq 0 ] && sed 's/run\.json\.gz/run.json/g' "$tmp/gz.svg" | cmp -s - "$tmp/plain.svg" && ok ||
  bad "gzip trace: exit $rc, or not the plain trace's picture"
"$vdev" plot --placement "$tmp/run.json.gz" -o "$tmp/gzp.svg" && svg "$tmp/gzp.svg" && ok ||
  bad "gzip trace, --placement"
head -c 3000 "$tmp/run.json.gz" >"$tmp/cut.json.gz"
err=$("$vdev" plot "$tmp/cut.json.gz" -o "$tmp/cut.svg" 2>&1); rc=$?
want="vdev plot: $tmp/cut.json.gz: the gzip stream is cut short (the file ends inside it)"
[ $rc -eq 1 ] && [ "$err" = "$want" ] && [ ! -e "$tmp/cut.svg" ] && ok ||
  bad "cut gzip: exit $rc: '$err', expected '$want'"
# a corrupt gzip stream: one line that names the file once
printf '\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03\x01\x05\x00\x00\x00a 1\n' >"$tmp/corrupt.json.gz"
err=$("$vdev" plot "$tmp/corrupt.json.gz" -o "$tmp/corrupt.svg" 2>&1); rc=$?
want="vdev plot: $tmp/corrupt.json.gz: read error: invalid stored block lengths"
[ $rc -eq 1 ] && [ "$err" = "$want" ] && [ ! -e "$tmp/corrupt.svg" ] && ok ||
  bad "corrupt gzip: exit $rc: '$err', expected '$want'"
"$vdev" plot --help | grep -q "gzip" && ok || bad "plot --help does not say it reads gzip"
# '-': the trace from standard input (gzip or plain), named "(standard input)"
"$vdev" plot - -o "$tmp/stdin.svg" <"$tmp/run.json.gz"; rc=$?
[ $rc -eq 0 ] && sed 's/(standard input)/run.json/g' "$tmp/stdin.svg" |
  cmp -s - "$tmp/plain.svg" && ok || bad "plot - : exit $rc, or not the plain trace's picture"
err=$("$vdev" plot - -o "$tmp/corrupt.svg" <"$tmp/corrupt.json.gz" 2>&1); rc=$?
want="vdev plot: (standard input): read error: invalid stored block lengths"
[ $rc -eq 1 ] && [ "$err" = "$want" ] && ok || bad "plot - of corrupt gzip: exit $rc: '$err'"
err=$("$vdev" plot - -o "$tmp/empty.svg" </dev/null 2>&1); rc=$?
want="vdev plot: (standard input): empty file, not a vdev trace"
[ $rc -eq 1 ] && [ "$err" = "$want" ] && ok || bad "plot - of nothing: exit $rc: '$err'"

finish
