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

vport=$(free_port)
VDEV_METRICS_ADDR=127.0.0.1:$vport "$vdev" demo --epochs 1000 --steps 100 >"$tmp/demo.out" 2>&1 &
demo_pid=$!
pport=$(free_port)
cat >"$tmp/prometheus.yml" <<YML
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: vdev
    static_configs:
      - targets: ['127.0.0.1:$vport']
YML
prometheus --config.file="$tmp/prometheus.yml" --storage.tsdb.path="$tmp/tsdb" \
  --web.listen-address="127.0.0.1:$pport" >"$tmp/prom.log" 2>&1 &
prom_pid=$!

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

got=
for _ in $(seq 1 40); do   # bounded: about 20 s for the first scrapes
  got=$(query vdev_memory_reserved_bytes)
  [ "$(echo "$got" | grep -c GPU)" -eq 3 ] && break
  sleep 0.5
done
[ "$(echo "$got" | grep -c GPU)" -eq 3 ] && ok || bad "no scrape of 3 GPUs: '$got'; $(tail -5 "$tmp/prom.log"); $(tail -3 "$tmp/demo.out")"
sleep 2 # a scrape after the demo's first steps
for m in vdev_memory_limit_bytes vdev_memory_reserved_bytes; do
  a=$(query $m); b=$(served $m)
  [ -n "$a" ] && [ "$a" = "$b" ] && ok || bad "$m: Prometheus has '$a', the endpoint serves '$b'"
done
# counters arrive too, and rate() over them works
r=$(query 'sum%20by%20(device)%20(rate(vdev_ops_total%5B5s%5D))')
echo "$r" | grep -q "GPU:0" && ok || bad "no op rate for GPU:0: '$r'"
h=$(query 'vdev_op_duration_seconds_count')
echo "$h" | grep -q "GPU:1" && ok || bad "no op-time histogram: '$h'"
up=$(query 'up')
echo "$up" | grep -q " 1$" && ok || bad "target not up: '$up'"

finish
