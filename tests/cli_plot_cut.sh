#!/usr/bin/env bash
# cli_plot_cut.sh — `vdev plot` on traces cut short, as a killed process
# leaves them: a demo trace cut at every byte offset of its last events and
# in the middle of numbers draws (exit 0) the whole events before the cut,
# and says so in one note naming the last line; the demo killed by SIGKILL,
# SIGTERM and SIGINT while it traces leaves a trace that draws. A malformed
# line that is not the last is still an error naming it. Every run is under
# `timeout`. Usage: cli_plot_cut.sh VDEV SHARED
set -u
vdev=$1
command -v python3 >/dev/null || { echo "python3 not found: skipped"; exit 77; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
. "${BASH_SOURCE%/*}/testlib.sh"
unset VDEV_SIM_GPUS VDEV_PLACEMENT VDEV_LOGICAL_DEVICES VDEV_VISIBLE_DEVICES VDEV_MEMORY_GROWTH \
      VDEV_TRACE_FILE VDEV_PLACEMENT_REPORT

VDEV_SIM_GPUS=3x1GiB VDEV_TRACE_FILE=$tmp/run.json "$vdev" demo --epochs 1 --steps 2 >/dev/null 2>&1 \
  && ok || bad "demo failed"

# cut.py VDEV TRACE DIR: cuts TRACE at every offset of its last 4 events and
# of its closing "]", and in the middle of 40 numbers spread over the file;
# plots each cut and checks exit 0, a well-formed picture every 16th cut,
# and the note: "FILE:LINE: ..." with LINE the last line of the cut and the
# count of whole events before the cut (a cut that keeps the "]" is whole:
# no note). Prints one line per failure and "cuts N".
cat > "$tmp/cut.py" <<'PY'
import json, os, re, subprocess, sys, xml.etree.ElementTree as E
vdev, trace, d = sys.argv[1:4]
data = open(trace, "rb").read()
starts = [0] + [i + 1 for i, c in enumerate(data) if c == 0x0A]
events = [i for i in range(len(starts) - 1)
          if data[starts[i]:starts[i + 1]].strip() not in (b"[", b"]", b"")]
first = starts[events[-4]]
offsets = set(range(first, len(data) + 1))
numbers = [m.start() + 1 for m in re.finditer(rb"[0-9](?=[0-9.])", data[:first])]
step = max(1, len(numbers) // 40)
offsets |= set(numbers[::step][:40])
def whole(prefix):
    n = 0
    for l in prefix.split(b"\n"):
        l = l.strip().rstrip(b",")
        if l in (b"[", b"]", b""):
            continue
        try:
            json.loads(l)
            n += 1
        except ValueError:
            pass
    return n
fails = []
path = os.path.join(d, "cut.json")
for k, off in enumerate(sorted(offsets)):
    prefix = data[:off]
    open(path, "wb").write(prefix)
    svg = os.path.join(d, "cut.svg")
    try:
        p = subprocess.run([vdev, "plot", path, "-o", svg], capture_output=True, timeout=120)
    except subprocess.TimeoutExpired:
        fails.append("cut at %d: hung" % off); continue
    err = p.stderr.decode()
    if p.returncode != 0:
        fails.append("cut at %d: exit %d: %s" % (off, p.returncode, err.strip())); continue
    complete = b"\n]" in prefix
    lines = prefix.count(b"\n") + (0 if prefix.endswith(b"\n") else 1)
    if complete:
        if err:
            fails.append("cut at %d (complete): stderr %r" % (off, err))
    else:
        m = re.fullmatch(r"vdev plot: note: (.*):(\d+): the trace ends here, without its closing "
                         r"\"\]\" \(the process that wrote it did not finish\): drew its (\d+) "
                         r"whole events?\n", err)
        if not m or m.group(1) != path:
            fails.append("cut at %d: note %r" % (off, err))
        else:
            if int(m.group(2)) != lines:
                fails.append("cut at %d: note names line %s, the cut is on line %d" % (off, m.group(2), lines))
            if int(m.group(3)) != whole(prefix):
                fails.append("cut at %d: drew %s events, %d are whole" % (off, m.group(3), whole(prefix)))
    if k % 16 == 0:
        try:
            E.parse(svg)
        except Exception as e:
            fails.append("cut at %d: picture not well-formed: %s" % (off, e))
for f in fails[:20]:
    print("FAIL: " + f)
print("cuts %d, failed %d" % (len(offsets), len(fails)))
sys.exit(1 if fails else 0)
PY
python3 "$tmp/cut.py" "$vdev" "$tmp/run.json" "$tmp" && ok || bad "cut traces"

# a malformed line before the last is an error naming it, cut or not
n=$(($(wc -l <"$tmp/run.json") / 2))
{ head -n $((n - 1)) "$tmp/run.json"; echo '{"name":"MatMul","ph":"X","ts":1,'; \
  sed -n "$((n + 1)),\$p" "$tmp/run.json"; } >"$tmp/mid.json"
for cut in full half; do
  [ $cut = half ] && head -c $(($(wc -c <"$tmp/mid.json") - 300)) "$tmp/mid.json" >"$tmp/m.json" \
    || cp "$tmp/mid.json" "$tmp/m.json"
  out=$(timeout 120 "$vdev" plot "$tmp/m.json" -o "$tmp/x.svg" 2>&1); rc=$?
  [ $rc -eq 1 ] && [ "$out" = "vdev plot: $tmp/m.json:$n: malformed event (expected one JSON object per line)" ] \
    && ok || bad "malformed line $n ($cut): $rc '$out'"
done
# a line broken inside an event, then the file ends: not a cut (vdev never
# writes a newline inside an event)
printf '[\n{"name":"a","ph":"M","pid":1},\n{"name":"b",\n' >"$tmp/nl.json"
out=$(timeout 120 "$vdev" plot "$tmp/nl.json" 2>&1 >/dev/null); rc=$?
[ $rc -eq 1 ] && echo "$out" | grep -q "nl.json:3: malformed event" && ok || bad "newline in event: $rc '$out'"
# garbage as the cut line (not a prefix of JSON) is an error
printf '[\n{"name":"a","ph":"M","pid":1},\n{"name":"b"]' >"$tmp/g.json"
out=$(timeout 120 "$vdev" plot "$tmp/g.json" 2>&1 >/dev/null); rc=$?
[ $rc -eq 1 ] && echo "$out" | grep -q "g.json:3: malformed event" && ok || bad "garbage last line: $rc '$out'"

# killed while tracing: SIGKILL, SIGTERM, SIGINT (the default action of each:
# no atexit, no closing "]"); the demo runs until the trace has 20 KB
cat > "$tmp/kill.py" <<'PY'
import os, signal, subprocess, sys, time
vdev, path, sig = sys.argv[1], sys.argv[2], getattr(signal, sys.argv[3])
env = dict(os.environ, VDEV_SIM_GPUS="3x1GiB", VDEV_TRACE_FILE=path)
def dfl():
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
p = subprocess.Popen([vdev, "demo", "--epochs", "100000", "--steps", "100"], env=env,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=dfl)
deadline = time.monotonic() + 300  # bounds a hang only: ends at 20 KB
while time.monotonic() < deadline and p.poll() is None:
    if os.path.exists(path) and os.path.getsize(path) > 20000:
        break
    time.sleep(0.05)
p.send_signal(sig)
rc = p.wait(timeout=60)
if rc != -sig:
    print("FAIL: demo ended with %d, not by signal %d" % (rc, sig)); sys.exit(1)
PY
for sig in SIGKILL SIGTERM SIGINT; do
  rm -f "$tmp/k.json"   # not the last run's trace (left when its checks failed)
  python3 "$tmp/kill.py" "$vdev" "$tmp/k.json" $sig || { bad "$sig: demo not killed"; continue; }
  [ "$(tail -n 1 "$tmp/k.json")" = "]" ] && { bad "$sig: the trace is complete"; continue; }
  out=$(timeout 120 "$vdev" plot "$tmp/k.json" -o "$tmp/k.svg" 2>&1); rc=$?
  [ $rc -eq 0 ] && echo "$out" | grep -q "^vdev plot: note: $tmp/k.json:[0-9]*: the trace ends here" \
    && python3 -c "import sys, xml.etree.ElementTree as E; E.parse(sys.argv[1])" "$tmp/k.svg" \
    && ok || bad "$sig: plot exit $rc: $out"
  out=$(timeout 120 "$vdev" plot --placement "$tmp/k.json" -o "$tmp/k.svg" 2>&1); rc=$?
  [ $rc -eq 0 ] && ok || bad "$sig: plot --placement exit $rc: $out"
  rm -f "$tmp/k.json"
done

finish
