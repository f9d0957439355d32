#!/usr/bin/env bash
# cli_priority.sh — `vdev demo --priority`: the critical model never sees an
# out-of-memory error and finishes its steps, the two secondary models finish
# theirs (recovering from theirs by halving their batch), the monitor moves
# their ceilings; scenario conflicts are usage errors. Never checks timings.
# Usage: cli_priority.sh VDEV
set -u
vdev=$1
. "${BASH_SOURCE%/*}/testlib.sh"
[ -x "$vdev" ] || { echo "cli_priority: no vdev binary at '$vdev'"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

env -u VDEV_SIM_GPUS -u VDEV_LOGICAL_DEVICES "$vdev" demo --priority --steps 10 >"$tmp/out" 2>"$tmp/err"
rc=$?
out=$(cat "$tmp/out")
[ $rc -eq 0 ] && ok || bad "demo --priority: exit $rc: $(cat "$tmp/err")"
for s in "One GPU (Simulated GPU, 3.00 GiB), three logical GPUs sharing 1.50 GiB:" \
         "  GPU:0 critical model: floor 384.00 MiB, priority critical" \
         "critical model: 20 steps, 0 out-of-memory errors; median step " \
         "model A: 10 steps, " "model B: 10 steps, " "monitor: "; do
  has "$out" "$s" && ok || bad "demo --priority: no '$s' in: $out"
done
grep -q "ceiling changes" <<<"$out" && ! grep -q "monitor: 0 looks" <<<"$out" && ok ||
  bad "demo --priority: the monitor did nothing: $out"

"$vdev" demo --priority --split >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 2 ] && head -1 "$tmp/err" | grep -qxF "vdev demo: --priority and --split are two scenarios: choose one" &&
  ok || bad "two scenarios: exit $rc: $(cat "$tmp/err")"
"$vdev" demo --help >"$tmp/out" 2>&1
grep -qF "vdev demo --priority [--steps N] [--report DIR]" "$tmp/out" && ok || bad "help lacks --priority"

finish cli_priority
