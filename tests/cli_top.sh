#!/usr/bin/env bash
# cli_top.sh — `vdev top` against a running demo that serves metrics: one
# frame with every device, its memory and an op rate; a one-line error and
# exit 1 when nothing listens; exit 2 on bad options (a port outside
# 1..65535 too); "?" for a served value that cannot be (NaN, negative, huge),
# the columns kept; exit 1 and one line when stdout cannot be written; plain
# frames (no escape codes) when stdout is not a terminal, a cleared screen
# per frame when it is; a value that is no number is an error naming its
# line; an endpoint that goes away after frames is said to have gone.
# Usage: cli_top.sh VDEV SHARED
set -u
vdev=$1
. "${BASH_SOURCE%/*}/testlib.sh"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
unset VDEV_PLACEMENT VDEV_LOGICAL_DEVICES VDEV_VISIBLE_DEVICES VDEV_MEMORY_GROWTH VDEV_TRACE_FILE
export VDEV_SIM_GPUS=3x1GiB
tmp=$(mktemp -d)
demo_pid= fake_pid= top_pid=
cleanup() {
  [ -n "$demo_pid" ] && kill "$demo_pid" 2>/dev/null
  [ -n "$top_pid" ] && kill "$top_pid" 2>/dev/null
  [ -n "$fake_pid" ] && kill "$fake_pid" 2>/dev/null
  wait 2>/dev/null; rm -rf "$tmp"
}
trap cleanup EXIT

out=$("$vdev" top --help)
has "$out" "usage: vdev top" && ok || bad "--help"
has "$out" "every --interval seconds, in (0, 3600] (default 1)." && ok || bad "--help: no range: $out"
err=$("$vdev" top --bogus 2>&1 >/dev/null); rc=$?
[ $rc -eq 2 ] && [ "$err" = "vdev top: unknown option or missing value '--bogus' (see 'vdev top --help')" ] &&
  ok || bad "bad option: exit $rc: $err"
# A number as written, from its first character: strtod would skip a blank.
for s in " 1" "+1" "0" "3601"; do
  err=$("$vdev" top --once --interval "$s" 2>&1 >/dev/null); rc=$?
  [ $rc -eq 2 ] && [ "$err" = "vdev top: --interval needs seconds in (0, 3600], not '$s'" ] &&
    ok || bad "--interval '$s': exit $rc: $err"
done
"$vdev" top --url ftp://x >/dev/null 2>&1; [ $? -eq 2 ] && ok || bad "bad url is not exit 2"
"$vdev" top --interval 0 >/dev/null 2>&1; [ $? -eq 2 ] && ok || bad "--interval 0 is not exit 2"
# A port outside 1..65535 is a usage error, not a refused connection.
for p in 99999 0 65536 123456789012; do
  err=$("$vdev" top --once --url "http://127.0.0.1:$p" 2>&1 >/dev/null); rc=$?
  [ $rc -eq 2 ] && [ "$err" = "vdev top: --url 'http://127.0.0.1:$p': the port must be a number from 1 to 65535" ] &&
    ok || bad "port $p: exit $rc: $err"
done

