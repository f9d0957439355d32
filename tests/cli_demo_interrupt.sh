#!/usr/bin/env bash
# cli_demo_interrupt.sh — Ctrl-C (SIGINT) during `vdev demo`: without
# --report, into a file, the lines printed so far are in it, stderr is the
# one line "vdev demo: interrupted" and the process ends by SIGINT, for every
# scenario. During `vdev demo --report DIR`:
# the demo says on stderr that it closes the trace where the run is and
# draws it, DIR/run.json is then whole JSON (its events up to the
# interruption, then its end), DIR/memory.svg and DIR/placement.svg are
# drawn from it and named on stdout, nothing else is left in DIR, the
# allocation trace (VDEV_ALLOC_TRACE) holds whole lines up to the
# interruption, and the process ends by SIGINT as Ctrl-C would end it.
# SIGTERM does the same with "terminated" for "interrupted", and the process
# ends by SIGTERM. Usage: cli_demo_interrupt.sh VDEV SHARED
set -u
vdev=$1
command -v python3 >/dev/null || { echo "python3 not found: skipped"; exit 77; }
. "${BASH_SOURCE%/*}/testlib.sh"
unset VDEV_PLACEMENT VDEV_LOGICAL_DEVICES VDEV_VISIBLE_DEVICES VDEV_MEMORY_GROWTH VDEV_TRACE_FILE \
      VDEV_ALLOC_TRACE VDEV_METRICS_ADDR VDEV_PLACEMENT_REPORT
export VDEV_SIM_GPUS=3x1GiB
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

# interrupt.py VDEV OUT WHEN ARGS...: runs `vdev demo ARGS...` (SIGINT at its
# default, whatever this shell was given) with stdout and stderr into OUT.out
# and OUT.err, sends SIGINT once WHEN holds ("json:FILE": FILE has grown past
# 200 kB; "lines": the third line of progress is out; either way after at
# most 300 s, a bound that only a hang reaches), and prints "rc N"
# (SIG=SIGTERM in the environment: SIGTERM instead)
cat >"$tmp/interrupt.py" <<'PY'
import os, signal, subprocess, sys, time
vdev, o, when, args = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]


def ready():
    if when == "lines":
        with open(o + ".out", "rb") as f:
            return f.read().count(b"\n") >= 3
    try:
        return os.path.getsize(when[len("json:"):]) > 200000
    except OSError:
        return False


with open(o + ".out", "wb") as out, open(o + ".err", "wb") as err:
    p = subprocess.Popen([vdev, "demo"] + args, stdout=out, stderr=err,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    end = time.monotonic() + 300
    while time.monotonic() < end and p.poll() is None and not ready():
        time.sleep(0.05)
    p.send_signal(getattr(signal, os.environ.get("SIG", "SIGINT")))
    try:
        print("rc", p.wait(timeout=120))
    except subprocess.TimeoutExpired:
        p.kill(); print("rc timeout")
PY
for sig in "SIGINT:-2:interrupted:Ctrl-C" "SIGTERM:-15:terminated:a second SIGTERM or Ctrl-C"; do
IFS=: read -r sig code word again <<<"$sig"
rm -rf "$tmp/rep" "$tmp/alloc.trace"
rc=$(SIG=$sig VDEV_ALLOC_TRACE=$tmp/alloc.trace python3 "$tmp/interrupt.py" "$vdev" "$tmp/rep" \
     "json:$tmp/rep/run.json" --epochs 1000 --report "$tmp/rep")
[ "$rc" = "rc $code" ] && ok || bad "exit: $rc, expected death by $sig ($code): $(cat "$tmp/rep.err")"
want="vdev demo: $word: closing the trace $tmp/rep/run.json where the run is and drawing it ($again again quits at once)"
grep -qxF -- "$want" "$tmp/rep.err" && ok || bad "stderr lacks '$want': $(cat "$tmp/rep.err")"
grep -vxF -- "$want" "$tmp/rep.err" | grep -q . && bad "more on stderr: $(cat "$tmp/rep.err")" || ok
for f in memory placement; do
  grep -qxF "Report: $tmp/rep/$f.svg" "$tmp/rep.out" && ok || bad "stdout does not name $f.svg: $(tail -5 "$tmp/rep.out")"
done
python3 - "$tmp/rep" <<'PY' && ok || bad "the report after the interruption (above)"
import json, os, sys, xml.etree.ElementTree as E
d = sys.argv[1]
events = json.load(open(os.path.join(d, "run.json")))   # whole: it has its end
assert sum(1 for e in events if e.get("ph") == "X") > 100, "too few ops in the trace"
for f in ("memory.svg", "placement.svg"):
    assert E.parse(os.path.join(d, f)).getroot().tag.endswith("svg"), f
assert sorted(os.listdir(d)) == ["memory.svg", "placement.svg", "run.json"], os.listdir(d)
PY
# the allocation trace (VDEV_ALLOC_TRACE) is written up to the interruption,
# in whole lines: `vdev replay` reads it all, with no line to drop
[ "$(tail -c 1 "$tmp/alloc.trace" | od -An -c | tr -d ' ')" = '\n' ] && ok ||
  bad "the allocation trace ends mid-line: '$(tail -c 20 "$tmp/alloc.trace")'"
"$vdev" replay --repeats 1 "$tmp/alloc.trace" >"$tmp/replay.out" 2>"$tmp/replay.err" &&
  [ ! -s "$tmp/replay.err" ] && ok || bad "replay of the allocation trace: $(cat "$tmp/replay.err")"
done


# each scenario: its simulated GPUs, its options, the start of its first line
for c in "3x1GiB::--epochs 100000:Devices" "3x1GiB:--tf-placement:--epochs 100000:Devices" \
         "1x8GiB:--split:--epochs 100000:Devices" "3x1GiB:--mirrored:--epochs 100000:Replicas" \
         "1x3GiB:--priority:--steps 100000:One GPU"; do
  IFS=: read -r gpus s opts first <<<"$c"
  rc=$(VDEV_SIM_GPUS=$gpus python3 "$tmp/interrupt.py" "$vdev" "$tmp/plain" lines $s $opts)
  [ "$rc" = "rc -2" ] && ok || bad "demo $s: exit: $rc, expected death by SIGINT (-2)"
  [ "$(grep . "$tmp/plain.err")" = "vdev demo: interrupted" ] && ok ||
    bad "demo $s: stderr: $(cat "$tmp/plain.err")"
  [[ $(head -1 "$tmp/plain.out") == "$first"* ]] && [ "$(wc -l <"$tmp/plain.out")" -ge 3 ] && ok ||
    bad "demo $s: stdout lost its lines: '$(cat "$tmp/plain.out")'"
done
# SIGTERM without --report: the lines so far, one line on stderr, death by SIGTERM
rc=$(SIG=SIGTERM python3 "$tmp/interrupt.py" "$vdev" "$tmp/plain" lines --epochs 100000)
[ "$rc" = "rc -15" ] && ok || bad "demo: exit: $rc, expected death by SIGTERM (-15)"
[ "$(grep . "$tmp/plain.err")" = "vdev demo: terminated" ] && ok || bad "demo: stderr: $(cat "$tmp/plain.err")"
[[ $(head -1 "$tmp/plain.out") == Devices* ]] && [ "$(wc -l <"$tmp/plain.out")" -ge 3 ] && ok ||
  bad "demo: stdout lost its lines: '$(cat "$tmp/plain.out")'"
finish
