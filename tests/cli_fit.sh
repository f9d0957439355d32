#!/usr/bin/env bash
# cli_fit.sh — `vdev fit` through the command line: usage errors (exit 2, one
# line "vdev fit: ..." on stderr), bad input (exit 1), the table, the JSON
# (keys and values that must hold on any machine, checked with python3 where
# installed), the smallest cards in whole MiB and the preallocation split, each
# rerun as printed, a card size with a fraction of a byte (rounded down),
# --split naming another GPU (refused), at most 16 traces, known GPU names and
# their budgets, the preallocation split as `vdev replay` measures each
# trace's capacity with its pre-live bytes, a model that does not fit (exit 1,
# with the line it fails at), an empty trace (exit 1), the exit statuses in
# --help, a write error on stdout (exit 1), the environment set aside but for
# the driver reserve (a cluster file, malformed settings; a note naming the
# device settings); every order of the models' starts (one that fails named),
# cards of 225 MiB or less (all budget, searched too), a repeated option, a
# --preallocate device without a floor, malformed pre-live fields, whole names
# and whole-MiB smallest limits. Never checks timings. test_fit.c checks the answers
# against an actual run.
# Usage: cli_fit.sh VDEV DATA (DATA/traces: the repository's data/traces)
set -u
vdev=$1
data=${2:-}
. "${BASH_SOURCE%/*}/testlib.sh"
[ -x "$vdev" ] || { echo "cli_fit: no vdev binary at '$vdev'"; exit 77; }
[ -n "$data" ] && [ -f "$data/traces/mlp.trace" ] ||
  { echo "FAIL: cli_fit: no traces in '$data' (the repository's data/traces)"; exit 1; }
mlp=$data/traces/mlp.trace
tr=$data/traces/transformer.trace

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
run() {
  env -u VDEV_SIM_GPUS -u TF_DEVICE_MIN_SYS_MEMORY_IN_MB "$vdev" "$@" >"$tmp/out" 2>"$tmp/err"
  rc=$?
  out=$(cat "$tmp/out"); err=$(cat "$tmp/err")
}
# error WHAT CODE MESSAGE: exit CODE, stderr exactly MESSAGE, nothing on stdout.
error() {
  [ $rc -eq "$2" ] && ok || bad "$1: exit $rc, expected $2"
  [ "$err" = "$3" ] && ok || bad "$1: stderr '$err', expected '$3'"
  [ -z "$out" ] && ok || bad "$1: wrote to stdout: $out"
}

# ---- usage errors ----
run fit "$mlp"
error "no card" 2 "vdev fit: no card given (--card 24GiB or --card h100) (see 'vdev fit --help')"
run fit --card 4GiB
error "no trace" 2 "vdev fit: no trace given (see 'vdev fit --help')"
run fit --card 4GiX "$mlp"
error "bad card" 2 "vdev fit: --card '4GiX' is neither a size of 1 MiB or more (24GiB) nor a known GPU (h200, h100, a100-80gb, a100-40gb, l40s, a10, l4, t4, rtx5090, rtx4090, rtx3090)"
run fit --card 4GiB --split "1GiB@urgent" "$mlp"
error "bad split" 2 "vdev fit: --split=\"1GiB@urgent\": bad priority 'urgent' for GPU 0 (low, normal, high or critical)"
run fit --card 4GiB --split "1GiB,1GiB" "$mlp"
error "split count" 2 "vdev fit: --split gives 2 logical devices for 1 trace (one each)"
run fit --card 4GiB --frobnicate "$mlp"
error "unknown option" 2 "vdev fit: unknown option '--frobnicate' (see 'vdev fit --help')"
run fit --card
error "card without value" 2 "vdev fit: --card needs a value (see 'vdev fit --help')"
# A repeated --card or --split is refused, not the last one taken.
run fit --card 4GiB --card 8GiB "$mlp"
error "--card twice" 2 "vdev fit: --card given twice ('4GiB' and '8GiB'): give one"
run fit --card 4GiB --split 1GiB --split 2GiB "$mlp"
error "--split twice" 2 "vdev fit: --split given twice ('1GiB' and '2GiB'): give one"
# --preallocate preallocates each device's floor, as a run with growth off: a device without
# a floor would grow in such a run, so it is refused; one trace without --split preallocates
# the whole budget (a run's unsplit card).
run fit --card 4GiB --preallocate "$mlp" "$tr"
error "--preallocate without --split" 2 "vdev fit: --preallocate: GPU:0 has no floor (no --split for several traces), so it would grow, as in a run with growth off; give each trace a floor or a limit in --split (e.g. --split 8GiB,4GiB)"
run fit --card 4GiB --preallocate --split 1GiB,.. "$mlp" "$tr"
error "--preallocate with '..'" 2 "vdev fit: --preallocate: GPU:1 has no floor ('..' in --split), so it would grow, as in a run with growth off; give each trace a floor or a limit in --split (e.g. --split 8GiB,4GiB)"
run fit --json --no-search --card 4GiB --preallocate "$mlp"
[ $rc -eq 0 ] && has "$out" '"peak_reserved_bytes": 2684354560' && ok ||
  bad "--preallocate, one trace: not the whole budget preallocated: exit $rc: $out $err"