# ---- an endpoint serving values vdev never serves: NaN, negative, huge ----
# Each is shown as "?", every line of the table as wide as its header.
cat >"$tmp/metrics.txt" <<'EOF'
# TYPE vdev_memory_in_use_bytes gauge
vdev_memory_in_use_bytes{device="/device:GPU:0",backend="sim"} NaN
vdev_memory_reserved_bytes{device="/device:GPU:0",backend="sim"} 2097152
vdev_memory_limit_bytes{device="/device:GPU:0",backend="sim"} 1073741824
vdev_memory_peak_in_use_bytes{device="/device:GPU:0",backend="sim"} -5
vdev_allocation_failures_total{device="/device:GPU:0",backend="sim"} +Inf
vdev_ops_total{device="/device:GPU:0",op="MatMul"} 1e300
vdev_memory_in_use_bytes{device="/device:GPU:1",backend="sim"} 1048576
vdev_memory_reserved_bytes{device="/device:GPU:1",backend="sim"} 12345678901234567890123
vdev_memory_limit_bytes{device="/device:GPU:1",backend="sim"} 1073741824
vdev_memory_peak_in_use_bytes{device="/device:GPU:1",backend="sim"} 1048576
vdev_allocation_failures_total{device="/device:GPU:1",backend="sim"} 3
vdev_ops_total{device="/device:GPU:1",op="MatMul"} 10
vdev_copied_bytes_total{from="/device:GPU:0",to="/device:GPU:1"} -1
EOF
cat >"$tmp/serve.py" <<'EOF'
import http.server, sys
body = open(sys.argv[1], "rb").read()
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        with open(sys.argv[1] + ".path", "w") as f:
            f.write(self.path)
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
s = http.server.HTTPServer(("127.0.0.1", 0), H)
print(s.server_address[1], flush=True)
s.serve_forever()
EOF
python3 "$tmp/serve.py" "$tmp/metrics.txt" >"$tmp/fake.port" 2>"$tmp/fake.err" &
fake_pid=$!
for _ in $(seq 1 480); do [ -s "$tmp/fake.port" ] && break; sleep 0.25; done   # bounded: 120 s
fake=http://127.0.0.1:$(cat "$tmp/fake.port")
[ -s "$tmp/fake.port" ] || bad "the fake endpoint did not start: $(cat "$tmp/fake.err")"
out=$("$vdev" top --once --interval 0.1 --url "$fake" 2>"$tmp/err"); rc=$?
[ $rc -eq 0 ] && ok || bad "bogus values: exit $rc: $(cat "$tmp/err") $(cat "$tmp/fake.err")"
g0=$(grep "^/device:GPU:0 " <<<"$out"); g1=$(grep "^/device:GPU:1 " <<<"$out")
[ "$(tr -s ' ' <<<"$g0")" = \
  "/device:GPU:0 sim [????????????????????????????????] ? 2.0 MiB 1.0 GiB ? ? ? ? 0 B" ] && ok ||
  bad "bogus values: GPU:0 line: $g0"
[ "$(tr -s ' ' <<<"$g1")" = \
  "/device:GPU:1 sim [????????????????????????????????] 1.0 MiB ? 1.0 GiB 1.0 MiB 3 0.0 0 B ?" ] && ok ||
  bad "bogus values: GPU:1 line: $g1"
has "$out" "2 devices, ? ops run in all" && ok || bad "bogus values: total: $out"
for w in nan inf -5 12345678901234567890123; do
  grep -qiw -- "$w" <<<"$out" && bad "bogus values: '$w' shown: $out" || ok
done
head_len=$(grep "^device " <<<"$out" | awk '{ print length }')
for l in "$g0" "$g1"; do
  [ "$(awk '{ print length }' <<<"$l")" = "$head_len" ] && ok || bad "bogus values: columns broken: $out"
done
# Standard output that cannot be written: one line, exit 1.
if [ -w /dev/full ]; then
  err=$("$vdev" top --once --interval 0.1 --url "$fake" 2>&1 >/dev/full); rc=$?
  [ $rc -eq 1 ] && [ "$err" = "vdev top: write error on standard output: No space left on device" ] &&
    ok || bad "top >/dev/full: exit $rc: $err"
  # without --once it stops at the first frame it cannot write
  err=$(timeout 120 "$vdev" top --interval 0.1 --url "$fake" 2>&1 >/dev/full); rc=$?
  [ $rc -eq 1 ] && [ "$err" = "vdev top: write error on standard output: No space left on device" ] &&
    ok || bad "top (live) >/dev/full: exit $rc: $err"
fi
# Not a terminal: plain frames, one after another, a blank line between, no
# escape codes (as `top -b`); on a terminal, each frame clears the screen.
# Stopped once the file holds two frames, however long a loaded machine
# takes to get there (its start, two fetches and the --interval), not after a
# fixed time; the log is made before top starts.
frame_re="^vdev top  $fake/metrics  [0-9][0-9]:[0-9][0-9]:[0-9][0-9]   ("
: >"$tmp/top.log"
"$vdev" top --interval 0.4 --url "$fake" >"$tmp/top.log" 2>"$tmp/err" &
top_pid=$!
for _ in $(seq 1 480); do   # bounded: 120 s
  [ "$(grep -c "$frame_re" "$tmp/top.log")" -ge 2 ] && break
  kill -0 "$top_pid" 2>/dev/null || break
  sleep 0.25
