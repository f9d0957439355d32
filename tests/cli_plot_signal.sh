#!/usr/bin/env bash
# cli_plot_signal.sh — `vdev plot -o FILE` ended by a signal (SIGTERM,
# Ctrl-C's SIGINT, SIGHUP) while it writes the picture: the process ends by
# that signal, its temporary file ('.FILE.XXXXXX' beside FILE) is removed and
# FILE is left as it was. The signal is sent once the temporary file is seen;
# a run that ends before it is seen is tried again (up to 25 times).
# Usage: cli_plot_signal.sh VDEV SHARED
set -u
vdev=$1
case $vdev in /*) ;; *) vdev=$PWD/$vdev ;; esac
command -v python3 >/dev/null || { echo "python3 not found: skipped"; exit 77; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
. "${BASH_SOURCE%/*}/testlib.sh"
# a trace of 100,000 memory counter events on four devices: a picture that
# takes a while to write
python3 - "$tmp/run.json" <<'PY'
import sys
with open(sys.argv[1], "w") as f:
    f.write('[\n{"name":"process_name","ph":"M","pid":1,"args":{"name":"vdev"}}')
    for d in range(4):
        f.write(',\n{"name":"thread_name","ph":"M","pid":1,"tid":%d,'
                '"args":{"name":"/device:GPU:%d (sim)"}}' % (d, d))
    for i in range(100000):
        f.write(',\n{"name":"memory /device:GPU:%d","ph":"C","ts":%d,"pid":1,"tid":%d,'
                '"args":{"in_use":%d,"reserved":268435456}}' % (i % 4, i, i % 4,
                                                              (i * 7919) % 1000000 * 256))
    f.write('\n]\n')
PY
# interrupt SIG: prints "caught RC LEFT" (the exit status as Python gives it,
# the hidden files left in the folder), or "missed" when the run ended before
# the temporary file was seen or the signal came after the picture was in
# place (the test's own process was slow to send it on a loaded machine; the
# temporary file must be gone then too)
cat >"$tmp/interrupt.py" <<'PY'
import os, signal, subprocess, sys
vdev, trace, d, sig = sys.argv[1], sys.argv[2], sys.argv[3], getattr(signal, sys.argv[4])
p = subprocess.Popen([vdev, "plot", trace, "-o", os.path.join(d, "m.svg")],
                     preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
caught = False
while p.poll() is None:
    if any(f.startswith(".m.svg.") for f in os.listdir(d)):
        p.send_signal(sig)
        caught = True
        break
p.wait()
left = sorted(f for f in os.listdir(d) if f.startswith("."))
with open(os.path.join(d, "m.svg")) as f:
    late = f.read() != "old\n"
if caught and late and left:
    print("late, left %s" % left)
else:
    print("caught %d %s" % (p.returncode, left) if caught and not late else "missed")
PY
for sig in SIGTERM SIGINT SIGHUP; do
  num=$(python3 -c "import signal; print(int(signal.$sig))")
  for _ in $(seq 1 25); do   # a loaded machine may miss the window many times
    rm -rf "$tmp/out"; mkdir "$tmp/out"; echo old >"$tmp/out/m.svg"
    res=$(python3 "$tmp/interrupt.py" "$vdev" "$tmp/run.json" "$tmp/out" "$sig")
    [ "$res" != missed ] && break
  done
  [ "$res" = "caught -$num []" ] && ok ||
    bad "$sig while writing: $res (expected 'caught -$num []')"
  [ "$(cat "$tmp/out/m.svg")" = old ] && ok || bad "$sig while writing: m.svg changed"
done
finish
