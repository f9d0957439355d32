#!/usr/bin/env bash
# cli_top_endpoint.sh — `vdev top` against endpoints that misbehave: one that
# answers a byte at a time and never ends is given up on after 10 s, one that
# streams without end after 64 MiB, one that closes without a byte is said to
# have done so, each in one line with exit 1; an answer whose headers end in
# bare newlines (no CR) is read.
# Usage: cli_top_endpoint.sh VDEV SHARED
set -u
vdev=$1
. "${BASH_SOURCE%/*}/testlib.sh"
tmp=$(mktemp -d)
fake_pid=
cleanup() {
  [ -n "$fake_pid" ] && kill "$fake_pid" 2>/dev/null
  wait 2>/dev/null; rm -rf "$tmp"
}
trap cleanup EXIT
cat >"$tmp/fake.py" <<'PY'
import socket, sys, threading, time
mode = sys.argv[1]
page = (b'vdev_memory_limit_bytes{device="/device:GPU:0",backend="sim"} 1073741824\n'
        b'vdev_memory_in_use_bytes{device="/device:GPU:0",backend="sim"} 1048576\n')
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(8)
print(s.getsockname()[1], flush=True)
def answer(c):
    try:
        c.recv(4096)
        if mode == "trickle":      # a byte every second, never done
            c.sendall(b"HTTP/1.0 200 OK\r\n\r\n")
            while True:
                c.sendall(b"#")
                time.sleep(1)
        elif mode == "stream":     # comment lines without end
            c.sendall(b"HTTP/1.0 200 OK\r\n\r\n")
            while True:
                c.sendall(b"# x\n" * 16384)
        elif mode == "lf":
            c.sendall(b"HTTP/1.0 200 OK\nContent-Type: text/plain\n\n" + page)
        # "empty": closes without a byte
    except OSError:
        pass
    finally:
        c.close()
while True:
    c, _ = s.accept()
    threading.Thread(target=answer, args=(c,), daemon=True).start()
PY
# serve MODE: a fake endpoint; sets fake_pid and fake
serve() {
  rm -f "$tmp/fake.port"
  python3 "$tmp/fake.py" "$1" >"$tmp/fake.port" 2>"$tmp/fake.err" &
  fake_pid=$!
  for _ in $(seq 1 120); do [ -s "$tmp/fake.port" ] && break; sleep 0.25; done   # bounded: 30 s
  fake=http://127.0.0.1:$(cat "$tmp/fake.port")
  [ -s "$tmp/fake.port" ] || bad "the fake endpoint did not start: $(cat "$tmp/fake.err")"
}
stop() { kill "$fake_pid" 2>/dev/null; wait "$fake_pid" 2>/dev/null; fake_pid=; }

# A trickle: given up on (the timeout only bounds a hang, it is not asserted).
serve trickle
err=$(timeout 60 "$vdev" top --once --interval 0.1 --url "$fake" 2>&1 >/dev/null); rc=$?
want_re="^vdev top: $fake/metrics: the answer did not end within 10 s \\([0-9]+ bytes read\\)\$"
[ $rc -eq 1 ] && [[ "$err" =~ $want_re ]] &&
  ok || bad "trickle: exit $rc: '$err'"
stop
# A stream without end: stopped at 64 MiB, one line.
serve stream
err=$(timeout 60 "$vdev" top --once --interval 0.1 --url "$fake" 2>&1 >/dev/null); rc=$?
want="vdev top: $fake/metrics: the answer is over 64 MiB, too large for a metrics page"
[ $rc -eq 1 ] && [ "$err" = "$want" ] && ok || bad "stream: exit $rc: '$err', expected '$want'"
stop
# Closed without a byte.
serve empty
err=$(timeout 60 "$vdev" top --once --interval 0.1 --url "$fake" 2>&1 >/dev/null); rc=$?
want="vdev top: $fake/metrics closed the connection without an answer"
[ $rc -eq 1 ] && [ "$err" = "$want" ] && ok || bad "empty: exit $rc: '$err', expected '$want'"
stop
# Headers ending in bare newlines: read as any HTTP client reads them.
serve lf
out=$(timeout 60 "$vdev" top --once --interval 0.1 --url "$fake" 2>"$tmp/err"); rc=$?
[ $rc -eq 0 ] && has "$out" "1 device, 0 ops run in all" && ok ||
  bad "bare newlines: exit $rc: $out $(cat "$tmp/err")"
stop

finish