# ---- bad input ----
# a trace whose writer was stopped mid-line: its whole lines are fitted, with a note
head -c -1 "$mlp" >"$tmp/cut.trace"
last=$(tail -n 1 "$tmp/cut.trace")
n=$(grep -c '^[af] ' "$tmp/cut.trace")
run fit --card 4GiB "$tmp/cut.trace"
[ $rc -eq 0 ] && ok || bad "cut trace: exit $rc: $err"
[ "$err" = "vdev fit: note: $tmp/cut.trace:$(wc -l <"$mlp"): the last line '$last' is cut short (no newline): dropped; $((n - 1)) events read" ] &&
  ok || bad "cut trace: stderr '$err'"
run fit --card 4GiB "$tmp/none.trace"
[ $rc -eq 1 ] && ok || bad "missing trace: exit $rc"
[[ $err == "vdev fit: "*"none.trace"* ]] && [ "$(lines "$err")" -eq 1 ] && ok ||
  bad "missing trace: stderr '$err'"
# A trace without one allocation (an empty file, comments only) is refused.
: >"$tmp/empty.trace"
printf '# trace v1 model=none\n' >"$tmp/comments.trace"
for t in empty comments; do
  run fit --card 4GiB "$mlp" "$tmp/$t.trace"
  error "$t trace" 1 "vdev fit: $tmp/$t.trace: no allocation events, nothing to fit"
  run fit --json --card 24GiB "$tmp/$t.trace"
  error "$t trace --json" 1 "vdev fit: $tmp/$t.trace: no allocation events, nothing to fit"
done
run fit --card 4GiB --split "2GiB,1GiB" "$mlp" "$tr"
error "floors over budget" 1 "vdev fit: /physical_device:GPU:0: its 2 logical devices' limits sum to 3.00 GiB (3221225472 bytes), more than the card's budget of 2.50 GiB (2684354560 bytes: 4.00 GiB free less the 1.50 GiB driver reserve)"

# A header's pre-live fields that cannot be read are an error naming the line, not skipped.
for h in "pre_live_bytes=4e7 pre_live_blocks=4" "pre_live_blocks=four pre_live_bytes=40" \
         "pre_live_bytes=40000000"; do
  printf '# trace v1 ids=never-reused %s\na 0 1024\nf 0\n' "$h" >"$tmp/pl.trace"
  run fit --card 4GiB "$tmp/pl.trace"
  [ $rc -eq 1 ] && [ -z "$out" ] && [[ $err == "vdev fit: $tmp/pl.trace:1: pre_live_"* ]] && ok ||
    bad "pre-live header '$h': exit $rc, stderr '$err', stdout '$out'"
done

# ---- the order of the models' starts ----
# B's regions grow 2, 4, 8 and 16 MiB (30 MiB) when it starts alone first; then 57 MiB of the
# 87 MiB card are left for A's one 64 MiB request. In the round robin, and with A first, A
# takes its region first and B's last region is cut to what is left: both fit. So fit says no,
# naming the order.
M=1048576
printf '# trace v1 ids=never-reused\na 0 %d\n' $((64 * M)) >"$tmp/A.trace"
printf '# trace v1 ids=never-reused\na 0 %d\na 1 %d\na 2 %d\na 3 %d\n' \
  $((1 * M)) $((3 * M)) $((5 * M)) $((9 * M)) >"$tmp/B.trace"
