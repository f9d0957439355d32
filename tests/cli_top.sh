#!/usr/bin/env bash
# cli_top.sh — `vdev top` against a running demo that serves metrics: one
# frame with every device, its memory and an op rate; a one-line error and
# exit 1 when nothing listens; exit 2 on bad options. Usage: cli_top.sh VDEV SHARED
set -u
vdev=$1
. "${BASH_SOURCE%/*}/testlib.sh"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
unset VDEV_PLACEMENT VDEV_LOGICAL_DEVICES VDEV_VISIBLE_DEVICES VDEV_MEMORY_GROWTH VDEV_TRACE_FILE
export VDEV_SIM_GPUS=3x1GiB
tmp=$(mktemp -d)
demo_pid=
cleanup() { [ -n "$demo_pid" ] && kill "$demo_pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT

"$vdev" top --help | grep -q "usage: vdev top" && ok || bad "--help"
"$vdev" top --bogus >/dev/null 2>&1; [ $? -eq 2 ] && ok || bad "bad option is not exit 2"
"$vdev" top --url ftp://x >/dev/null 2>&1; [ $? -eq 2 ] && ok || bad "bad url is not exit 2"
"$vdev" top --interval 0 >/dev/null 2>&1; [ $? -eq 2 ] && ok || bad "--interval 0 is not exit 2"

port=$(free_port)
err=$("$vdev" top --once --url "http://127.0.0.1:$port" 2>&1 >/dev/null); rc=$?
[ $rc -eq 1 ] && ok || bad "nothing listening: exit $rc"
[ "$(printf '%s\n' "$err" | wc -l)" -eq 1 ] && echo "$err" | grep -q "Connection refused" && ok \
  || bad "nothing listening: not one line naming the refusal: $err"

port=$(free_port)
VDEV_METRICS_ADDR=127.0.0.1:$port "$vdev" demo --epochs 1000 --steps 100 >"$tmp/demo.out" 2>&1 &
demo_pid=$!
up=0
for _ in $(seq 1 40); do   # bounded: 20 s
  if "$vdev" top --once --interval 0.2 --url "http://127.0.0.1:$port" >/dev/null 2>&1; then up=1; break; fi
  sleep 0.5
done
[ $up -eq 1 ] && ok || bad "the demo's endpoint never answered: $(cat "$tmp/demo.out")"
out=$("$vdev" top --once --url "http://127.0.0.1:$port" 2>&1); rc=$?
[ $rc -eq 0 ] && ok || bad "top --once exit $rc: $out"
for k in 0 1 2; do
  line=$(echo "$out" | grep "^/device:GPU:$k ")
  [ -n "$line" ] && ok || bad "no line for GPU:$k: $out"
  echo "$line" | grep -Eq " sim +\[[#+.]+\].*(MiB|GiB)" && ok || bad "GPU:$k line lacks backend, bar or limit: $line"
  # ops/s is the 11th field counting "in use" values as two (number, unit)
  rate=$(echo "$line" | awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^[0-9]+\.[0-9]$/ && $(i-1) ~ /^[0-9]+$/) r = $i; print r }')
  awk -v r="$rate" 'BEGIN { exit !(r > 0) }' && ok || bad "GPU:$k op rate '$rate' not positive: $line"
done
echo "$out" | grep -q "ops run in all" && ok || bad "no total: $out"
# the default URL and a full /metrics path both work
out=$("$vdev" top --once --interval 0.1 --url "http://127.0.0.1:$port/metrics" 2>&1) && ok || bad "path url: $out"

finish
