#!/usr/bin/env bash
# cli_plot_numbers.sh — `vdev plot` on numbers out of range: 1e309, 1e400,
# -1e400 (not finite doubles) and 9.3e18 (past each field's range) in every
# numeric field it uses (ts, dur, tid; in_use, reserved, bytes in args) must
# fail at once (exit 1) with one line naming the file, the line and the
# field, in both pictures; each run is under `timeout`, so a hang fails the
# test instead of blocking it. The largest values each field takes still
# draw. Usage: cli_plot_numbers.sh VDEV SHARED
set -u
vdev=$1
command -v python3 >/dev/null || { echo "python3 not found: skipped"; exit 77; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
. "${BASH_SOURCE%/*}/testlib.sh"

# trace FIELD VALUE: a small trace whose line 4 carries VALUE in FIELD
trace() {
  local f=$1 v=$2 ts=5 dur=2 tid=0 in_use=1024 reserved=2048 bytes=4096
  eval "$f=\$v"
  local line
  case $f in
    ts|dur|tid) line="{\"name\":\"MatMul\",\"cat\":\"op\",\"ph\":\"X\",\"ts\":$ts,\"dur\":$dur,\"pid\":1,\"tid\":$tid,\"args\":{\"op_type\":3}}," ;;
    in_use|reserved) line="{\"name\":\"memory /device:GPU:0\",\"ph\":\"C\",\"ts\":7,\"pid\":1,\"tid\":0,\"args\":{\"in_use\":$in_use,\"reserved\":$reserved}}," ;;
    bytes) line="{\"name\":\"OOM\",\"cat\":\"oom\",\"ph\":\"i\",\"s\":\"t\",\"ts\":9,\"pid\":1,\"tid\":0,\"args\":{\"bytes\":$bytes}}," ;;
  esac
  printf '%s\n' '[' \
    '{"name":"process_name","ph":"M","pid":1,"args":{"name":"vdev"}},' \
    '{"name":"thread_name","ph":"M","pid":1,"tid":0,"args":{"name":"/device:GPU:0 (sim)"}},' \
    "$line" \
    '{"name":"memory /device:GPU:0","ph":"C","ts":10,"pid":1,"tid":0,"args":{"in_use":0,"reserved":2048}}' \
    ']'
}

for f in ts dur tid in_use reserved bytes; do
  for v in 1e309 1e400 -1e400 9.3e18; do
    trace $f $v >"$tmp/t.json"
    for mode in --memory --placement; do
      err=$(timeout 120 "$vdev" plot $mode "$tmp/t.json" -o "$tmp/t.svg" 2>&1); rc=$?
      if [ $rc -eq 1 ] && [ "$(printf '%s\n' "$err" | wc -l)" -eq 1 ] \
         && echo "$err" | grep -q "^vdev plot: $tmp/t.json:4: \"$f\" " \
         && echo "$err" | grep -qF -- "$v"; then
        ok
      else
        bad "$f=$v $mode: exit $rc (124: it hung), '$err'"
      fi
    done
  done
done

# the messages say what each field takes
trace ts 9.3e18 >"$tmp/t.json"
err=$(timeout 120 "$vdev" plot "$tmp/t.json" 2>&1 >/dev/null)
[ "$err" = "vdev plot: $tmp/t.json:4: \"ts\" must be microseconds from 0 to 9.2e+15 (2^63 ns), not 9.3e18" ] \
  && ok || bad "ts message: '$err'"
trace in_use 1e400 >"$tmp/t.json"
err=$(timeout 120 "$vdev" plot "$tmp/t.json" 2>&1 >/dev/null)
[ "$err" = "vdev plot: $tmp/t.json:4: \"in_use\" is 1e400: out of range (not a finite double)" ] \
  && ok || bad "in_use message: '$err'"
trace bytes 9.3e18 >"$tmp/t.json"
err=$(timeout 120 "$vdev" plot "$tmp/t.json" 2>&1 >/dev/null)
[ "$err" = "vdev plot: $tmp/t.json:4: \"bytes\" must be a byte count, an integer from 0 to 9223372036854775807, not 9.3e18" ] \
  && ok || bad "bytes message: '$err'"
trace tid 9.3e18 >"$tmp/t.json"
err=$(timeout 120 "$vdev" plot "$tmp/t.json" 2>&1 >/dev/null)
[ "$err" = "vdev plot: $tmp/t.json:4: \"tid\" must be an integer from 0 to 2147483647, not 9.3e18" ] \
  && ok || bad "tid message: '$err'"
for v in -1 1.5; do
  trace reserved $v >"$tmp/t.json"
  timeout 120 "$vdev" plot "$tmp/t.json" -o "$tmp/t.svg" 2>/dev/null; rc=$?
  [ $rc -eq 1 ] && ok || bad "reserved=$v: exit $rc, expected 1"
done
# a number anywhere, even in a field that is not drawn
printf '[\n{"name":"x","ph":"M","pid":1,"args":{"sort_index":1e999}}\n]\n' >"$tmp/t.json"
err=$(timeout 120 "$vdev" plot "$tmp/t.json" 2>&1 >/dev/null); rc=$?
[ $rc -eq 1 ] && echo "$err" | grep -q "t.json:2: \"sort_index\" is 1e999" && ok || bad "sort_index: $rc '$err'"

# the largest values each field takes, and tiny ones, draw a well-formed picture
for fv in ts=9.2e15 dur=9.2e15 tid=2147483647 in_use=9223372036854775807 \
          reserved=9223372036854775807 bytes=9223372036854775807 in_use=9.2e18 ts=1e-400 \
          dur=0.000001 in_use=1e3; do
  trace "${fv%%=*}" "${fv#*=}" >"$tmp/t.json"
  for mode in --memory --placement; do
    err=$(timeout 120 "$vdev" plot $mode "$tmp/t.json" -o "$tmp/t.svg" 2>&1); rc=$?
    [ $rc -eq 0 ] && python3 -c "import sys, xml.etree.ElementTree as E; E.parse(sys.argv[1])" "$tmp/t.svg" \
      && ok || bad "$fv $mode: exit $rc '$err'"
  done
done

finish