run fit --no-search --card 87MiB "$tmp/A.trace" "$tmp/B.trace"
[ $rc -eq 1 ] && ok || bad "start order: exit $rc: $out"
has "$out" "order     peak-aligned round-robin, then every order of the models' starts (2)" && ok ||
  bad "start order: no order line: $out"
has "$out" "the round robin fits, but not when the models start in the order GPU:1, GPU:0 (each up to its peak before the next starts)" &&
  ok || bad "start order: the failing order not named: $out"
has "$out" "GPU:0   A.trace                0 B        87.00 MiB  normal   no" && ok ||
  bad "start order: A not marked: $out"
has "$out" "GPU:0 fails at line 2 of $tmp/A.trace: " && ok || bad "start order: no failure: $out"
run fit --json --no-search --card 87MiB "$tmp/A.trace" "$tmp/B.trace"
has "$out" '"start_orders": 2, "failing_order": [1, 0], "all_fit": false' && ok ||
  bad "start order: json: $out"
# The searches check every order: the smallest card found holds both in either order.
run fit --json --card 87MiB "$tmp/A.trace" "$tmp/B.trace"
g=$(grep -o '"growth": [0-9]*' <<<"$out" | grep -o '[0-9]*$')
run fit --no-search --card "$((${g:-0} / M))MiB" "$tmp/A.trace" "$tmp/B.trace"
[ $rc -eq 0 ] && ok || bad "start order: the smallest card ${g:-?} fails in some order: $out"
run fit --json --card 87MiB --split ..64MiB,..23MiB "$tmp/A.trace" "$tmp/B.trace"
has "$out" '"smallest_limit_bytes": 67108864' && ok || bad "start order: A's smallest limit: $out"

# ---- cards of 225 MiB or less: the whole card is the budget ----
# The driver reserve (225 MiB under 2 GiB) is left aside only from a card larger than it, as
# TensorFlow does, so a 141 MiB card holds 140 MiB (growth: a 2 MiB region, then one of 139
# MiB) that a 226 MiB card (1 MiB of budget) does not: the smallest card is searched below
# that edge too, for growth and for preallocation (one 140 MiB region), and on a card of
# compute capability 7 (t4) alike.
printf '# trace v1 ids=never-reused\na 0 %d\na 1 %d\n' $M $((139 * M)) >"$tmp/C.trace"
for c in 16GiB t4; do
  run fit --card $c "$tmp/C.trace"
  has "$out" "smallest card for these traces side by side: growth 141MiB (141.00 MiB), preallocation 140MiB (140.00 MiB); growth needs 1MiB more" &&
    ok || bad "card under the reserve ($c): $out $err"
done
run fit --no-search --card 141MiB "$tmp/C.trace"
[ $rc -eq 0 ] && ok || bad "141 MiB card: exit $rc: $out $err"
run fit --no-search --card 140MiB "$tmp/C.trace"
[ $rc -eq 1 ] && ok || bad "140 MiB card, growth: exit $rc: $out $err"
run fit --no-search --preallocate --card 140MiB "$tmp/C.trace"
[ $rc -eq 0 ] && has "$out" "reserve   none: the card is too small for the 225.00 MiB driver reserve, so none is left aside, as TensorFlow" &&
  ok || bad "140 MiB card: exit $rc: $out $err"
run fit --no-search --preallocate --card 139MiB "$tmp/C.trace"
[ $rc -eq 1 ] && ok || bad "139 MiB card, preallocated: exit $rc: $out"
# The error for limits over such a card's budget says no reserve was left aside.
run fit --card 139MiB --preallocate --split 140MiB "$tmp/C.trace"
error "limit over a card under the reserve" 1 "vdev fit: /physical_device:GPU:0: its 1 logical device's limit is 140.00 MiB (146800640 bytes), more than the card's budget of 139.00 MiB (145752064 bytes: 139.00 MiB free: the card is too small for the 225.00 MiB driver reserve, so none is left aside, as TensorFlow)"

