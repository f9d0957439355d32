#!/usr/bin/env bash
# cli_metrics_addr.sh — what VDEV_METRICS_ADDR takes, as the README and the
# error text say: a numeric address (127.0.0.1:PORT, [::1]:PORT) or
# localhost (which is 127.0.0.1; no name is looked up), with a port from 0
# to 65535. localhost:PORT serves on 127.0.0.1; a host name, or a value that
# is no HOST:PORT, stops start-up with one line that names the variable and
# says what it takes, exit 1. The demo names the address it serves on
# ("Metrics: http://HOST:PORT/metrics", the port picked for port 0).
# Usage: cli_metrics_addr.sh VDEV SHARED
set -u
vdev=$1
. "${BASH_SOURCE%/*}/testlib.sh"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
unset VDEV_PLACEMENT VDEV_LOGICAL_DEVICES VDEV_VISIBLE_DEVICES VDEV_MEMORY_GROWTH VDEV_TRACE_FILE \
      VDEV_ALLOC_TRACE
export VDEV_SIM_GPUS=3x1GiB
command -v python3 >/dev/null || { echo "python3 not found: skipped"; exit 77; }
tmp=$(mktemp -d)
demo_pid=
cleanup() { [ -n "$demo_pid" ] && kill "$demo_pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT

takes="expected HOST:PORT with a numeric address or localhost, e.g. 127.0.0.1:9400, [::1]:9400"
takes="$takes or localhost:9400 (port 0 picks a free one)"
for v in example.com:9400 localhost.localdomain:9400 127.0.0.1 localhost: example.com:70000 \
         localhost:9x :9400; do
  err=$(VDEV_METRICS_ADDR=$v "$vdev" devices 2>&1 >/dev/null); rc=$?
  want="vdev devices: start-up failed: VDEV_METRICS_ADDR=\"$v\": $takes"
  [ $rc -eq 1 ] && [ "$err" = "$want" ] && ok || bad "VDEV_METRICS_ADDR=$v: exit $rc: '$err', expected '$want'"
done
# a good host with a port past 65535: the port is named
for v in localhost:70000 127.0.0.1:99999 '[::1]:123456789012'; do
  err=$(VDEV_METRICS_ADDR=$v "$vdev" devices 2>&1 >/dev/null); rc=$?
  want="vdev devices: start-up failed: VDEV_METRICS_ADDR=\"$v\": port ${v##*:} is out of range (0-65535)"
  [ $rc -eq 1 ] && [ "$err" = "$want" ] && ok || bad "VDEV_METRICS_ADDR=$v: exit $rc: '$err', expected '$want'"
done

# localhost:PORT: served on 127.0.0.1. A port found free may be taken by
# another test before the demo binds it: then another port, a few times.
for _ in 1 2 3 4 5; do
  port=$(free_port)
  : >"$tmp/demo.out"   # not the last try's output: the background shell truncates it late
  VDEV_METRICS_ADDR=localhost:$port "$vdev" demo --epochs 1000 --steps 100 >"$tmp/demo.out" 2>&1 &
  demo_pid=$!
  for _ in $(seq 1 240); do   # bounded: 120 s
    grep -q '^Metrics: ' "$tmp/demo.out" && break
    kill -0 "$demo_pid" 2>/dev/null || break
    sleep 0.5
  done
  grep -q "cannot listen there: Address already in use" "$tmp/demo.out" || break
  wait "$demo_pid"; demo_pid=
done
got=
for _ in $(seq 1 240); do   # bounded: 120 s
  got=$(python3 - "$port" <<'PY' 2>/dev/null
import sys, urllib.request
with urllib.request.urlopen("http://127.0.0.1:%s/metrics" % sys.argv[1], timeout=5) as r:
    print(sum(1 for l in r.read().decode().splitlines() if l.startswith("# TYPE vdev_")))
PY
)
  [ -n "$got" ] && [ "$got" -gt 0 ] && break
  kill -0 "$demo_pid" 2>/dev/null || break
  sleep 0.5
done
[ -n "$got" ] && [ "$got" -gt 0 ] && ok || bad "localhost:$port: nothing served on 127.0.0.1: $(cat "$tmp/demo.out")"
grep -qxF "Metrics: http://127.0.0.1:$port/metrics" "$tmp/demo.out" && ok ||
  bad "localhost:$port: the demo does not say where it serves: $(head -3 "$tmp/demo.out")"
kill "$demo_pid" 2>/dev/null; wait "$demo_pid" 2>/dev/null; demo_pid=

# port 0: every scenario names the port it got
for s in "" --tf-placement --split --mirrored --priority; do
  # emptied here: the background shell truncates it only when it gets to run,
  # and the last scenario's 'Metrics:' line would end the wait at once
  : >"$tmp/demo.out"
  VDEV_METRICS_ADDR=127.0.0.1:0 "$vdev" demo $s --steps 10 >"$tmp/demo.out" 2>&1 &
  demo_pid=$!
  line=
  for _ in $(seq 1 240); do   # bounded: 120 s
    line=$(grep -m1 '^Metrics: ' "$tmp/demo.out")
    [ -n "$line" ] && break
    kill -0 "$demo_pid" 2>/dev/null || break
    sleep 0.5
  done
  # read once more: the demo may have printed it and ended between the two
  # looks above (a short run on a loaded machine)
  line=$(grep -m1 '^Metrics: ' "$tmp/demo.out")
  [[ $line =~ ^Metrics:\ http://127\.0\.0\.1:([1-9][0-9]*)/metrics$ ]] && ok ||
    bad "demo $s, port 0: no 'Metrics:' line naming the port: $(head -3 "$tmp/demo.out")"
  wait "$demo_pid"; demo_pid=
done

finish
