#!/usr/bin/env bash
# cli_prometheus.sh — a real scrape: Prometheus scrapes a running demo every
# second, and what its query API returns for vdev_memory_limit_bytes and
# vdev_memory_reserved_bytes equals what the endpoint itself serves (both are
# steady in the demo after its first step). Skipped (77) without prometheus
# (Debian: apt-get install prometheus). Loopback only. Usage: cli_prometheus.sh VDEV SHARED
set -u
vdev=$1
if ! command -v prometheus >/dev/null 2>&1; then
  echo "skipped: prometheus is not installed (Debian: apt-get install prometheus)"
  exit 77
fi
. "${BASH_SOURCE%/*}/testlib.sh"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
unset VDEV_PLACEMENT VDEV_LOGICAL_DEVICES VDEV_VISIBLE_DEVICES VDEV_MEMORY_GROWTH VDEV_TRACE_FILE
export VDEV_SIM_GPUS=3x1GiB
tmp=$(mktemp -d)
demo_pid=; prom_pid=
cleanup() {
  for p in $prom_pid $demo_pid; do kill "$p" 2>/dev/null; done
  wait 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT

# The demo serves on a port it picks (port 0) and names it: a port found free
# beforehand could be taken by another test running at the same time.
VDEV_METRICS_ADDR=127.0.0.1:0 "$vdev" demo --epochs 1000 --steps 100 >"$tmp/demo.out" 2>&1 &
demo_pid=$!
vport=
for _ in $(seq 1 240); do   # bounded: 120 s
  vport=$(sed -n 's|^Metrics: http://127\.0\.0\.1:\([0-9]*\)/metrics$|\1|p' "$tmp/demo.out")
  [ -n "$vport" ] && break
  kill -0 "$demo_pid" 2>/dev/null || break
  sleep 0.5
done
[ -n "$vport" ] || { bad "the demo named no metrics port: $(cat "$tmp/demo.out")"; finish; exit; }
cat >"$tmp/prometheus.yml" <<YML
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: vdev
    static_configs:
      - targets: ['127.0.0.1:$vport']
YML
# Prometheus's own port: one found free may be taken by another test before
# Prometheus binds it; then another, a few times.
for _ in 1 2 3 4 5; do
  pport=$(free_port)
  : >"$tmp/prom.log"   # not the last try's log: the background shell truncates it late
  prometheus --config.file="$tmp/prometheus.yml" --storage.tsdb.path="$tmp/tsdb" \
    --web.listen-address="127.0.0.1:$pport" >"$tmp/prom.log" 2>&1 &
  prom_pid=$!
  for _ in $(seq 1 240); do   # bounded: 120 s, until it serves or ends
    curl -s --max-time 5 -o /dev/null "http://127.0.0.1:$pport/-/ready" && break
    kill -0 "$prom_pid" 2>/dev/null || break
    sleep 0.5
  done
  kill -0 "$prom_pid" 2>/dev/null && break
  grep -q "address already in use" "$tmp/prom.log" || break
  wait "$prom_pid"; prom_pid=
done

# query NAME -> "device value" lines from Prometheus's API (empty until scraped)
query() {
  python3 - "$pport" "$1" <<'PY'
import json, sys, urllib.request
port, name = sys.argv[1], sys.argv[2]
try:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/query?query={name}", timeout=5) as r:
        d = json.load(r)
except Exception:
    sys.exit(0)
for s in sorted(d.get("data", {}).get("result", []), key=lambda s: s["metric"].get("device", "")):
    print(s["metric"].get("device"), s["metric"].get("backend"), s["value"][1])
PY
}
# served NAME -> the same lines from the endpoint itself
served() {
  curl -s --max-time 5 "http://127.0.0.1:$vport/metrics" | python3 -c '
import re, sys
name = sys.argv[1]
rows = []
for line in sys.stdin:
    m = re.match(name + r"\{(.*)\} (\S+)$", line.strip())
    if m:
        labels = dict(re.findall(r"(\w+)=\"([^\"]*)\"", m.group(1)))
        rows.append((labels.get("device"), labels.get("backend"), m.group(2)))
for r in sorted(rows):
    print(*r)
' "$1"
}

# Each wait below is for what it checks, bounded (120 s) so that only a hang
# reaches the bound: on a loaded machine scrapes and steps come late.
got=
for _ in $(seq 1 240); do   # the first scrapes
  got=$(query vdev_memory_reserved_bytes)
  [ "$(echo "$got" | grep -c GPU)" -eq 3 ] && break
  sleep 0.5
done
[ "$(echo "$got" | grep -c GPU)" -eq 3 ] && ok || bad "no scrape of 3 GPUs: '$got'; $(tail -5 "$tmp/prom.log"); $(tail -3 "$tmp/demo.out")"
# a scrape after the demo's first steps: the values settle after the first
# step, so Prometheus's equal the endpoint's once it has scraped them
for m in vdev_memory_limit_bytes vdev_memory_reserved_bytes; do
  for _ in $(seq 1 240); do
    a=$(query $m); b=$(served $m)
    [ -n "$a" ] && [ "$a" = "$b" ] && break
    sleep 0.5
  done
  [ -n "$a" ] && [ "$a" = "$b" ] && ok || bad "$m: Prometheus has '$a', the endpoint serves '$b'"
done
# counters arrive too, and rate() over them works (two scrapes in its window)
for _ in $(seq 1 240); do
  r=$(query 'sum%20by%20(device)%20(rate(vdev_ops_total%5B5s%5D))')
  echo "$r" | grep -q "GPU:0" && break
  sleep 0.5
done
echo "$r" | grep -q "GPU:0" && ok || bad "no op rate for GPU:0: '$r'"
for _ in $(seq 1 240); do
  h=$(query 'vdev_op_duration_seconds_count')
  echo "$h" | grep -q "GPU:1" && break
  sleep 0.5
done
echo "$h" | grep -q "GPU:1" && ok || bad "no op-time histogram: '$h'"
for _ in $(seq 1 240); do
  up=$(query 'up')
  echo "$up" | grep -q " 1$" && break
  sleep 0.5
done
echo "$up" | grep -q " 1$" && ok || bad "target not up: '$up'"

finish