# The whole of each trace's name, however long, so that two similar names can be told apart.
cp "$tmp/A.trace" "$tmp/a_very_long_trace_name_for_model_number_one.trace"
cp "$tmp/A.trace" "$tmp/a_very_long_trace_name_for_model_number_two.trace"
run fit --no-search --card 1GiB "$tmp"/a_very_long_trace_name_for_model_number_*.trace
has "$out" "GPU:0   a_very_long_trace_name_for_model_number_one.trace 0 B" &&
  has "$out" "GPU:1   a_very_long_trace_name_for_model_number_two.trace 0 B" && ok ||
  bad "long trace names: $out"

# The smallest limit is a whole MiB, as searched and as --split takes it: it fits, 1 MiB
# less does not.
run fit --card 4GiB "$mlp"
[[ $out =~ GPU:0\ +mlp.trace\ .*\ ([0-9]+)MiB\ +[0-9.]+\ GiB ]] && ok || bad "whole MiB limit: $out"
l=${BASH_REMATCH[1]:-0}
run fit --no-search --card 4GiB --split "..${l}MiB" "$mlp"
[ $rc -eq 0 ] && ok || bad "smallest limit ${l}MiB does not fit: $out"
run fit --no-search --card 4GiB --split "..$((l - 1))MiB" "$mlp"
[ $rc -eq 1 ] && ok || bad "smallest limit ${l}MiB: 1 MiB less fits: $out"

# ---- the table ----
run fit --card 4GiB --split "1GiB@critical,..@low" "$mlp" "$tr"
[ $rc -eq 0 ] && ok || bad "table: exit $rc: $err"
for s in "card      4GiB: 4.00 GiB, budget 2.50 GiB (simulated, one logical device per trace), growth" \
         "order     peak-aligned round-robin, then every order of the models' starts (2)" \
         "device  trace                  floor      ceiling    priority fits  peak in use peak reserved smallest limit margin" \
         "GPU:0   mlp.trace              1.00 GiB   1.00 GiB   critical yes" \
         "GPU:1   transformer.trace      0 B        2.50 GiB   low      yes" \
         "smallest card for these traces side by side: growth "; do
  has "$out" "$s" && ok || bad "table: no '$s' in: $out"
done
[ -z "$err" ] && ok || bad "table: stderr: $err"

# The smallest cards in whole MiB, as --card takes them, and the split the preallocation
# answer assumes, as --split takes it: each, run as printed, fits.
line=$(grep '^smallest card for these traces side by side: ' <<<"$out")
[[ $line =~ ^smallest\ card\ for\ these\ traces\ side\ by\ side:\ growth\ ([0-9]+)MiB\ \([0-9.]+\ GiB\),\ preallocation\ ([0-9]+)MiB\ \([0-9.]+\ GiB\)\;\ growth\ needs\ ([0-9]+)MiB\ more$ ]] &&
  ok || bad "table: smallest card line: '$line'"
