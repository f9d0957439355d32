#!/usr/bin/env bash
# cli_plot.sh — `vdev plot` and `vdev demo --report`: well-formed SVG for the
# memory and placement pictures of a demo trace, a line per device (129 of them too, and a
# device's further op tracks counted as its own), an OOM
# marker for a --split trace, and the error exits (usage 2, missing or
# malformed trace 1, naming the line; an allocation trace named as one).
# Usage: cli_plot.sh VDEV SHARED
set -u
vdev=$1
command -v python3 >/dev/null || { echo "python3 not found: skipped"; exit 77; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
. "${BASH_SOURCE%/*}/testlib.sh"
unset VDEV_SIM_GPUS VDEV_PLACEMENT VDEV_LOGICAL_DEVICES VDEV_VISIBLE_DEVICES VDEV_MEMORY_GROWTH \
      VDEV_TRACE_FILE VDEV_PLACEMENT_REPORT
# svg.py FILE WHAT...: well-formed XML with an <svg> root, and each WHAT:
#   lines=N (N polylines: in use + reserved per device), text=S (S appears in
#   a <text> or <title>), oom (a class="oom" group), bars=N (N or more rects)
cat > "$tmp/svg.py" <<'PY'
import sys, xml.etree.ElementTree as E
ns = "{http://www.w3.org/2000/svg}"
try:
    root = E.parse(sys.argv[1]).getroot()
except Exception as e:
    print("FAIL: %s: not well-formed XML: %s" % (sys.argv[1], e)); sys.exit(1)
bad = [] if root.tag == ns + "svg" else ["root is not <svg>"]
texts = " ".join((t.text or "") for t in root.iter() if t.tag in (ns + "text", ns + "title"))
for w in sys.argv[2:]:
    k, _, v = w.partition("=")
    if k == "lines":
        n = len(root.findall(".//" + ns + "polyline"))
        if n != int(v): bad.append("%d polylines, expected %s" % (n, v))
    elif k == "text":
        if v not in texts: bad.append("no text %r" % v)
    elif k == "oom":
        if not [g for g in root.iter(ns + "g") if g.get("class") == "oom"]: bad.append("no OOM marker")
    elif k == "nooom":
        if [g for g in root.iter(ns + "g") if g.get("class") == "oom"]: bad.append("an OOM marker")
    elif k == "bars":
        n = len(root.findall(".//" + ns + "rect"))
        if n < int(v): bad.append("%d rects, expected at least %s" % (n, v))
for b in bad: print("FAIL: %s: %s" % (sys.argv[1], b))
sys.exit(1 if bad else 0)
PY
svg() { python3 "$tmp/svg.py" "$@"; }

VDEV_SIM_GPUS=3x1GiB VDEV_TRACE_FILE=$tmp/run.json "$vdev" demo --epochs 1 --steps 5 >/dev/null 2>&1 \
  && ok || bad "demo failed"
"$vdev" plot "$tmp/run.json" -o "$tmp/memory.svg"; rc=$?
[ $rc -eq 0 ] && ok || bad "plot exit $rc"
svg "$tmp/memory.svg" lines=6 "text=/device:GPU:0" "text=/device:GPU:2" text=peak text=MiB \
  "text=time (s)" text=reserved nooom && ok || bad "memory.svg"
"$vdev" plot --placement "$tmp/run.json" -o "$tmp/placement.svg"; rc=$?
[ $rc -eq 0 ] && ok || bad "plot --placement exit $rc"
svg "$tmp/placement.svg" bars=10 text=MatMul "text=/device:GPU:1" && ok || bad "placement.svg"
"$vdev" plot "$tmp/run.json" | python3 -c "import sys, xml.etree.ElementTree as E; E.parse(sys.stdin)" \
  && ok || bad "plot to stdout"

# --split, through demo --report: the OOM on GPU:1 is marked
out=$(VDEV_SIM_GPUS=1x8GiB "$vdev" demo --split --steps 8 --report "$tmp/rep/split" 2>&1); rc=$?
[ $rc -eq 0 ] && ok || bad "demo --split --report exit $rc: $out"
echo "$out" | grep -q "$tmp/rep/split/memory.svg" && ok || bad "report paths not printed: $out"
svg "$tmp/rep/split/memory.svg" oom "text=OOM on /device:GPU:1" text=peak && ok || bad "split memory.svg"
svg "$tmp/rep/split/placement.svg" bars=2 && ok || bad "split placement.svg"
[ -s "$tmp/rep/split/run.json" ] && ok || bad "no run.json in the report"
out=$(VDEV_SIM_GPUS=3x1GiB "$vdev" demo --tf-placement --steps 2 --report "$tmp/rep/tf" 2>&1); rc=$?
[ $rc -eq 0 ] && svg "$tmp/rep/tf/memory.svg" lines=6 && svg "$tmp/rep/tf/placement.svg" bars=3 \
  && ok || bad "demo --tf-placement --report: $rc $out"
VDEV_SIM_GPUS=3x1GiB VDEV_TRACE_FILE=$tmp/own.json "$vdev" demo --steps 2 --epochs 1 \
  --report "$tmp/rep/own" >/dev/null 2>&1 && [ -s "$tmp/own.json" ] && [ ! -e "$tmp/rep/own/run.json" ] \
  && svg "$tmp/rep/own/memory.svg" && ok || bad "--report with VDEV_TRACE_FILE set"
# a placeholder in VDEV_TRACE_FILE: the report draws the file written (%p expanded)
out=$(VDEV_SIM_GPUS=3x1GiB VDEV_TRACE_FILE=$tmp/own.%p.json "$vdev" demo --steps 2 --epochs 1 \
  --report "$tmp/rep/pid" 2>&1); rc=$?
written=$(ls "$tmp"/own.[0-9]*.json 2>/dev/null | wc -l)
[ $rc -eq 0 ] && [ "$written" -eq 1 ] && svg "$tmp/rep/pid/memory.svg" && ok ||
  bad "--report with %p in VDEV_TRACE_FILE: exit $rc, $written files: $out"
"$vdev" demo --help | grep -q -- "--report DIR" && ok || bad "--report not in demo --help"

# as many devices as a process has (129: CPU:0 and 128 logical GPUs): each is drawn
python3 "${BASH_SOURCE%/*}/plot_many_devices.py" 129 "$tmp/many.json"
"$vdev" plot "$tmp/many.json" -o "$tmp/many.svg" && svg "$tmp/many.svg" lines=258 \
  "text=/device:GPU:127" && ok || bad "129 devices: memory.svg"
"$vdev" plot --placement "$tmp/many.json" -o "$tmp/manyp.svg" && svg "$tmp/manyp.svg" \
  "text=/device:GPU:127" && ok || bad "129 devices: placement.svg"
# a device's further op tracks (ops other threads timed) count as the device's
{ echo '['
  echo '{"name":"thread_name","ph":"M","pid":1,"tid":0,"args":{"name":"/device:CPU:0 (cpu)"}},'
  echo '{"name":"Relu","cat":"op","ph":"X","ts":1,"dur":1,"pid":1,"tid":0,"args":{"op_type":0}},'
  lane='"args":{"name":"/device:CPU:0 (cpu) (2)"}'
  echo '{"name":"thread_name","ph":"M","pid":1,"tid":5096,'"$lane"'},'
  echo '{"name":"Relu","cat":"op","ph":"X","ts":1,"dur":1,"pid":1,"tid":5096,"args":{"op_type":0}},'
  echo '{"name":"Relu","cat":"op","ph":"X","ts":3,"dur":1,"pid":1,"tid":5096,"args":{"op_type":0}}'
  echo ']'; } >"$tmp/lanes.json"
"$vdev" plot --placement "$tmp/lanes.json" -o "$tmp/lanes.svg" && svg "$tmp/lanes.svg" \
  "text=Relu: 3" "text=/device:CPU:0" && ok || bad "further op tracks: placement.svg"

# errors
help=$("$vdev" plot --help)
has "$help" "usage: vdev plot [--memory | --placement] TRACE [-o|--output FILE.svg]" && ok ||
  bad "no help: $help"
# every option it takes is in its help: --memory, --output, '-o -'
for s in "  --memory      memory in use" "  -o, --output FILE" "('-' or none: standard output)"; do
  has "$help" "$s" && ok || bad "help lacks '$s': $help"
done
"$vdev" plot --placement --memory "$tmp/run.json" --output - >"$tmp/m.svg" 2>"$tmp/err" &&
  "$vdev" plot "$tmp/run.json" -o - >"$tmp/d.svg" && cmp -s "$tmp/m.svg" "$tmp/d.svg" && ok ||
  bad "--memory --output -: not the default picture on stdout: $(cat "$tmp/err")"
# usage errors: exit 2, one line pointing at the help as every command does
plot_usage() {
  err=$("$vdev" plot "${@:2}" 2>&1 >/dev/null); rc=$?
  [ $rc -eq 2 ] && [ "$err" = "$1" ] && ok || bad "plot ${*:2}: exit $rc: $err"
}
plot_usage "vdev plot: no trace given (see 'vdev plot --help')"
plot_usage "vdev plot: unknown option '--bogus' (see 'vdev plot --help')" --bogus x.json
plot_usage "vdev plot: -o needs a file name (see 'vdev plot --help')" "$tmp/run.json" -o
plot_usage "vdev plot: --output needs a file name (see 'vdev plot --help')" "$tmp/run.json" --output
out=$("$vdev" plot "$tmp/nonexistent.json" -o "$tmp/x.svg" 2>&1); rc=$?
[ $rc -eq 1 ] && [ "$(echo "$out" | wc -l)" -eq 1 ] && echo "$out" | grep -q nonexistent.json \
  && ok || bad "missing file: $rc $out"
{ head -5 "$tmp/run.json"; echo '{"name":"MatMul","ph":"X","ts":1,'; tail -3 "$tmp/run.json"; } >"$tmp/bad.json"
out=$("$vdev" plot "$tmp/bad.json" -o "$tmp/x.svg" 2>&1); rc=$?
[ $rc -eq 1 ] && [ "$(echo "$out" | wc -l)" -eq 1 ] && echo "$out" | grep -q "bad.json:6:" \
  && ok || bad "malformed line: $rc $out"
echo 'not json' >"$tmp/bad2.json"
out=$("$vdev" plot "$tmp/bad2.json" 2>&1 >/dev/null); rc=$?
[ $rc -eq 1 ] && echo "$out" | grep -q "bad2.json:1:" && ok || bad "not a trace: $rc $out"
: >"$tmp/empty.json"
"$vdev" plot "$tmp/empty.json" >/dev/null 2>&1; [ $? -eq 1 ] && ok || bad "empty file: not exit 1"
# an allocation trace (VDEV_ALLOC_TRACE: a header, or events alone) is named as one
printf '# trace v1 source=vdev pid=1 ids=never-reused\na 0 256\nf 0\n' >"$tmp/alloc.trace"
printf 'a 0 256\nf 0\n' >"$tmp/events.trace"
for f in alloc.trace events.trace; do
  out=$("$vdev" plot "$tmp/$f" -o "$tmp/x.svg" 2>&1); rc=$?
  want="vdev plot: $tmp/$f: this is an allocation trace (VDEV_ALLOC_TRACE): use vdev replay or vdev fit on it"
  [ $rc -eq 1 ] && [ "$out" = "$want" ] && ok || bad "allocation trace $f: $rc '$out', expected '$want'"
done
finish