done
kill "$top_pid" 2>/dev/null; wait "$top_pid" 2>/dev/null; top_pid=
frames=$(grep -c "$frame_re" "$tmp/top.log")
[ "$frames" -ge 2 ] && ok || bad "top to a file: $frames frames: $(cat "$tmp/top.log" "$tmp/err")"
grep -q $'\e' "$tmp/top.log" && bad "top to a file: escape codes: $(cat -v "$tmp/top.log" | head -3)" || ok
awk -v first=1 '/^vdev top  / { if (!first && prev != "") exit 1; first = 0 } { prev = $0 }' "$tmp/top.log" &&
  [ "$(head -1 "$tmp/top.log" | cut -c1-10)" = "vdev top  " ] && ok ||
  bad "top to a file: frames not separated by one blank line: $(head -30 "$tmp/top.log")"
# On a terminal each frame clears the screen and fits its width: columns dropped (the copies,
# the peak, the OOMs, the backend) and the bar shortened, in that order, until the lines fit;
# a wide one gets everything. A terminal that gives no size (the first run) gets cleared
# frames; then each line of the second frame, for terminals of 200, 100, 80 and 64 columns.
python3 - "$vdev" "$fake" >"$tmp/widths.txt" 2>&1 <<'PY'
import fcntl, os, pty, re, select, signal, struct, sys, termios, time
for cols in (None, 200, 100, 80, 64):
    pid, fd = pty.fork()
    if pid == 0:
        os.execv(sys.argv[1], [sys.argv[1], "top", "--interval", "0.3", "--url", sys.argv[2]])
    if cols:
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 50, cols, 0, 0))
    got, end = b"", time.monotonic() + 120   # bounds a hang only: ends at the frames
    while time.monotonic() < end and got.count(b"\x1b[H\x1b[2J") < (3 if cols else 2):
        r, _, _ = select.select([fd], [], [], 0.5)
        if r:
            try:
                got += os.read(fd, 65536)
            except OSError:
                break
    os.kill(pid, signal.SIGINT); os.waitpid(pid, 0)
    if not cols:
        print("clears", got.count(b"\x1b[H\x1b[2J"))
        continue
    frame = got.split(b"\x1b[H\x1b[2J")[2].decode().replace("\r", "")
    lines = [l for l in frame.split("\n") if l]
    head = [l for l in lines if l.startswith("device ")][0]
    gpu1 = [l for l in lines if l.startswith("/device:GPU:1 ")][0]
    bar = re.search(r"\[([^]]*)\]", gpu1).group(1)
    print(cols, max(len(l) for l in lines), len(bar), " ".join(head.split()))
PY
while read -r cols want; do
  got=$(grep "^$cols " "$tmp/widths.txt")
  [ "$(cut -d' ' -f3- <<<"$got")" = "$want" ] && [ "$(cut -d' ' -f2 <<<"$got")" -le "$cols" ] &&
    ok || bad "top on a $cols-column terminal: $got (want bar and header '$want'): $(cat "$tmp/widths.txt")"
done <<'EOF2'
200 32 device backend memory in use reserved limit peak OOMs ops/s copied out copied in
100 32 device memory in use reserved limit ops/s
80 17 device memory in use reserved limit ops/s
64 10 device memory in use reserved limit
EOF2
grep -q "^clears [2-9]" "$tmp/widths.txt" && ok || bad "top on a terminal: $(cat "$tmp/widths.txt")"
kill "$fake_pid" 2>/dev/null
wait "$fake_pid" 2>/dev/null

