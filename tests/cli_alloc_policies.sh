#!/usr/bin/env bash
# cli_alloc_policies.sh — bench/alloc_policies.py, the model of the allocator's
# placement policy that BENCHMARKS.md's policy study rests on: its `octave`
# policy must need exactly the capacity `vdev replay` finds, to the byte, on the
# training traces and on a generated trace (so a change to the allocator's
# policy that the model does not follow fails here); a vdev that answers
# otherwise, bad traces, unknown policies and usage errors each get their exit
# code (1 bad input or disagreement, 2 usage) and one line on stderr naming
# the tool; gzip traces read as plain ones. Never checks timings.
# Usage: cli_alloc_policies.sh VDEV DATA
set -u
vdev=$1
data=${2:-}
. "${BASH_SOURCE%/*}/testlib.sh"
[ -x "$vdev" ] || { echo "cli_alloc_policies: no vdev binary at '$vdev'"; exit 77; }
[ -n "$data" ] && [ -f "$data/traces/mlp.trace" ] ||
  { echo "FAIL: cli_alloc_policies: no traces in '$data'"; exit 1; }
command -v python3 >/dev/null ||
  { echo "SKIP: no python3 (Debian: apt-get install python3)"; exit 77; }
tool="$(cd "$(dirname "$0")/.." && pwd)/bench/alloc_policies.py"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

run() {
  python3 "$tool" "$@" >"$tmp/out" 2>"$tmp/err"; rc=$?
  out=$(cat "$tmp/out"); err=$(cat "$tmp/err")
}
# one_error WHAT CODE TEXT: exit CODE, nothing on stdout, exactly one line on
# stderr, starting with the tool's name (or "usage:") and holding TEXT.
one_error() {
  [ $rc -eq "$2" ] && ok || bad "$1: exit $rc, expected $2"
  [ -z "$out" ] && ok || bad "$1: wrote to stdout: $out"
  [ "$(printf '%s\n' "$err" | wc -l)" -eq 1 ] && ok || bad "$1: stderr is not one line: $err"
  [[ $err == "alloc_policies.py: "* || $err == "usage: alloc_policies.py "* ]] && ok ||
    bad "$1: stderr does not name the tool: $err"
  has "$err" "$3" && ok || bad "$1: stderr lacks '$3': $err"
}

# A generated trace of the kind the issue names: a small one, written here.
awk 'BEGIN { srand(7); id = 0; n = 0
  for (k = 0; k < 3; k++) printf "a %d %d\n", id++, 1048576 * (k + 1)
  for (s = 0; s < 300; s++) {
    sz = int(exp(rand() * log(8388608))) + 1; printf "a %d %d\n", id, sz; live[n++] = id++
    if (n > 6) { j = int(rand() * n); printf "f %d\n", live[j]; live[j] = live[--n] }
  } }' > "$tmp/gen.trace"
gzip -c "$data/traces/mlp.trace" > "$tmp/mlp.trace.gz"

# ---- agreement with vdev replay, byte for byte ----
run --check "$vdev" --policies octave,classes-2,best-fit,octave+older \
  "$data/traces/mlp.trace" "$data/traces/transformer.trace" "$tmp/gen.trace" "$tmp/mlp.trace.gz"
[ $rc -eq 0 ] && ok || bad "--check on the traces: exit $rc: $err"
has "$out" "| trace | octave | classes-2 | best-fit | octave+older |" && ok || bad "no header: $out"
for t in mlp.trace transformer.trace gen.trace mlp.trace.gz; do
  row=$(grep -F "| $t |" <<<"$out")
  [ -n "$row" ] && ok || bad "no row for $t: $out"
done
has "$out" "| geometric mean |" && ok || bad "no geometric mean row: $out"
# The octave column is vdev's capacity ratio as `vdev replay` prints it.
for t in mlp transformer; do
  want=$("$vdev" replay --json --repeats 1 --quiet "$data/traces/$t.trace" |
    python3 -c 'import json,sys; print("%.4f" % json.load(sys.stdin)["capacity_ratio"])')
  got=$(grep -F "| $t.trace |" <<<"$out" | awk -F'|' '{gsub(/ /, "", $3); print $3}')
  [ "$got" = "$want" ] && ok || bad "$t: octave column $got, vdev replay $want"
done
# The gzip copy reads as the plain trace.
a=$(grep -F "| mlp.trace |" <<<"$out" | cut -d'|' -f3-)
b=$(grep -F "| mlp.trace.gz |" <<<"$out" | cut -d'|' -f3-)
[ "$a" = "$b" ] && ok || bad "gzip row '$b' differs from plain '$a'"