g=${BASH_REMATCH[1]:-0}; p=${BASH_REMATCH[2]:-0}
[ "${BASH_REMATCH[3]:-x}" = "$((g - p))" ] && ok || bad "table: growth needs ${BASH_REMATCH[3]:-?}MiB more, not $((g - p)): $line"
split_line=$(grep '^preallocation: ' <<<"$out")
[[ $split_line =~ ^preallocation:\ each\ model\'s\ device\ preallocated\ to\ the\ smallest\ region\ it\ fits\ in:\ --preallocate\ --split\ ([0-9]+MiB,[0-9]+MiB)$ ]] &&
  ok || bad "table: no split for the preallocation answer: '$split_line'"
pre_split=${BASH_REMATCH[1]:-none}
# each region is `vdev replay`'s min capacity with the trace's pre-live bytes, in whole MiB
want=
for t in "$mlp" "$tr"; do
  run replay --json --repeats 1 "$t"
  w=$(grep -o '"min_capacity_with_pre_live_bytes": [0-9]*' <<<"$out" | grep -o '[0-9]*$')
  want+="${want:+,}$(( (${w:-0} + 1048575) / 1048576 ))MiB"
done
[ "$pre_split" = "$want" ] && ok || bad "preallocation split $pre_split, replay says $want"
run fit --no-search --card "${g}MiB" "$mlp" "$tr"
[ $rc -eq 0 ] && ok || bad "growth card ${g}MiB as printed: exit $rc: $out"
run fit --no-search --card "$((g - 1))MiB" "$mlp" "$tr"
[ $rc -eq 1 ] && ok || bad "growth card $((g - 1))MiB (1 MiB less): exit $rc"
run fit --no-search --preallocate --split "$pre_split" --card "${p}MiB" "$mlp" "$tr"
[ $rc -eq 0 ] && ok || bad "preallocation card ${p}MiB --split $pre_split as printed: exit $rc: $out $err"

# A card's size with a fraction of a byte is rounded down, as VDEV_SIM_GPUS does
# (1.40 GiB is what fit itself printed before it printed whole MiB).
run fit --no-search --card 1.40GiB "$mlp"
[ $rc -eq 0 ] && has "$out" "card      1.40GiB: 1.40 GiB, budget " && ok ||
  bad "--card 1.40GiB: exit $rc: $out $err"
run fit --json --no-search --card 1.40GiB "$mlp"
has "$out" '"total_bytes": 1503238400,' && ok || bad "--card 1.40GiB: not rounded down to 256: $out"
run fit --card 512KiB "$mlp"
error "card under 1 MiB" 2 "vdev fit: --card '512KiB' is neither a size of 1 MiB or more (24GiB) nor a known GPU (h200, h100, a100-80gb, a100-40gb, l40s, a10, l4, t4, rtx5090, rtx4090, rtx3090)"

# ---- a model that does not fit ----
run fit --card 4GiB --split "..400MiB,.." --no-search "$mlp" "$tr"
[ $rc -eq 1 ] && ok || bad "no fit: exit $rc"
has "$out" "GPU:0   mlp.trace              0 B        400.00 MiB normal   no" && ok ||
  bad "no fit: table: $out"
has "$out" "GPU:0 fails at line " && has "$out" "mlp.trace: OOM when allocating " && ok ||
  bad "no fit: no failure line: $out"

# ---- JSON and known cards ----
run fit --json --card h100 "$mlp" "$tr"
[ $rc -eq 0 ] && ok || bad "json: exit $rc: $err"
if command -v python3 >/dev/null 2>&1; then
  python3 - "$tmp/out" <<'EOF' && ok || bad "json: values: $out"
import json, sys
r = json.load(open(sys.argv[1]))
assert list(r) == ["card", "policy", "interleaving", "start_orders", "failing_order", "all_fit",
                   "models", "min_card_bytes"], list(r)
assert r["start_orders"] == 2 and r["failing_order"] is None, r
assert r["card"]["name"] == "NVIDIA H100 80GB" and r["card"]["total_bytes"] == 81559 << 20, r["card"]
assert r["card"]["budget_bytes"] == (81559 - 1536) << 20, r["card"]
assert r["policy"] == "growth" and r["interleaving"] == "peak-aligned round-robin", r
assert r["all_fit"] is True and len(r["models"]) == 2, r
for i, m in enumerate(r["models"]):
    assert m["device"] == "/device:GPU:%d" % i and m["fits"] is True, m
    assert m["failed_at_line"] is None and m["error"] is None, m
    assert m["ceiling_bytes"] == r["card"]["budget_bytes"] and m["floor_bytes"] == 0, m
    assert 0 < m["peak_in_use_bytes"] <= m["peak_reserved_bytes"], m
    assert m["peak_in_use_bytes"] <= m["smallest_limit_bytes"] <= m["ceiling_bytes"], m
    assert m["margin_bytes"] == m["ceiling_bytes"] - m["smallest_limit_bytes"], m
c = r["min_card_bytes"]
assert c["growth"] > 0 and c["preallocate"] > 0 and len(c["preallocate_limits_bytes"]) == 2, c
assert c["preallocate"] >= sum(c["preallocate_limits_bytes"]), c
EOF
fi
run fit --json --no-search --card T4 "$mlp"
has "$out" '"name": "NVIDIA T4", "total_bytes": 16106127360, "budget_bytes": 15005122560' && ok ||
  bad "t4: card: $out"
has "$out" '"min_card_bytes": null' && ok || bad "t4: --no-search: $out"
# A T4 (compute capability 7) reserves 1050 MiB, but under 2 GiB free TensorFlow's 225 MiB:
# the smallest card for the MLP is then well under 1 GiB (675 MiB), as on other cards.
run fit --json --card t4 "$mlp"
g=$(grep -o '"growth": [0-9]*' <<<"$out" | head -1 | awk '{print $2}')
[ -n "$g" ] && [ "$g" -lt 1073741824 ] && ok || bad "t4: smallest card '$g' not under 1 GiB: $out"

# A VDEV_LOGICAL_DEVICES entry as written, with its GPU index, is the same split.
run fit --json --no-search --card 24GiB --split 0:14GiB,8GiB "$mlp" "$tr"
[ $rc -eq 0 ] && has "$out" '"ceiling_bytes": 15032385536' && has "$out" '"ceiling_bytes": 8589934592' &&
  ok || bad "--split 0:14GiB,8GiB: exit $rc: $out $err"
# fit simulates one card, GPU 0: another GPU's index, or several GPUs, are refused.
run fit --no-search --card 24GiB --split 1:8GiB "$mlp"
error "--split 1:8GiB" 2 "vdev fit: --split '1:8GiB' names GPU 1: fit simulates one card, GPU 0 (write '0:8GiB' or '8GiB')"
run fit --no-search --card 24GiB --split "0:8GiB;1:2GiB" "$mlp"
error "--split 0:8GiB;1:2GiB" 2 "vdev fit: --split '0:8GiB;1:2GiB' lists more than one GPU: fit simulates one card (write its logical devices alone, e.g. 16GiB,8GiB)"
run fit --json --no-search --card 24GiB --split 00:8GiB "$mlp"
[ $rc -eq 0 ] && has "$out" '"ceiling_bytes": 8589934592' && ok || bad "--split 00:8GiB: exit $rc: $err"

# At most 16 traces, as --help says.
args=(); for i in $(seq 17); do args+=("$mlp"); done
run fit --no-search --card 24GiB "${args[@]}"
error "17 traces" 2 "vdev fit: more than 16 traces"

# ---- the environment: only TF_DEVICE_MIN_SYS_MEMORY_IN_MB is read ----
# run_env VAR=VALUE... -- ARGS: run with those variables set.
run_env() {
  local vars=()
  while [ "$1" != -- ]; do vars+=("$1"); shift; done
  shift
  env -u VDEV_SIM_GPUS -u TF_DEVICE_MIN_SYS_MEMORY_IN_MB "${vars[@]}" "$vdev" "$@" \
    >"$tmp/out" 2>"$tmp/err"
  rc=$?
  out=$(cat "$tmp/out"); err=$(cat "$tmp/err")
}
# '-': one trace from standard input, named so in the table; given twice, refused
"$vdev" fit --card 24GiB - "$mlp" <"$mlp" >"$tmp/out" 2>"$tmp/err"; rc=$?
out=$(cat "$tmp/out"); err=$(cat "$tmp/err")
[ $rc -eq 0 ] && ok || bad "fit - mlp: exit $rc: $err"
has "$out" "GPU:0   (standard input)       0 B" && has "$out" "GPU:1   mlp.trace              0 B" &&
  ok || bad "fit - mlp: the table: $out"
[ "$(grep '^GPU:0' <<<"$out" | cut -c40-)" = "$(grep '^GPU:1' <<<"$out" | cut -c40-)" ] && ok ||
  bad "fit - mlp: the trace from standard input did not fit as the file: $out"
"$vdev" fit --card 24GiB - - <"$mlp" >"$tmp/out" 2>"$tmp/err"; rc=$?
[ $rc -eq 2 ] && [ "$(cat "$tmp/err")" = "vdev fit: '-' (standard input) given twice: it can be \
read once; give the other traces as files" ] && ok || bad "fit - -: exit $rc: $(cat "$tmp/err")"

note() { echo "vdev fit: note: set aside $1: fit simulates --card's card, split as --split says (see 'vdev fit --help')"; }
# A cluster file's settings would replace fit's own: its sim_gpus the card (a 300 MiB card,
# 75 MiB of budget, on which the MLP does not fit), its visible_devices "-1" the card's only
# GPU (fit then had no device to replay on). Both are set aside, with a note.
echo '{"default": {"sim_gpus": "1x300MiB"}}' >"$tmp/sim.json"
echo '{"default": {"visible_devices": "-1"}}' >"$tmp/hide.json"
for c in sim hide; do
  run_env VDEV_CLUSTER_CONFIG="$tmp/$c.json" -- fit --no-search --card 24GiB "$mlp"
  [ $rc -eq 0 ] && ok || bad "cluster file $c: exit $rc: $out $err"
  has "$out" "card      24GiB: 24.00 GiB, budget 22.50 GiB" && ok || bad "cluster file $c: $out"
  [ "$err" = "$(note VDEV_CLUSTER_CONFIG)" ] && ok || bad "cluster file $c: stderr '$err'"
done
# The device settings set aside, malformed or not, are named in one note, in this order.
run_env VDEV_MEMORY_FRACTION=0.1 VDEV_SIM_GPUS=bad VDEV_MEMORY_GROWTH=bad TF_CONFIG='{bad' \
  VDEV_LOGICAL_DEVICES=0:1GiB,1GiB -- fit --json --no-search --card 24GiB "$mlp"
[ $rc -eq 0 ] && has "$out" '"budget_bytes": 24159191040' && ok ||
  bad "device settings: exit $rc: $out $err"
[ "$err" = "$(note "VDEV_SIM_GPUS, VDEV_LOGICAL_DEVICES, VDEV_MEMORY_GROWTH, VDEV_MEMORY_FRACTION")" ] &&
  ok || bad "device settings: stderr '$err'"
# The settings the answer does not depend on are set aside silently, malformed or not.
for v in VDEV_PLACEMENT=bad VDEV_SOFT_DEVICE_PLACEMENT=bad VDEV_DETERMINISTIC=bad 'TF_CONFIG={bad' \
         VDEV_LOG_DEVICE_PLACEMENT=bad VDEV_OOM_REPORT=bad VDEV_METRICS_ADDR=bad; do
  run_env "$v" -- fit --no-search --card 24GiB "$mlp"
  [ $rc -eq 0 ] && [ -z "$err" ] && has "$out" "GPU:0   mlp.trace" && ok ||
    bad "$v: exit $rc, stderr '$err'"
done
# The one variable fit reads is checked as at any start-up.
run_env TF_DEVICE_MIN_SYS_MEMORY_IN_MB=x -- fit --no-search --card 24GiB "$mlp"
error "bad reserve" 1 'vdev fit: TF_DEVICE_MIN_SYS_MEMORY_IN_MB="x" is not a whole number of MiB >= 0'
run_env TF_DEVICE_MIN_SYS_MEMORY_IN_MB=512 -- fit --json --no-search --card 24GiB "$mlp"
[ $rc -eq 0 ] && [ -z "$err" ] && has "$out" '"budget_bytes": 25232932864' && ok ||
  bad "reserve 512 MiB: exit $rc: $out $err"

# ---- help ----
run fit --help
[ $rc -eq 0 ] && has "$out" "usage: vdev fit --card SIZE|GPU" && has "$out" "peak-aligned round-robin" &&
  ok || bad "help: $out"
# The exit statuses it lists are the ones it gives: 0, 1, and 2 for usage errors.
has "$out" "Exit status: 0 when every model fits, 1 when one does not or on an error" && ok ||
  bad "help: no exit status 0 and 1: $out"
has "$out" "2 on a usage error" && ok || bad "help: no exit status 2: $out"
has "$out" "Environment: fit reads TF_DEVICE_MIN_SYS_MEMORY_IN_MB (the driver reserve) and" &&
  has "$out" "VDEV_CLUSTER_CONFIG and TF_CONFIG, placement, determinism, traces, metrics." && ok ||
  bad "help: no word of the environment: $out"
has "$out" "At most 16 traces (one logical device each, as on one card); one TRACE may" &&
  has "$out" "be '-', standard input." && ok ||
  bad "help: no limit of 16 traces: $out"
has "$out" "(in whole MiB, as --card takes it; preallocation with the --split it assumes)." && ok ||
  bad "help: no word of the smallest cards' form: $out"
run --help
has "$out" "  fit        will these models fit this card" && ok || bad "vdev --help lacks fit: $out"

# ---- standard output that cannot be written: one line, exit 1 ----
if [ -w /dev/full ]; then
  for j in --json ""; do
    env -u VDEV_SIM_GPUS "$vdev" fit $j --no-search --card 24GiB "$mlp" >/dev/full 2>"$tmp/err"; rc=$?
    err=$(cat "$tmp/err")
    [ $rc -eq 1 ] && [ "$err" = "vdev fit: write error on standard output: No space left on device" ] &&
      ok || bad "fit $j >/dev/full: exit $rc: $err"
  done
fi

finish cli_fit
