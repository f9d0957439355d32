#!/usr/bin/env bash
# cli_trace.sh — the profiler trace (VDEV_TRACE_FILE) of the demo, checked
# against what the demo itself reports: valid JSON, a named track per device,
# exactly the ops of the placement summary on each device's track, tracks that
# never go backwards or overlap, copies on both sides, memory counters for
# every GPU, an OOM instant on GPU:1 under --split, and a write failure
# (/dev/full) said once on standard error.
# Usage: cli_trace.sh VDEV SHARED
set -u
vdev=$1
command -v python3 >/dev/null || { echo "python3 not found: skipped"; exit 77; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
. "${BASH_SOURCE%/*}/testlib.sh"
unset VDEV_SIM_GPUS VDEV_PLACEMENT VDEV_LOGICAL_DEVICES VDEV_VISIBLE_DEVICES VDEV_MEMORY_GROWTH \
      VDEV_TRACE_FILE VDEV_PLACEMENT_REPORT

# check.py TRACE OUTPUT [--oom DEVICE] [--no-summary]: prints one line per
# failure and "checks N" at the end; exits 1 when anything failed. Only the
# plain demo prints the placement summary (VDEV_PLACEMENT_REPORT's report at
# exit comes after shutdown has reset the counts), so the other scenarios are
# checked with --no-summary.
cat > "$tmp/check.py" <<'PY'
import json, re, sys, collections
trace, text = sys.argv[1], open(sys.argv[2]).read()
args = sys.argv[3:]
oom_dev = args[args.index("--oom") + 1] if "--oom" in args else None
want_summary = "--no-summary" not in args
fails, n = [], 0
def check(cond, msg):
    global n
    n += 1
    if not cond:
        fails.append(msg)
try:
    events = json.load(open(trace))
except ValueError as e:
    print("FAIL: not valid JSON: %s" % e); sys.exit(1)
check(isinstance(events, list) and len(events) > 0, "not a non-empty JSON array")
# one event per line, as vdev plot relies on
lines = [l for l in open(trace).read().split("\n") if l not in ("[", "]", "")]
check(len(lines) == len(events), "not one event per line (%d lines, %d events)" % (len(lines), len(events)))
# tracks: "/device:GPU:1 (sim)" for ops, "/device:GPU:1 (sim) copies" for copies
ops_tid, copy_tid = {}, {}
for e in events:
    if e.get("ph") == "M" and e.get("name") == "thread_name":
        nm = e["args"]["name"]
        dev = nm.split(" ")[0]
        if nm.endswith(" copies"):
            check(dev not in copy_tid, "two copy tracks for " + dev); copy_tid[dev] = e["tid"]
        else:
            check(dev not in ops_tid, "two tracks for " + dev); ops_tid[dev] = e["tid"]
# the summary the demo prints (stdout; a later, empty one at exit is ignored)
parts = [p.split("Bytes copied", 1)[0] for p in text.split("Placement summary")[1:]]
summary = max(parts, key=len) if parts else ""
rows = re.findall(r"^\s+(\w+)\s+(/device:[A-Z]+:\d+)\s+(\d+)\s*$", summary, re.M)
check(len(rows) > 0 or not want_summary, "no rows in the placement summary")
devs = sorted(set(re.findall(r"^(/device:[A-Z]+:\d+) ", text, re.M)) | set(d for _, d, _ in rows))
for d in devs:
    check(d in ops_tid, "no track named for " + d)
check(len(ops_tid) >= 2, "fewer than two device tracks")
check(len(set(ops_tid.values()) | set(copy_tid.values())) == len(ops_tid) + len(copy_tid),
      "two tracks share a tid")
# every op the placement summary counts, as that many X events on its track
count = collections.Counter((e["name"], e["tid"]) for e in events if e.get("ph") == "X")
for op, dev, k in rows:
    got = count.get((op, ops_tid.get(dev)), 0)
    check(got == int(k), "%s on %s: summary counts %s, trace has %d" % (op, dev, k, got))
summed = sum(int(k) for _, _, k in rows)
traced = sum(v for (nm, tid), v in count.items() if nm != "Copy")
check(traced == summed or not want_summary, "trace has %d op events, the summary %d" % (traced, summed))
# per track: file order is time order, and no event starts before the previous ended
by_tid = collections.defaultdict(list)
for e in events:
    if e.get("ph") == "X":
        check(e["dur"] >= 0 and e["ts"] >= 0, "negative time: %r" % e)
        by_tid[e["tid"]].append(e)
for tid, es in by_tid.items():
    check(all(a["ts"] <= b["ts"] for a, b in zip(es, es[1:])), "track %d goes backwards" % tid)
    es = sorted(es, key=lambda e: e["ts"])
    for a, b in zip(es, es[1:]):
        if b["ts"] + 1.0 < a["ts"] + a["dur"]:
            check(False, "track %d: %s at %.3f overlaps %s at %.3f+%.3f"
                  % (tid, b["name"], b["ts"], a["name"], a["ts"], a["dur"]))
            break
# copies: on both sides, equal bytes, matching the demo's "Bytes copied" table
copies = [e for e in events if e.get("ph") == "X" and e["name"] == "Copy"]
sides = collections.defaultdict(list)
for e in copies:
    sides[(e["ts"], e["args"]["from"], e["args"]["to"])].append(e)
for key, es in sides.items():
    check(len(es) % 2 == 0, "copy %r not on both sides" % (key,))
    tids = sorted(set(e["tid"] for e in es))
    want = sorted({copy_tid.get(key[1]), copy_tid.get(key[2])})
    check(tids == want, "copy %r on tracks %r, not %r" % (key, tids, want))
    check(len(set(e["args"]["bytes"] for e in es)) == 1, "copy %r: bytes differ" % (key,))
copied = re.findall(r"^\s+(/device:\S+)\s+-> (/device:\S+)\s", text, re.M)
for f, t in copied:
    check(any(k[1] == f and k[2] == t for k in sides), "no Copy event %s -> %s" % (f, t))
# memory counters for every GPU, with both series
mem = collections.defaultdict(int)
for e in events:
    if e.get("ph") == "C":
        check(e["name"].startswith("memory "), "odd counter " + e["name"])
        check("in_use" in e["args"] and "reserved" in e["args"], "counter without in_use/reserved")
        mem[e["name"][7:]] += 1
for d in set(devs) | set(ops_tid):
    if ":GPU:" in d:
        check(mem[d] > 0, "no memory counter for " + d)
# OOMs
ooms = [e for e in events if e.get("ph") == "i" and e["name"] == "OOM"]
if oom_dev:
    check(any(e["tid"] == ops_tid.get(oom_dev) and e["args"]["bytes"] > 0 for e in ooms),
          "no OOM instant on " + oom_dev)
for f in fails[:20]:
    print("FAIL: " + f)
print("checks %d, failed %d" % (n, len(fails)))
sys.exit(1 if fails else 0)
PY

VDEV_SIM_GPUS=3x1GiB VDEV_TRACE_FILE=$tmp/run.json VDEV_PLACEMENT_REPORT=1 \
  "$vdev" demo --epochs 1 --steps 5 >"$tmp/out.txt" 2>"$tmp/err.txt"; rc=$?
[ $rc -eq 0 ] && ok || bad "demo exit $rc: $(tail -5 "$tmp/err.txt")"
python3 "$tmp/check.py" "$tmp/run.json" "$tmp/out.txt" && ok || bad "demo trace"

VDEV_SIM_GPUS=3x1GiB VDEV_TRACE_FILE=$tmp/tf.json VDEV_PLACEMENT_REPORT=1 \
  "$vdev" demo --tf-placement --steps 3 >"$tmp/tf.txt" 2>"$tmp/err.txt"; rc=$?
[ $rc -eq 0 ] && ok || bad "tf-placement exit $rc: $(tail -5 "$tmp/err.txt")"
python3 "$tmp/check.py" "$tmp/tf.json" "$tmp/tf.txt" --no-summary && ok || bad "tf-placement trace"

VDEV_SIM_GPUS=1x8GiB VDEV_TRACE_FILE=$tmp/split.json VDEV_PLACEMENT_REPORT=1 \
  "$vdev" demo --split --steps 8 >"$tmp/split.txt" 2>"$tmp/err.txt"; rc=$?
[ $rc -eq 0 ] && ok || bad "split exit $rc: $(tail -5 "$tmp/err.txt")"
python3 "$tmp/check.py" "$tmp/split.json" "$tmp/split.txt" --oom /device:GPU:1 --no-summary && ok || bad "split trace"

# errors: an empty name, an unwritable path
out=$(VDEV_SIM_GPUS=3x1GiB VDEV_TRACE_FILE= "$vdev" demo --steps 1 2>&1); rc=$?
[ $rc -ne 0 ] && echo "$out" | grep -q VDEV_TRACE_FILE && ok || bad "empty VDEV_TRACE_FILE: rc $rc: $out"
out=$(VDEV_SIM_GPUS=3x1GiB VDEV_TRACE_FILE=$tmp/no/such/dir/run.json "$vdev" demo --steps 1 2>&1); rc=$?
[ $rc -ne 0 ] && echo "$out" | grep -q "$tmp/no/such/dir/run.json" && ok || bad "unwritable trace: rc $rc: $out"

# a full disk: said once on standard error, naming the file and the cause
if [ -w /dev/full ]; then
  out=$(VDEV_SIM_GPUS=3x1GiB VDEV_TRACE_FILE=/dev/full "$vdev" demo --epochs 1 --steps 5 2>&1 >/dev/null)
  n=$(printf '%s\n' "$out" | grep -c '^vdev: warning: VDEV_TRACE_FILE="/dev/full": write failed: No space left on device (the trace is incomplete)$')
  [ "$n" -eq 1 ] && ok || bad "/dev/full: $n warnings in: $out"
fi

finish