# ---- a vdev whose answer differs by one unit: the check must fail ----
real=$("$vdev" replay --json --repeats 1 --quiet "$tmp/gen.trace" |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["min_capacity_bytes"])')
cat > "$tmp/fake-vdev" <<EOF
#!/bin/sh
echo '{"min_capacity_bytes": $((real + 256))}'
EOF
chmod +x "$tmp/fake-vdev"
run --check "$tmp/fake-vdev" --policies octave "$tmp/gen.trace"
one_error "a vdev that disagrees" 1 "the model is not vdev's policy"
printf '#!/bin/sh\necho "vdev replay: broken" >&2\nexit 1\n' > "$tmp/failing-vdev"
chmod +x "$tmp/failing-vdev"
run --check "$tmp/failing-vdev" "$tmp/gen.trace"
one_error "a vdev that fails" 1 "exit 1: vdev replay: broken"
run --check "$tmp/no-such-vdev" "$tmp/gen.trace"
one_error "no vdev there" 1 "No such file"

# ---- bad traces ----
run "$tmp/none.trace"
one_error "missing trace" 1 "none.trace"
printf 'a 1 100\nf 2\n' > "$tmp/bad1.trace"
run "$tmp/bad1.trace"
one_error "free of a dead id" 1 "bad1.trace:2: free of id 2, which is not live"
printf 'a 1 100\na 1 200\n' > "$tmp/bad2.trace"
run "$tmp/bad2.trace"
one_error "id allocated twice" 1 "bad2.trace:2: id 1 allocated while live"
printf 'a 1 lots\n' > "$tmp/bad3.trace"
run "$tmp/bad3.trace"
one_error "not a number" 1 "bad3.trace:1: not 'a ID BYTES' or 'f ID'"
printf '# only a comment\n' > "$tmp/empty.trace"
run "$tmp/empty.trace"
one_error "no allocations" 1 "empty.trace: no allocations"
# A bad trace after a good one: no table is started.
run "$data/traces/mlp.trace" "$tmp/bad1.trace"
one_error "bad second trace" 1 "bad1.trace:2"

# ---- --bin-stats: a trace worked by hand in one region of 4 units ----
# a1 (bin 0 empty: the 4-unit chunk serves; the rest, 3 units, goes to bin 1
# with nothing below it), a2 (bin 0 empty again: the 3-unit chunk; 2 units
# back to bin 1), f1 (1 unit into the empty bin 0), a3 (bin 0 holds 1 chunk,
# the first fits), f2 (merged with the 2 units above: 3 units into bin 1,
# empty by then): mallocs' own bins 0, 0, 1 chunks, first fit none, none, 0;
# four insertions, none with a chunk below.
printf 'a 1 256
a 2 256
f 1
a 3 256
f 2
' > "$tmp/hand.trace"
run --bin-stats 1024 "$tmp/hand.trace"
[ $rc -eq 0 ] && ok || bad "--bin-stats: exit $rc: $err"
has "$out" "| malloc: chunks in its own bin | 0.667 | 1.000 | 1.000 | 1.000 | 1.000 | 1.000 |" &&
  ok || bad "--bin-stats: own bin lengths: $out"
has "$out" "| malloc: first fit at place (0 = the bin's lowest) | 0.333 | 0.333 | 0.333 |" &&
  ok || bad "--bin-stats: first fits: $out"
has "$out" "| insertion: chunks of the bin below the new one | 1.000 | 1.000 |" &&
  ok || bad "--bin-stats: insertions: $out"
has "$out" "mallocs 3, none of the own bin fits: 0.667; insertions 4 " &&
  ok || bad "--bin-stats: counts: $out"
run --bin-stats 256 "$tmp/hand.trace"
one_error "--bin-stats, too small" 1 "hand.trace: does not fit in 256 bytes"
run --bin-stats lots "$tmp/hand.trace"
one_error "--bin-stats, not a number" 2 "--bin-stats CAPACITY_BYTES"

# ---- usage ----
run --policies octave,nearest "$tmp/gen.trace"
one_error "unknown policy" 2 "unknown policy 'nearest'"
run --policies best-fit+older0 "$tmp/gen.trace"
one_error "older share 0" 2 "unknown policy 'best-fit+older0'"
run --policies octave+olderx "$tmp/gen.trace"
one_error "older share not a number" 2 "unknown policy 'octave+olderx'"
run --policies octave+older16 "$tmp/gen.trace"
[ $rc -eq 0 ] && ok || bad "octave+older16: exit $rc: $err"
has "$out" "| trace | octave+older16 |" && ok || bad "octave+older16: no header: $out"
run
one_error "no traces" 2 "TRACE..."
run "$tmp/gen.trace" --check
one_error "--check without VDEV" 2 "--check VDEV"
run --help
[ $rc -eq 0 ] && ok || bad "--help: exit $rc"
has "$out" "octave        vdev's policy" && ok || bad "--help lacks the policies: $out"

finish cli_alloc_policies