# serve FILE: a fake endpoint serving FILE; sets fake_pid and fake
serve() {
  rm -f "$tmp/fake.port"   # not the last server's port, before this one writes it
  python3 "$tmp/serve.py" "$1" >"$tmp/fake.port" 2>"$tmp/fake.err" &
  fake_pid=$!
  for _ in $(seq 1 480); do [ -s "$tmp/fake.port" ] && break; sleep 0.25; done   # bounded: 120 s
  fake=http://127.0.0.1:$(cat "$tmp/fake.port")
  [ -s "$tmp/fake.port" ] || bad "the fake endpoint did not start: $(cat "$tmp/fake.err")"
}
# A value that is no number is an error naming its line, exit 1.
for v in abc 12abc; do
  printf '%s\n' "vdev_memory_limit_bytes{device=\"/device:GPU:0\"} 1024" \
    "vdev_memory_in_use_bytes{device=\"/device:GPU:0\"} $v" >"$tmp/malformed.txt"
  serve "$tmp/malformed.txt"
  err=$("$vdev" top --once --interval 0.1 --url "$fake" 2>&1 >/dev/null); rc=$?
  want="vdev top: $fake/metrics: a sample whose value is not a number: 'vdev_memory_in_use_bytes{device=\"/device:GPU:0\"} $v'"
  [ $rc -eq 1 ] && [ "$err" = "$want" ] && ok || bad "value '$v': exit $rc: '$err', expected '$want'"
  kill "$fake_pid" 2>/dev/null; wait "$fake_pid" 2>/dev/null; fake_pid=
done
# Label values with the exposition format's escapes (\", \\, \n) and a '}'
# inside quotes are read as Prometheus reads them; one device is "1 device".
cat >"$tmp/escaped.txt" <<'EOF'
vdev_memory_limit_bytes{backend="sim",note="a } and a \"quote\"",device="GPU \"a\"\\b}"} 1073741824
vdev_memory_in_use_bytes{device="GPU \"a\"\\b}",backend="s\"m"} 1048576
EOF
serve "$tmp/escaped.txt"
out=$("$vdev" top --once --interval 0.1 --url "$fake/" 2>"$tmp/err"); rc=$?
[ $rc -eq 0 ] && ok || bad "escaped labels: exit $rc: $(cat "$tmp/err")"
[ "$(grep -c '^GPU "a"\\b} *sim ' <<<"$out")" -eq 1 ] && ok || bad "escaped labels: device: $out"
has "$out" "1.0 MiB" && ok || bad "escaped labels: in use: $out"
has "$out" "1 device, 0 ops run in all" && ok || bad "one device: $out"
# a URL ending in a bare '/' asks for the path '/', as [/PATH] says
[ "$(cat "$tmp/escaped.txt.path")" = "/" ] && ok || bad "url with '/': asked for $(cat "$tmp/escaped.txt.path")"
kill "$fake_pid" 2>/dev/null; wait "$fake_pid" 2>/dev/null; fake_pid=
# As many devices as a vdev process may have (129) are all shown; more are
# said to be left out, never dropped silently.
for n in 129 131; do
  for i in $(seq 0 $((n - 1))); do
    echo "vdev_memory_limit_bytes{device=\"/device:GPU:$i\",backend=\"sim\"} 1073741824"
  done >"$tmp/many.txt"
  serve "$tmp/many.txt"
  out=$("$vdev" top --once --interval 0.1 --url "$fake" 2>"$tmp/err"); rc=$?
  [ $rc -eq 0 ] && ok || bad "$n devices: exit $rc: $(cat "$tmp/err")"
  [ "$(grep -c '^/device:GPU:' <<<"$out")" -eq 129 ] && ok || bad "$n devices: rows: $out"
  has "$out" "129 devices, 0 ops run in all" && ok || bad "$n devices: total: $out"
  if [ $n -gt 129 ]; then
    has "$out" "(more than 129 devices: the rest are not shown)" && ok || bad "$n devices: $out"
  else
    has "$out" "more than" && bad "$n devices: said too many: $out" || ok
  fi
  kill "$fake_pid" 2>/dev/null; wait "$fake_pid" 2>/dev/null; fake_pid=
