#!/usr/bin/env bash
# cli_grafana.sh — contrib/grafana/vdev-dashboard.json is valid JSON, a
# Grafana dashboard with a Prometheus datasource variable and no declared
# input that nothing uses, every metric its panels query is one the endpoint
# really serves (names taken from a /metrics page of a small run), and every
# panel honours the device filter (the copies panel: copies from or to a
# selected device). Usage: cli_grafana.sh VDEV SHARED
set -u
vdev=$1
here=$(cd "$(dirname "$0")" && pwd)
dash=$here/../contrib/grafana/vdev-dashboard.json
. "${BASH_SOURCE%/*}/testlib.sh"
unset VDEV_PLACEMENT VDEV_LOGICAL_DEVICES VDEV_VISIBLE_DEVICES VDEV_MEMORY_GROWTH VDEV_TRACE_FILE
export VDEV_SIM_GPUS=3x1GiB
tmp=$(mktemp -d)
demo_pid=
cleanup() { [ -n "$demo_pid" ] && kill "$demo_pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT

python3 -m json.tool "$dash" >/dev/null && ok || bad "$dash is not valid JSON"

# The demo serves on a port it picks (port 0) and names it: a port found free
# beforehand could be taken by another test running at the same time.
VDEV_METRICS_ADDR=127.0.0.1:0 "$vdev" demo --epochs 1000 --steps 100 >"$tmp/demo.out" 2>&1 &
demo_pid=$!
port=
: >"$tmp/metrics"
for _ in $(seq 1 240); do   # bounded: 120 s
  [ -n "$port" ] ||
    port=$(sed -n 's|^Metrics: http://127\.0\.0\.1:\([0-9]*\)/metrics$|\1|p' "$tmp/demo.out")
  [ -n "$port" ] &&
    curl -s --max-time 5 "http://127.0.0.1:$port/metrics" >"$tmp/metrics" 2>/dev/null &&
    grep -q vdev_ops_total "$tmp/metrics" && break
  kill -0 "$demo_pid" 2>/dev/null || break
  sleep 0.5
done
grep -q '^# TYPE vdev_' "$tmp/metrics" && ok || bad "no metrics page: $(cat "$tmp/demo.out")"

python3 - "$dash" "$tmp/metrics" <<'PY' && ok || bad "dashboard check (above)"
import json, re, sys
d = json.load(open(sys.argv[1]))
served = set()
for line in open(sys.argv[2]):
    m = re.match(r"# TYPE (\S+) (\S+)", line)
    if m:
        name, typ = m.groups()
        served.add(name)
        if typ == "histogram":
            served |= {name + "_bucket", name + "_sum", name + "_count"}
errors = []
if not 30 <= d.get("schemaVersion", 0) <= 45:
    errors.append("schemaVersion %r" % d.get("schemaVersion"))
vars_ = d.get("templating", {}).get("list", [])
if not any(v.get("type") == "datasource" and v.get("query") == "prometheus" for v in vars_):
    errors.append("no Prometheus datasource variable")
exprs = [t["expr"] for p in d["panels"] for t in p.get("targets", [])]
exprs += [v["definition"] for v in vars_ if "definition" in v]
used = set()
for e in exprs:
    used |= set(re.findall(r"\bvdev_[a-z0-9_]+", e))
for name in sorted(used - served):
    errors.append("metric %s is used by the dashboard but not served" % name)
titles = " ".join(p["title"] for p in d["panels"]).lower()
for want in ["memory in use", "peak", "reserved", "oom", "op rate", "copied"]:
    if want not in titles:
        errors.append("no panel about '%s'" % want)
if not any(re.search(r"sum by \(device\) \(rate\(vdev_ops_total(\{[^}]*\})?\[1m\]\)\)", e)
           for e in exprs):
    errors.append("no op-rate panel summing rate(vdev_ops_total[1m]) by device")
# every declared input is used (an import asks for each one)
text = open(sys.argv[1]).read()
for inp in d.get("__inputs", []):
    if "${%s}" % inp.get("name") not in text:
        errors.append("input %s is declared but no panel uses it" % inp.get("name"))
# every panel honours the device filter: each metric it queries is selected
# by $device (copies by their source or their destination)
for p in d["panels"]:
    for t in p.get("targets", []):
        for m in re.finditer(r"\b(vdev_[a-z0-9_]+)(\{[^}]*\})?", t["expr"]):
            sel = m.group(2) or ""
            if not re.search(r'\b(device|from|to)=~"\$device"', sel):
                errors.append("panel '%s': %s ignores the device filter" % (p["title"], m.group(0)))
    if "copied" in p["title"].lower():
        exprs_p = " ".join(t["expr"] for t in p.get("targets", []))
        for lab in ("from", "to"):
            if '%s=~"$device"' % lab not in exprs_p:
                errors.append("panel '%s': no copies selected by %s=~\"$device\"" % (p["title"], lab))
for e in errors:
    print("FAIL:", e)
print("dashboard: %d panels, metrics used: %s" % (len(d["panels"]), ", ".join(sorted(used))))
sys.exit(1 if errors else 0)
PY

finish
