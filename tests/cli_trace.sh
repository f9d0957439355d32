#!/usr/bin/env bash
# cli_trace.sh — the profiler trace (VDEV_TRACE_FILE) of the demo, checked
# against what the demo itself reports: valid JSON, a named track per device,
# exactly the ops of the placement summary on each device's track, tracks that
# never go backwards and whose events never overlap unless one holds the
# other, each copy on a track of its pair of devices, memory counters for
# every GPU, an OOM instant on GPU:1 under --split, and a write failure
# (/dev/full) said once on standard error. Then a program built here that
# copies between three pairs of GPUs from eight threads at once (its copies
# overlap in time, on tracks that do not), run while a second process is
# given the same file: the second is refused with the message that names
# the first, and the first's trace is whole; the same for its allocation
# trace (VDEV_ALLOC_TRACE). And the file names' placeholders: %p, %r (the
# launcher's rank), a bad one refused, in both variables.
# Usage: cli_trace.sh VDEV SHARED [CC LIBVDEV "CFLAGS"]
set -u
vdev=$1
cc=${3:-cc}
lib=${4:-$(dirname "$vdev")/libvdev.so}
cflags=${5:-}
src=$(cd "$(dirname "$0")/.." && pwd)
command -v python3 >/dev/null || { echo "python3 not found: skipped"; exit 77; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
. "${BASH_SOURCE%/*}/testlib.sh"
unset VDEV_SIM_GPUS VDEV_PLACEMENT VDEV_LOGICAL_DEVICES VDEV_VISIBLE_DEVICES VDEV_MEMORY_GROWTH \
      VDEV_TRACE_FILE VDEV_ALLOC_TRACE VDEV_PLACEMENT_REPORT OMPI_COMM_WORLD_RANK PMIX_RANK PMI_RANK

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
# tracks: "/device:GPU:1 (sim)" for ops, "copies /device:GPU:0 -> /device:GPU:1"
# (then " (2)", " (3)"... for copies that overlap those before) for copies
ops_tid, copy_pair, copy_names = {}, {}, []
for e in events:
    if e.get("ph") == "M" and e.get("name") == "thread_name":
        nm = e["args"]["name"]
        m = re.match(r"copies (/device:\S+) -> (/device:\S+)(?: \((\d+)\))?$", nm)
        if m:
            check(m.group(3) is None or int(m.group(3)) >= 2, "odd copy track name " + nm)
            check(e["tid"] not in copy_pair, "two names for track %d" % e["tid"])
            copy_pair[e["tid"]] = (m.group(1), m.group(2))
            copy_names.append(nm)
        else:
            dev = nm.split(" ")[0]
            check(dev not in ops_tid, "two tracks for " + dev); ops_tid[dev] = e["tid"]
check(len(set(copy_names)) == len(copy_names), "two copy tracks of one name")
# the summary the demo prints (stdout; a later, empty one at exit is ignored)
parts = [p.split("Bytes copied", 1)[0] for p in text.split("Placement summary")[1:]]
summary = max(parts, key=len) if parts else ""
rows = re.findall(r"^\s+(\w+)\s+(/device:[A-Z]+:\d+)\s+(\d+)\s*$", summary, re.M)
check(len(rows) > 0 or not want_summary, "no rows in the placement summary")
devs = sorted(set(re.findall(r"^(/device:[A-Z]+:\d+) ", text, re.M)) | set(d for _, d, _ in rows))
for d in devs:
    check(d in ops_tid, "no track named for " + d)
check(len(ops_tid) >= 2, "fewer than two device tracks")
check(len(set(ops_tid.values()) | set(copy_pair)) == len(ops_tid) + len(copy_pair),
      "two tracks share a tid")
# every op the placement summary counts, as that many X events on its track
count = collections.Counter((e["name"], e["tid"]) for e in events if e.get("ph") == "X")
for op, dev, k in rows:
    got = count.get((op, ops_tid.get(dev)), 0)
    check(got == int(k), "%s on %s: summary counts %s, trace has %d" % (op, dev, k, got))
summed = sum(int(k) for _, _, k in rows)
traced = sum(v for (nm, tid), v in count.items() if nm != "Copy")
check(traced == summed or not want_summary, "trace has %d op events, the summary %d" % (traced, summed))
# per track: file order is time order, and two events overlap only when one
# holds the other (times are whole nanoseconds: compared exactly, bar the
# float parse)
by_tid = collections.defaultdict(list)
for e in events:
    if e.get("ph") == "X":
        check(e["dur"] >= 0 and e["ts"] >= 0, "negative time: %r" % e)
        by_tid[e["tid"]].append(e)
eps = 1e-6
for tid, es in by_tid.items():
    check(all(a["ts"] <= b["ts"] for a, b in zip(es, es[1:])), "track %d goes backwards" % tid)
    stack = []
    for b in sorted(es, key=lambda e: (e["ts"], -e["dur"])):
        while stack and stack[-1]["ts"] + stack[-1]["dur"] <= b["ts"] + eps:
            stack.pop()
        if stack and b["ts"] + b["dur"] > stack[-1]["ts"] + stack[-1]["dur"] + eps:
            a = stack[-1]
            check(False, "track %d: %s at %.3f+%.3f overlaps %s at %.3f+%.3f"
                  % (tid, b["name"], b["ts"], b["dur"], a["name"], a["ts"], a["dur"]))
            break
        stack.append(b)
# copies: each on a track of its pair, once; every pair of the demo's "Bytes
# copied" table has some
copies = [e for e in events if e.get("ph") == "X" and e["name"] == "Copy"]
for e in copies:
    pair = (e["args"]["from"], e["args"]["to"])
    check(copy_pair.get(e["tid"]) == pair, "copy %r on track %r" % (pair, copy_pair.get(e["tid"])))
    check(e["args"]["bytes"] > 0, "copy %r of no bytes" % (pair,))
check(all(e.get("cat") == "copy" for e in events if e.get("tid") in copy_pair and e.get("ph") == "X"),
      "not a copy on a copy track")
copied = re.findall(r"^\s+(/device:\S+)\s+-> (/device:\S+)\s", text, re.M)
for f, t in copied:
    check(any((e["args"]["from"], e["args"]["to"]) == (f, t) for e in copies),
          "no Copy event %s -> %s" % (f, t))
if "--copies" in args:
    want = int(args[args.index("--copies") + 1])
    check(len(copies) == want, "%d copies in the trace, %d made" % (len(copies), want))
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

# A program of our own, built with this build's compiler and flags: it starts
# vdev, says "ready", waits for its standard input to end, then copies from
# eight threads at once, two on each pair: CPU:0 -> GPU:0, CPU:0 -> GPU:1,
# GPU:1 -> CPU:0 (copies to and from the host take their time on the thread
# that asks, so they overlap), GPU:0 -> GPU:2; prints the pairs as the demo's
# "Bytes copied" table does, and shuts down.
cat > "$tmp/copies.c" <<'C'
#include "vdev.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

#define THREADS 8
#define EACH 100
static const char *const from[4] = {"CPU:0", "CPU:0", "GPU:1", "GPU:0"};
static const char *const to[4] = {"GPU:0", "GPU:1", "CPU:0", "GPU:2"};
static vdev_tensor_t *src[THREADS];
static int failed[THREADS];

static void *copier(void *arg)
{
    int i = (int)(intptr_t)arg;
    for (int k = 0; k < EACH; k++) {
        vdev_tensor_t *c = vdev_tensor_to(src[i], to[i % 4]);
        failed[i] += c == NULL;
        vdev_tensor_free(c);
    }
    return NULL;
}

int main(void)
{
    if (vdev_init() != VDEV_OK) {
        fprintf(stderr, "copies: start-up: %s\n", vdev_last_error());
        return 1;
    }
    printf("ready\n");
    fflush(stdout);
    while (getchar() != EOF)
        ;
    static const int64_t shape[2] = {512, 1024}; /* 2 MiB */
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++) {
        if (vdev_device_push(from[i % 4]) != VDEV_OK)
            return 1;
        src[i] = vdev_tensor_fill(shape, 2, VDEV_F32, (float)i);
        vdev_device_pop();
        if (!src[i])
            return 1;
    }
    for (int i = 0; i < THREADS; i++)
        if (pthread_create(&t[i], NULL, copier, (void *)(intptr_t)i) != 0)
            return 1;
    int bad = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(t[i], NULL);
        bad += failed[i];
        vdev_tensor_free(src[i]);
    }
    printf("Bytes copied\n");
    for (int p = 0; p < 4; p++)
        printf("  /device:%s -> /device:%s  %llu\n", from[p], to[p],
               (unsigned long long)vdev_placement_bytes_copied(from[p], to[p]));
    vdev_shutdown();
    if (bad)
        fprintf(stderr, "copies: %d copies failed\n", bad);
    return bad != 0;
}
C
# shellcheck disable=SC2086 # cflags: several words
if "$cc" $cflags -I"$src/include" -o "$tmp/copies" "$tmp/copies.c" "$lib" -lpthread \
     -Wl,-rpath,"$(dirname "$lib")" >"$tmp/cc.txt" 2>&1; then
  ok
  # one file, two processes: the first holds it while the second is refused
  mkfifo "$tmp/go"
  VDEV_SIM_GPUS=3x1GiB VDEV_TRACE_FILE=$tmp/same.json VDEV_ALLOC_TRACE=$tmp/same.trace \
    "$tmp/copies" <"$tmp/go" >"$tmp/copies.txt" 2>"$tmp/copies.err" & first=$!
  exec 3>"$tmp/go"
  for _ in $(seq 1 1200); do # until it says so, or ends (120 s: a hang's bound)
    grep -q ready "$tmp/copies.txt" && break
    kill -0 $first 2>/dev/null || break
    sleep 0.1
  done
  grep -q ready "$tmp/copies.txt" && ok || bad "the first process did not start: $(cat "$tmp/copies.err")"
  placeholders='(%p: the process id, %r: the MPI rank, %%: a %)'
  out=$(VDEV_SIM_GPUS=3x1GiB VDEV_TRACE_FILE=$tmp/same.json "$vdev" demo --steps 1 2>&1 >/dev/null); rc=$?
  busy="VDEV_TRACE_FILE=\"$tmp/same.json\": process $first is writing this trace; give each process its own file"
  want="vdev demo: start-up: $busy, e.g. VDEV_TRACE_FILE=$tmp/same.%p.json $placeholders"
  [ $rc -eq 1 ] && [ "$out" = "$want" ] && ok || bad "second process: rc $rc: '$out', expected '$want'"
  # under mpirun, the rank
  out=$(OMPI_COMM_WORLD_RANK=1 VDEV_SIM_GPUS=3x1GiB VDEV_TRACE_FILE=$tmp/same.json \
        "$vdev" devices 2>&1 >/dev/null); rc=$?
  want="vdev devices: start-up failed: $busy, e.g. VDEV_TRACE_FILE=$tmp/same.%r.json $placeholders"
  [ $rc -eq 1 ] && [ "$out" = "$want" ] && ok || bad "second process under MPI: rc $rc: '$out', expected '$want'"
  # the allocation trace is held the same way
  out=$(VDEV_SIM_GPUS=3x1GiB VDEV_ALLOC_TRACE=$tmp/same.trace "$vdev" devices 2>&1 >/dev/null); rc=$?
  want="vdev devices: start-up failed: VDEV_ALLOC_TRACE: allocation trace \"$tmp/same.trace\": process"
  want="$want $first is writing this trace; give each process its own file, e.g."
  want="$want VDEV_ALLOC_TRACE=$tmp/same.%p.trace $placeholders"
  [ $rc -eq 1 ] && [ "$out" = "$want" ] && ok || bad "second allocation trace: rc $rc: '$out', expected '$want'"
  exec 3>&-
  wait $first; rc=$?
  [ $rc -eq 0 ] && ok || bad "copies exit $rc: $(cat "$tmp/copies.err")"
  python3 "$tmp/check.py" "$tmp/same.json" "$tmp/copies.txt" --no-summary --copies 800 && ok ||
    bad "concurrent copies' trace"
  # one header, of the first process, and a trace that replays
  heads=$(grep -c '^# trace' "$tmp/same.trace")
  [ "$heads" = 1 ] && grep -q "^# trace v1 source=vdev pid=$first " "$tmp/same.trace" &&
    "$vdev" replay --repeats 1 "$tmp/same.trace" >/dev/null 2>&1 && ok ||
    bad "the first process's allocation trace: $heads headers, or it does not replay"
