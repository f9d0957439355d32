#!/usr/bin/env bash
# cli_replay.sh — `vdev replay` through the command line: the table, the JSON
# (its keys, in order, and values that must hold on any machine), exit codes
# (0 ok, 1 bad input, 2 usage) with one line "vdev replay: ..." on stderr, a
# gzip trace, an empty trace refused, a NUL byte, a folder and a corrupt gzip
# stream refused with their exact messages, the bytes live before a trace (its
# header's pre_live_*) and the capacity with them, malformed or half-given pre-live fields
# (an error naming the line), a write error on stdout (exit 1, one
# line), and the help text. Never checks timings.
# Usage: cli_replay.sh VDEV DATA (DATA/traces: the repository's data/traces)
set -u
vdev=$1
data=${2:-}
. "${BASH_SOURCE%/*}/testlib.sh"
[ -x "$vdev" ] || { echo "cli_replay: no vdev binary at '$vdev'"; exit 77; }
[ -n "$data" ] && [ -f "$data/traces/mlp.trace" ] ||
  { echo "FAIL: cli_replay: no traces in '$data' (the repository's data/traces)"; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# run ARGS...: runs vdev, sets rc, out (stdout) and err (stderr).
run() {
  "$vdev" "$@" >"$tmp/out" 2>"$tmp/err"; rc=$?
  out=$(cat "$tmp/out"); err=$(cat "$tmp/err")
}
# one_error WHAT CODE: exit CODE and exactly one line "vdev replay: ..." on stderr.
one_error() {
  [ $rc -eq "$2" ] && ok || bad "$1: exit $rc, expected $2"
  [ "$(lines "$err")" -eq 1 ] && ok || bad "$1: stderr is not one line: $err"
  [[ $err == "vdev replay: "* ]] && ok || bad "$1: stderr does not start with 'vdev replay: ': $err"
  [ -z "$out" ] && ok || bad "$1: wrote to stdout: $out"
}

# ---- the table ----
run replay --repeats 1 "$data/traces/mlp.trace"
[ $rc -eq 0 ] && ok || bad "replay mlp: exit $rc: $err"
for s in "events               186" "ns per event" "peak live bytes" "peak reserved bytes" \
         "min capacity bytes" "capacity ratio"; do
  has "$out" "$s" && ok || bad "replay: no '$s' in: $out"
done

# The bytes live before the trace (its header's pre_live_*), and the capacity with them
run replay --repeats 1 "$data/traces/transformer.trace"
[ $rc -eq 0 ] && ok || bad "replay transformer: exit $rc: $err"
pre="pre-live bytes       130358912 (124.32 MiB in 296 blocks live before the trace, not in it)"
has "$out" "$pre" && ok || bad "replay: no pre-live bytes in: $out"
[[ $out =~ with\ pre-live\ bytes\ \ ([0-9]+)\ \([0-9.]+\ MiB:\ min\ capacity\ with\ those\ blocks\ allocated\ first\) ]] &&
  ok || bad "replay: no capacity with the pre-live bytes in: $out"
printf '# trace v1 model=x\na 0 1000\nf 0\n' >"$tmp/nopre.trace"
run replay --repeats 1 "$tmp/nopre.trace"
[ $rc -eq 0 ] && ! has "$out" "pre-live" && ok || bad "replay without pre-live bytes: $out"

# Pre-live fields that cannot be read are an error naming the trace's line, never skipped:
# a number that is not digits alone, more blocks than vdev replays, one field without the
# other, bytes without blocks.
pl() { printf '# trace v1 ids=never-reused %s\na 0 1024\nf 0\n' "$1" >"$tmp/pl.trace"; }
p="$tmp/pl.trace"
while IFS='|' read -r h msg; do
  pl "$h"
  run replay --repeats 1 "$p"
  one_error "pre-live '$h'" 1
  [ "$err" = "vdev replay: $p:1: $msg" ] && ok || bad "pre-live '$h': stderr '$err'"
done <<'EOF2'
pre_live_blocks=4 pre_live_bytes=4e7|pre_live_bytes="4e7" is not a whole number of bytes (at most 2^61)
pre_live_blocks=four pre_live_bytes=40|pre_live_blocks="four" is not a whole number of blocks from 0 to 1000000
pre_live_blocks=1000001 pre_live_bytes=40000000|pre_live_blocks="1000001" is not a whole number of blocks from 0 to 1000000
pre_live_bytes=40000000|pre_live_bytes is given without pre_live_blocks (the header gives both, or neither)
pre_live_blocks=3|pre_live_blocks is given without pre_live_bytes (the header gives both, or neither)
pre_live_blocks=0 pre_live_bytes=40|pre_live_blocks=0 with pre_live_bytes=40 (both are 0, or neither)
EOF2
# A million blocks, the most, are replayed.
pl "pre_live_blocks=1000000 pre_live_bytes=256000000"
run replay --repeats 1 "$p"
[ $rc -eq 0 ] && has "$out" "pre-live bytes       256000000 (244.14 MiB in 1000000 blocks" && ok ||
  bad "pre-live 1000000 blocks: exit $rc: $out $err"

# ---- JSON ----
run replay --json --repeats 1 "$data/traces/transformer.trace"
[ $rc -eq 0 ] && ok || bad "replay --json: exit $rc: $err"
[ "$(lines "$out")" -eq 1 ] && ok || bad "replay --json: not one line: $out"
keys=$(grep -o '"[a-z_]*":' <<<"$out" | tr -d '":' | head -6 | tr '\n' ' ')
want="events ns_per_event peak_live_bytes peak_reserved_bytes min_capacity_bytes capacity_ratio "
[ "$keys" = "$want" ] && ok || bad "replay --json: keys are '$keys'"
if command -v python3 >/dev/null 2>&1; then
  python3 - "$tmp/out" <<'EOF' && ok || bad "replay --json: values: $out"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["events"] == 3354, r
assert r["ns_per_event"] > 0, r
assert r["peak_live_bytes"] > 0 and r["peak_live_bytes"] % 256 == 0, r
assert r["min_capacity_bytes"] >= r["peak_live_bytes"], r
assert r["peak_reserved_bytes"] >= r["peak_live_bytes"], r
assert r["capacity_ratio"] >= 1.0, r
assert abs(r["capacity_ratio"] - r["min_capacity_bytes"] / r["peak_live_bytes"]) < 1e-4, r
# 296 blocks of 130358912 / 296 bytes, rounded up and to 256, allocated first
assert r["pre_live_bytes"] == 130358912, r
assert r["min_capacity_with_pre_live_bytes"] >= r["peak_live_bytes"] + 296 * 440576, r
EOF
fi

# A gzip copy replays like the plain file (same events, same peak).
gzip -c "$data/traces/mlp.trace" >"$tmp/mlp.trace.gz"
run replay --json --repeats 1 "$tmp/mlp.trace.gz"
[ $rc -eq 0 ] && ok || bad "replay gzip: exit $rc: $err"
has "$out" '"events": 186' && ok || bad "replay gzip: $out"
has "$out" '"peak_live_bytes": 135284736' && ok || bad "replay gzip peak: $out"

# ---- errors: bad input exits 1, usage exits 2, one line each ----
run replay "$tmp/missing.trace"
one_error "missing file" 1
has "$err" "missing.trace" && ok || bad "missing file: message lacks the path: $err"

printf 'a 1 100\nf 1\nq 3\n' >"$tmp/bad.trace"
run replay --json "$tmp/bad.trace"
one_error "malformed trace" 1
has "$err" "bad.trace:3: unknown op 'q'" && ok || bad "malformed: no file:line in: $err"

printf 'a 1 100\nf 2\n' >"$tmp/bad2.trace"
run replay "$tmp/bad2.trace"
one_error "free of an unknown id" 1
has "$err" "bad2.trace:2: free of unknown id 2" && ok || bad "unknown id: $err"

# A size beyond 64 bits names its line.
printf 'a 1 100\na 2 99999999999999999999\n' >"$tmp/big.trace"
run replay "$tmp/big.trace"
one_error "size beyond 64 bits" 1
has "$err" "big.trace:2: BYTES '99999999999999999999' does not fit in 64 bits" && ok ||
  bad "size beyond 64 bits: $err"

# A last line without its newline (a writer stopped mid-line: "a 7 10" cut
# to "a 7 1") is dropped with a note, plain or gzip; the whole lines replay.
printf 'a 1 100\nf 1\na 7 1' >"$tmp/cut.trace"
run replay --repeats 1 "$tmp/cut.trace"
[ $rc -eq 0 ] && ok || bad "cut last line: exit $rc: $err"
[ "$err" = "vdev replay: note: $tmp/cut.trace:3: the last line 'a 7 1' is cut short (no newline): dropped; 2 events read" ] &&
  ok || bad "cut last line: $err"
has "$out" "events               2" && ok || bad "cut last line: $out"
gzip -c "$tmp/cut.trace" >"$tmp/cut.trace.gz"
run replay --repeats 1 "$tmp/cut.trace.gz"
[ $rc -eq 0 ] && ok || bad "cut last line, gzip: exit $rc: $err"
has "$err" "cut.trace.gz:3: the last line 'a 7 1' is cut short (no newline): dropped; 2 events read" &&
  ok || bad "cut gzip: $err"
# One timed run is not a median.
has "$out" "ns per event" && has "$out" "(1 run of " && ok || bad "one run: $out"
run replay --repeats 3 "$tmp/cut.trace"
has "$out" "(median of 3 runs of " && ok || bad "three runs: $out"
# A gzip file cut short is rejected, not read as a shorter trace.
gzip -c "$data/traces/mlp.trace" | head -c 500 >"$tmp/short.trace.gz"
run replay "$tmp/short.trace.gz"
one_error "gzip cut short" 1
has "$err" "short.trace.gz: the gzip stream is cut short" && ok || bad "gzip cut short: $err"

# A NUL byte is refused naming its line and column, by replay and by fit:
# not an event lost, two lines run together, or a NUL-filled tail accepted.
printf 'a 1 1024\n\x00a 2 999999\nf 1\n' >"$tmp/nul1"
printf 'a 1 10\x0024\nf 1\n' >"$tmp/nul2"
printf 'a 1 1024\nf 1\n\x00\x00\x00\x00\n' >"$tmp/nul4"
for c in "nul1:2: a NUL byte at column 1" "nul2:1: a NUL byte at column 7" \
         "nul4:3: a NUL byte at column 1"; do
  f=${c%%:*}
  run replay --quiet --repeats 1 --json "$tmp/$f"
  one_error "NUL in $f" 1
  [ "$err" = "vdev replay: $tmp/$c" ] && ok || bad "NUL in $f: $err"
done
"$vdev" fit --card 1GiB "$tmp/nul1" >"$tmp/out" 2>"$tmp/err"; rc=$?
[ $rc -eq 1 ] && [ "$(cat "$tmp/err")" = "vdev fit: $tmp/nul1:2: a NUL byte at column 1" ] &&
  ok || bad "fit with a NUL: exit $rc: $(cat "$tmp/err")"
# A folder, and a corrupt gzip stream: the file named once, no line number.
mkdir "$tmp/adir"
run replay --quiet "$tmp/adir"
one_error "a folder" 1
[ "$err" = "vdev replay: $tmp/adir: is a directory" ] && ok || bad "a folder: $err"
printf '\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03\x01\x05\x00\x00\x00a 1\n' >"$tmp/corrupt.gz"
run replay --quiet "$tmp/corrupt.gz"
one_error "corrupt gzip" 1
[ "$err" = "vdev replay: $tmp/corrupt.gz: read error: invalid stored block lengths" ] && ok ||
  bad "corrupt gzip: $err"

# A trace without one allocation (an empty file, comments only) is refused,
# as `vdev plot` refuses an empty file.
: >"$tmp/empty.trace"
printf '# trace v1 model=none\n' >"$tmp/comments.trace"
for t in empty comments; do
  run replay "$tmp/$t.trace"
  one_error "$t trace" 1
  [ "$err" = "vdev replay: $tmp/$t.trace: no allocation events, nothing to replay" ] && ok ||
    bad "$t trace: $err"
  run replay --json "$tmp/$t.trace"
  one_error "$t trace --json" 1
done

# Standard output that cannot be written: one line, exit 1 (as `vdev plot`).
if [ -w /dev/full ]; then
  for j in "" --json; do
    "$vdev" replay $j --repeats 1 "$data/traces/mlp.trace" >/dev/full 2>"$tmp/err"; rc=$?
    err=$(cat "$tmp/err")
    [ $rc -eq 1 ] && [ "$err" = "vdev replay: write error on standard output: No space left on device" ] &&
      ok || bad "replay $j >/dev/full: exit $rc: $err"
  done
  "$vdev" replay --help >/dev/full 2>"$tmp/err"; rc=$?
  [ $rc -eq 1 ] && [ "$(cat "$tmp/err")" = "vdev replay: write error on standard output: No space left on device" ] &&
    ok || bad "replay --help >/dev/full: exit $rc: $(cat "$tmp/err")"
fi

run replay --bogus "$data/traces/mlp.trace"
one_error "unknown flag" 2
run replay
one_error "no trace" 2
run replay --repeats 0 "$data/traces/mlp.trace"
one_error "--repeats 0" 2
run replay --repeats "$data/traces/mlp.trace"
one_error "--repeats without a number" 2
# A number as written: no blank or sign before it (strtol would skip them), as the
# environment's numbers take none.
for n in " 3" "+3" "3 " "0x3"; do
  run replay --repeats "$n" "$data/traces/mlp.trace"
  one_error "--repeats '$n'" 2
  [ "$err" = "vdev replay: --repeats takes a whole number from 1 to 101, not '$n'" ] && ok ||
    bad "--repeats '$n': $err"
done
run replay --repeats
[ "$err" = "vdev replay: --repeats needs a number from 1 to 101" ] && ok || bad "--repeats alone: $err"
run replay "$data/traces/mlp.trace" "$data/traces/mlp.trace"
one_error "two traces" 2

# ---- --name=value: an option's value joined by '=', as GNU tools take it (split by the
# vdev command before the subcommand reads it, so the same rules hold) ----
run replay --repeats=1 --json "$data/traces/mlp.trace"
[ $rc -eq 0 ] && has "$out" '"events": 186' && ok || bad "--repeats=1: exit $rc: $err $out"
run replay --repeats=0 "$data/traces/mlp.trace"
one_error "--repeats=0" 2
[ "$err" = "vdev replay: --repeats takes a whole number from 1 to 101, not '0'" ] && ok ||
  bad "--repeats=0: $err"
run replay --repeats= "$data/traces/mlp.trace"
[ "$err" = "vdev replay: --repeats takes a whole number from 1 to 101, not ''" ] && ok ||
  bad "--repeats=: $err"
run replay --json=1 "$data/traces/mlp.trace"
one_error "--json=1" 2
[ "$err" = "vdev replay: --json takes no value ('--json=1') (see 'vdev replay --help')" ] && ok ||
  bad "--json=1: $err"
run replay --repeat=2 "$data/traces/mlp.trace"
[ "$err" = "vdev replay: unknown option '--repeat=2' (see 'vdev replay --help')" ] && ok ||
  bad "--repeat=2: $err"
# a trace whose name holds '=' is still a trace
cp "$data/traces/mlp.trace" "$tmp/a=b.trace"
run replay --repeats 1 "$tmp/a=b.trace"
[ $rc -eq 0 ] && ok || bad "a trace named a=b: exit $rc: $err"

# ---- '-': the trace from standard input, plain or gzip ----
# runin FILE ARGS...: run with FILE on standard input.
runin() {
  local in=$1; shift
  "$vdev" "$@" <"$in" >"$tmp/out" 2>"$tmp/err"; rc=$?
  out=$(cat "$tmp/out"); err=$(cat "$tmp/err")
}
run replay --json --repeats 1 "$data/traces/mlp.trace"
want=$(grep -o '"min_capacity_bytes": *[0-9]*' <<<"$out")
runin "$data/traces/mlp.trace" replay --json --repeats 1 -
[ $rc -eq 0 ] && ok || bad "replay - : exit $rc: $err"
[ -n "$want" ] && [ "$(grep -o '"min_capacity_bytes": *[0-9]*' <<<"$out")" = "$want" ] && ok ||
  bad "replay - : not the file's capacity ($want): $out"
gzip -c "$data/traces/mlp.trace" >"$tmp/in.gz"
runin "$tmp/in.gz" replay --repeats 1 -
[ $rc -eq 0 ] && ok || bad "replay - (gzip): exit $rc: $err"
has "$out" "trace                (standard input)" && ok || bad "replay - : trace line: $out"
printf 'a 1 256\nzz 2\n' >"$tmp/bad.trace"
runin "$tmp/bad.trace" replay -
one_error "replay - of a bad line" 1
[ "$err" = "vdev replay: (standard input):2: unknown op 'zz' (expected 'a ID BYTES' or 'f ID')" ] &&
  ok || bad "replay - of a bad line: $err"
head -c 20 "$tmp/in.gz" >"$tmp/cut.gz"
runin "$tmp/cut.gz" replay -
one_error "replay - of a cut gzip stream" 1
[[ $err == "vdev replay: (standard input): "* ]] && ok || bad "replay - of a cut gzip: $err"
runin /dev/null replay -
[ "$err" = "vdev replay: (standard input): no allocation events, nothing to replay" ] && ok ||
  bad "replay - of nothing: $err"

# ---- help ----
for h in --help -h; do
  run replay $h
  [ $rc -eq 0 ] && ok || bad "replay $h: exit $rc"
  has "$out" "usage: vdev replay" && ok || bad "replay $h: no usage line: $out"
  [ -z "$err" ] && ok || bad "replay $h wrote to stderr: $err"
done

finish