done
# The endpoint goes away after frames were shown: said so, exit 1. Its own
# log, made before top starts: the shell that runs top in the background
# creates it only when it gets to run, and a log of an earlier run (the
# frames above) would end the wait before top's first frame.
serve "$tmp/metrics.txt"
: >"$tmp/gone.log"
"$vdev" top --interval 0.2 --url "$fake" >"$tmp/gone.log" 2>"$tmp/err" &
top_pid=$!
for _ in $(seq 1 480); do grep -q "^vdev top " "$tmp/gone.log" && break; sleep 0.25; done   # 120 s
kill "$fake_pid" 2>/dev/null; wait "$fake_pid" 2>/dev/null; fake_pid=
wait "$top_pid"; rc=$?
want="vdev top: $fake/metrics went away (Connection refused): the watched process ended or stopped serving"
[ $rc -eq 1 ] && [ "$(cat "$tmp/err")" = "$want" ] && ok ||
  bad "endpoint gone: exit $rc: '$(cat "$tmp/err")', expected '$want'"
grep -q "^vdev top " "$tmp/gone.log" && ok || bad "endpoint gone: no frame before: $(cat "$tmp/gone.log")"

port=$(free_port)
err=$("$vdev" top --once --url "http://127.0.0.1:$port" 2>&1 >/dev/null); rc=$?
[ $rc -eq 1 ] && ok || bad "nothing listening: exit $rc"
[ "$(printf '%s\n' "$err" | wc -l)" -eq 1 ] && echo "$err" | grep -q "Connection refused" && ok \
  || bad "nothing listening: not one line naming the refusal: $err"

# The demo serves on a port it picks (port 0) and names it: a port found free
# beforehand could be taken by another test running at the same time.
VDEV_METRICS_ADDR=127.0.0.1:0 "$vdev" demo --epochs 1000 --steps 100 >"$tmp/demo.out" 2>&1 &
demo_pid=$!
port=
for _ in $(seq 1 240); do   # bounded: 120 s
  port=$(sed -n 's|^Metrics: http://127\.0\.0\.1:\([0-9]*\)/metrics$|\1|p' "$tmp/demo.out")
  [ -n "$port" ] && break
  kill -0 "$demo_pid" 2>/dev/null || break
  sleep 0.5
done
up=0
for _ in $(seq 1 240); do   # bounded: 120 s
  [ -n "$port" ] || break
  if "$vdev" top --once --interval 0.2 --url "http://127.0.0.1:$port" >/dev/null 2>&1; then up=1; break; fi
  sleep 0.5
done
[ $up -eq 1 ] && ok || bad "the demo's endpoint never answered: $(cat "$tmp/demo.out")"
# ops/s is the 11th field counting "in use" values as two (number, unit)
rates() {
  local k line
  for k in 0 1 2; do
    line=$(echo "$out" | grep "^/device:GPU:$k ")
    echo "$line" |
      awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^[0-9]+\.[0-9]$/ && $(i-1) ~ /^[0-9]+$/) r = $i; print r }'
  done
}
# The rate is of the ops run between two samples a second apart: on a loaded
# machine a step of the demo can take longer than that, so a device can show
# 0.0 once; sampled again until every device shows ops run (or 120 s pass).
for _ in $(seq 1 120); do
  out=$("$vdev" top --once --url "http://127.0.0.1:$port" 2>&1); rc=$?
  [ $rc -eq 0 ] || break
  [ "$(rates | awk '$1 > 0' | wc -l)" -eq 3 ] && break
done
[ $rc -eq 0 ] && ok || bad "top --once exit $rc: $out"
for k in 0 1 2; do
  line=$(echo "$out" | grep "^/device:GPU:$k ")
  [ -n "$line" ] && ok || bad "no line for GPU:$k: $out"
  echo "$line" | grep -Eq " sim +\[[#+.]+\].*(MiB|GiB)" && ok || bad "GPU:$k line lacks backend, bar or limit: $line"
  rate=$(echo "$line" | awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^[0-9]+\.[0-9]$/ && $(i-1) ~ /^[0-9]+$/) r = $i; print r }')
  awk -v r="$rate" 'BEGIN { exit !(r > 0) }' && ok || bad "GPU:$k op rate '$rate' not positive: $line"
done
echo "$out" | grep -q "ops run in all" && ok || bad "no total: $out"
# the default URL and a full /metrics path both work
out=$("$vdev" top --once --interval 0.1 --url "http://127.0.0.1:$port/metrics" 2>&1) && ok || bad "path url: $out"

finish