else
  bad "cannot build the copies program: $(cat "$tmp/cc.txt")"
fi

# placeholders: %p, the process id; %r, the launcher's rank (0 without one)
VDEV_SIM_GPUS=3x1GiB VDEV_TRACE_FILE=$tmp/pid.%p.json "$vdev" devices >/dev/null 2>"$tmp/err.txt" & pid=$!
wait $pid; rc=$?
[ $rc -eq 0 ] && python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$tmp/pid.$pid.json" && ok ||
  bad "%p: rc $rc, no trace $tmp/pid.$pid.json: $(ls "$tmp") $(cat "$tmp/err.txt")"
for r in "OMPI_COMM_WORLD_RANK=3 3" "PMIX_RANK=4 4" "PMI_RANK=5 5" "X=1 0"; do
  env ${r% *} VDEV_SIM_GPUS=3x1GiB VDEV_TRACE_FILE=$tmp/rank.%r.json "$vdev" devices >/dev/null 2>&1; rc=$?
  [ $rc -eq 0 ] && python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$tmp/rank.${r#* }.json" && ok ||
    bad "%r with ${r% *}: rc $rc, no trace $tmp/rank.${r#* }.json"
done
# and in VDEV_ALLOC_TRACE's name
VDEV_SIM_GPUS=3x1GiB PMIX_RANK=2 VDEV_ALLOC_TRACE=$tmp/at.%p.%r.%%.trace "$vdev" devices >/dev/null 2>"$tmp/err.txt" & pid=$!
wait $pid; rc=$?
[ $rc -eq 0 ] && grep -q "^# trace v1 source=vdev pid=$pid " "$tmp/at.$pid.2.%.trace" && ok ||
  bad "VDEV_ALLOC_TRACE placeholders: rc $rc, no trace $tmp/at.$pid.2.%.trace: $(ls "$tmp") $(cat "$tmp/err.txt")"
out=$(VDEV_SIM_GPUS=3x1GiB VDEV_ALLOC_TRACE=$tmp/bad.%q.trace "$vdev" devices 2>&1 >/dev/null); rc=$?
want="vdev devices: start-up failed: VDEV_ALLOC_TRACE: allocation trace \"$tmp/bad.%q.trace\": \"%q\" is"
want="$want not a placeholder (%p: the process id, %r: the MPI rank, %%: a %)"
[ $rc -eq 1 ] && [ "$out" = "$want" ] && [ ! -e "$tmp/bad.%q.trace" ] && ok ||
  bad "VDEV_ALLOC_TRACE %q: rc $rc: '$out', expected '$want'"
out=$(VDEV_SIM_GPUS=3x1GiB VDEV_TRACE_FILE=$tmp/bad.%q.json "$vdev" devices 2>&1 >/dev/null); rc=$?
want="vdev devices: start-up failed: VDEV_TRACE_FILE=\"$tmp/bad.%q.json\": \"%q\" is not a placeholder"
want="$want (%p: the process id, %r: the MPI rank, %%: a %)"
[ $rc -eq 1 ] && [ "$out" = "$want" ] && [ ! -e "$tmp/bad.%q.json" ] && ok ||
  bad "%q: rc $rc: '$out', expected '$want'"

finish
