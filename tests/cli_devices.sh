#!/usr/bin/env bash
# cli_devices.sh — `vdev devices` through the command line: the table and the
# JSON on simulated GPUs, the environment's configuration in both (floors and
# priorities, and the budget a card's logical devices share), why a
# GPU's limit is less than its memory, how to get simulated GPUs when there
# is none, why there is no logical GPU when VDEV_VISIBLE_DEVICES hides them,
# one line on stderr and exit 1 for a bad environment, exit 2 for a
# bad option, the help texts (every environment variable vdev reads), and the
# thread plan (the budget divided among three streams and capped at the CPUs;
# one stream splitting each product); a write error on standard output (exit
# 1, one line, for `vdev devices`, `vdev --help` and `vdev plot` alike); a
# cluster file's fraction and simulated GPUs, named as start-up names them.
# Usage: cli_devices.sh VDEV DATA
set -u
vdev=$1
. "${BASH_SOURCE%/*}/testlib.sh"
[ -x "$vdev" ] || { echo "cli_devices: no vdev binary at '$vdev'"; exit 77; }

# Start from a clean environment: no VDEV_* or TF_* variable from outside.
for v in $(compgen -e); do
  case $v in VDEV_*|TF_*) unset "$v" ;; esac
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# run ARGS...: runs vdev, sets rc, out (stdout) and err (stderr).
run() {
  "$vdev" "$@" >"$tmp/out" 2>"$tmp/err"; rc=$?
  out=$(cat "$tmp/out"); err=$(cat "$tmp/err")
}

# ---- the table ----
export VDEV_SIM_GPUS=3x16GiB
run devices
[ $rc -eq 0 ] && ok || bad "devices: exit $rc: $err"
[ -z "$err" ] && ok || bad "devices wrote to stderr: $err"
for s in "GPUs: 3 from the sim backend (simulated GPUs from VDEV_SIM_GPUS)" \
         "Physical devices" "Logical devices" "/physical_device:CPU:0" \
         "/physical_device:GPU:2" "Simulated GPU" "/device:CPU:0" "/device:GPU:2" \
         "Collectives: vdev's ring (the sim backend has no collective library: simulated GPUs)"; do
  has "$out" "$s" && ok || bad "devices: no '$s' in: $out"
done
# GPU rows: physical 16 GiB total and free; logical 16 GiB - 1.5 GiB, growing, the whole
# card its own (its floor), normal priority; no card is shared, so no line says so.
[ "$(grep -c '^  /physical_device:GPU:[0-2] *sim *Simulated GPU *16.00 GiB *16.00 GiB$' <<<"$out")" -eq 3 ] \
  && ok || bad "devices: physical GPU rows: $out"
grep -q '^  NAME *PHYSICAL *BACKEND *POLICY *LIMIT *FLOOR *PRIORITY *RESERVED *IN USE$' <<<"$out" \
  && ok || bad "devices: logical devices' header: $out"
[ "$(grep -c '^  /device:GPU:[0-2] *GPU:[0-2] *sim *grow *14.50 GiB *14.50 GiB *normal *0 B *0 B$' <<<"$out")" -eq 3 ] \
  && ok || bad "devices: logical GPU rows: $out"
has "$out" "logical devices share a budget" && bad "devices: a card said shared: $out" || ok

# Why 16 GiB gives 14.50 GiB: the driver reserve, how much, and how to change it.
want="A GPU's limit is its free memory less the reserve TensorFlow also leaves to the
driver and libraries (its MinSystemMemory): 1536 MiB for compute capability 8.0
and later (simulated GPUs report 8.0), 1050 MiB for 7.x, 500 MiB before, and
225 MiB when less than 2 GiB is free; here 1.50 GiB on each GPU.
TF_DEVICE_MIN_SYS_MEMORY_IN_MB=N leaves N MiB instead."
[ "$(tail -5 <<<"$out")" = "$want" ] && ok || bad "devices: no reserve explained: $out"
VDEV_SIM_GPUS=16GiB,1GiB run devices
has "$out" "225 MiB when less than 2 GiB is free; here 1.50 GiB on GPU 0, 225.00 MiB on GPU 1." \
  && ok || bad "devices: reserves of two cards: $out"
VDEV_SIM_GPUS=1x8GiB run devices
has "$out" "225 MiB when less than 2 GiB is free; here 1.50 GiB." && ok || bad "devices: one card: $out"
# A card split into logical devices, even one, keeps the same reserve: its budget is
# what they share, not the one device's limit.
VDEV_SIM_GPUS=3GiB VDEV_LOGICAL_DEVICES=0:300MiB run devices
has "$out" "225 MiB when less than 2 GiB is free; here 1.50 GiB." && ok || bad "devices: a card split in one: $out"
VDEV_SIM_GPUS=16GiB,1GiB VDEV_LOGICAL_DEVICES="0:1GiB,2GiB" run devices
has "$out" "225 MiB when less than 2 GiB is free; here 1.50 GiB on GPU 0, 225.00 MiB on GPU 1." \
  && ok || bad "devices: a split card and an unsplit one: $out"
VDEV_SIM_GPUS=1x200MiB run devices
has "$out" "225 MiB when less than 2 GiB is free; here none (a reserve not smaller than the free memory is not
taken: the GPU keeps all of it)." && ok || bad "devices: a 200 MiB card: $out"
TF_DEVICE_MIN_SYS_MEMORY_IN_MB=100 run devices
[ "$(tail -2 <<<"$out")" = "A GPU's limit is its free memory less the 100 MiB that
TF_DEVICE_MIN_SYS_MEMORY_IN_MB=100 leaves to the driver and libraries." ] \
  && ok || bad "devices: TF_DEVICE_MIN_SYS_MEMORY_IN_MB: $out"
grep -q '^  /device:GPU:0 *GPU:0 *sim *grow *15.90 GiB' <<<"$out" && ok || bad "devices: 100 MiB reserve: $out"
# The value as start-up reads it (blanks around the number, leading zeros).
TF_DEVICE_MIN_SYS_MEMORY_IN_MB=" 0100 " run devices
[ "$(tail -2 <<<"$out")" = "A GPU's limit is its free memory less the 100 MiB that
TF_DEVICE_MIN_SYS_MEMORY_IN_MB=100 leaves to the driver and libraries." ] \
  && ok || bad "devices: TF_DEVICE_MIN_SYS_MEMORY_IN_MB with blanks: $out"
TF_GPU_MEMORY_FRACTION=0.5 run devices
[ "$(tail -2 <<<"$out")" = "A GPU's limit is TF_GPU_MEMORY_FRACTION=0.5 of its total memory (without it, its free
memory less the reserve TensorFlow leaves to the driver and libraries)." ] \
  && ok || bad "devices: fraction: $out"
# A cluster file's settings are the ones start-up followed, and are named as its messages
# name them: its memory_fraction replaces the environment's (and hides TensorFlow's name),
# its sim_gpus the environment's VDEV_SIM_GPUS.
echo '{"default": {"memory_fraction": "0.25"}}' >"$tmp/frac.json"
VDEV_SIM_GPUS=1x16GiB TF_GPU_MEMORY_FRACTION=0.5 VDEV_CLUSTER_CONFIG="$tmp/frac.json" run devices
grep -q '^  /device:GPU:0 *GPU:0 *sim *grow *4.00 GiB' <<<"$out" && ok || bad "devices: file's fraction: $out"
[ "$(tail -2 <<<"$out")" = "A GPU's limit is VDEV_CLUSTER_CONFIG=$tmp/frac.json: default: memory_fraction=0.25 of its total memory (without it, its free
memory less the reserve TensorFlow leaves to the driver and libraries)." ] \
  && ok || bad "devices: file's fraction explained as: $out"
echo '{"default": {"sim_gpus": "2x1GiB"}}' >"$tmp/sim.json"
VDEV_CLUSTER_CONFIG="$tmp/sim.json" run devices
has "$out" "GPUs: 2 from the sim backend (simulated GPUs from VDEV_CLUSTER_CONFIG=$tmp/sim.json: default: sim_gpus)" \
  && ok || bad "devices: file's sim_gpus: $out"
# In a cluster, the task whose devices these are comes first; alone, no task line.
TF_CONFIG='{"cluster": {"worker": ["a:1", "b:1"]}, "task": {"type": "worker", "index": 1}}' \
  VDEV_SIM_GPUS=1x1GiB run devices
[ "$(head -1 <<<"$out")" = "Task: /job:worker/replica:0/task:1 (task 1 of the 2 worker tasks)" ] \
  && ok || bad "devices in a cluster: $out $err"
VDEV_SIM_GPUS=1x1GiB run devices
has "$out" "Task: " && bad "devices alone: a task line: $out" || ok

# The environment's configuration shows in it.
VDEV_LOGICAL_DEVICES="1:4GiB,2GiB" VDEV_MEMORY_GROWTH="1:false" run devices
[ $rc -eq 0 ] && ok || bad "devices with logical devices: exit $rc: $err"
grep -q '^  /device:GPU:1 *GPU:1 *sim *preallocate *4.00 GiB *4.00 GiB *normal *4.00 GiB *0 B$' <<<"$out" \
  && ok || bad "devices: GPU:1 row: $out"
grep -q '^  /device:GPU:2 *GPU:1 *sim *preallocate *2.00 GiB *2.00 GiB *normal *2.00 GiB *0 B$' <<<"$out" \
  && ok || bad "devices: GPU:2 row: $out"
grep -q '^  /device:GPU:3 *GPU:2 *sim *grow *14.50 GiB' <<<"$out" \
  && ok || bad "devices: GPU:3 row: $out"

# Floors, ceilings and priorities: each device's floor and priority, and the card's budget
# that the ceilings (LIMIT, summing to more) share.
VDEV_SIM_GPUS=1x8GiB VDEV_LOGICAL_DEVICES="0:4GiB@critical,2GiB..6GiB,..@low" run devices
[ $rc -eq 0 ] && ok || bad "devices with floors: exit $rc: $err"
for row in '^  /device:GPU:0 *GPU:0 *sim *grow *4.00 GiB *4.00 GiB *critical *0 B *0 B$' \
           '^  /device:GPU:1 *GPU:0 *sim *grow *6.00 GiB *2.00 GiB *normal *0 B *0 B$' \
           '^  /device:GPU:2 *GPU:0 *sim *grow *6.50 GiB *0 B *low *0 B *0 B$'; do
  grep -q "$row" <<<"$out" && ok || bad "devices with floors: no row '$row' in: $out"
done
has "$out" "  /physical_device:GPU:0: 3 logical devices share a budget of 6.50 GiB; floors 6.00 GiB kept aside, the rest first come, each up to its LIMIT" \
  && ok || bad "devices with floors: no budget line: $out"

# ---- JSON ----
run devices --json
[ $rc -eq 0 ] && ok || bad "devices --json: exit $rc: $err"
[ -z "$err" ] && ok || bad "devices --json wrote to stderr: $err"
[ "$(lines "$out")" -eq 1 ] && ok || bad "devices --json: not one line"
if command -v python3 >/dev/null 2>&1; then
  python3 -m json.tool <"$tmp/out" >/dev/null && ok || bad "devices --json: invalid JSON: $out"
  python3 - "$tmp/out" <<'EOF' && ok || bad "devices --json: wrong content: $out"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["gpu_backend"] == "sim", d["gpu_backend"]
assert d["no_gpu_reason"] == ""
assert d["collectives"] == "vdev's ring (the sim backend has no collective library: simulated GPUs)", d
p, l = d["physical"], d["logical"]
assert [x["name"] for x in p] == ["/physical_device:CPU:0"] + ["/physical_device:GPU:%d" % i for i in range(3)]
assert p[0]["backend"] == "cpu" and all(x["backend"] == "sim" for x in p[1:])
assert all(x["total_bytes"] == 16 << 30 and x["free_bytes"] == 16 << 30 for x in p[1:])
assert [x["name"] for x in l] == ["/device:CPU:0"] + ["/device:GPU:%d" % i for i in range(3)]
for i, x in enumerate(l[1:]):
    assert x["physical_index"] == i and x["backend"] == "sim" and x["policy"] == "grow"
    assert x["limit_bytes"] == (16 << 30) - (1536 << 20), x
    assert x["reserved_bytes"] == 0 and x["in_use_bytes"] == 0
EOF
  VDEV_SIM_GPUS=2x8GiB VDEV_LOGICAL_DEVICES="0:1GiB,3GiB" TF_FORCE_GPU_ALLOW_GROWTH=false \
    run devices --json
  [ $rc -eq 0 ] && ok || bad "devices --json with logical devices: exit $rc: $err"
  python3 - "$tmp/out" <<'EOF' && ok || bad "devices --json: logical devices: $out"
import json, sys
d = json.load(open(sys.argv[1]))
l = d["logical"]
assert [(x["physical_index"], x["limit_bytes"], x["policy"]) for x in l[1:]] == \
    [(0, 1 << 30, "preallocate"), (0, 3 << 30, "preallocate"),
     (1, (8 << 30) - (1536 << 20), "preallocate")], l
assert all(x["reserved_bytes"] == x["limit_bytes"] for x in l[1:])
assert all(x["floor_bytes"] == x["limit_bytes"] and x["priority"] == "normal" for x in l[1:]), l
assert [x["card_budget_bytes"] for x in l[1:]] == [(8 << 30) - (1536 << 20)] * 3, l
EOF
  VDEV_SIM_GPUS=1x8GiB VDEV_LOGICAL_DEVICES="0:4GiB@critical,2GiB..6GiB,..@low" run devices --json
  python3 - "$tmp/out" <<'EOF' && ok || bad "devices --json: floors and priorities: $out"
import json, sys
l = json.load(open(sys.argv[1]))["logical"]
assert list(l[1]) == ["name", "physical_index", "backend", "policy", "limit_bytes",
                      "reserved_bytes", "in_use_bytes", "floor_bytes", "priority",
                      "card_budget_bytes"], list(l[1])
G = 1 << 30
assert [(x["floor_bytes"], x["limit_bytes"], x["priority"], x["card_budget_bytes"])
        for x in l[1:]] == [(4 * G, 4 * G, "critical", 6.5 * G), (2 * G, 6 * G, "normal", 6.5 * G),
                            (0, 6.5 * G, "low", 6.5 * G)], l
assert l[0]["floor_bytes"] == 0 and l[0]["priority"] == "normal", l[0]
EOF
else
  for k in '"gpu_backend": "sim"' '"no_gpu_reason": ""' '"physical": [' '"logical": [' \
           '"name": "/device:GPU:2"' '"policy": "grow"' '"limit_bytes": 15569256448'; do
    has "$out" "$k" && ok || bad "devices --json: no '$k' in: $out"
  done
fi

# ---- the thread plan: the budget divided among three streams, capped at the CPUs ----
OPENBLAS_NUM_THREADS=2 run devices
[ $rc -eq 0 ] && ok || bad "devices with OPENBLAS_NUM_THREADS=2: exit $rc: $err"
has "$out" "budget for products 2 (OPENBLAS_NUM_THREADS=2, OMP_NUM_THREADS unset)" && ok ||
  bad "devices: no budget line in: $out"
has "$out" "3 streams run products: one thread each, at most" && ok ||
  bad "devices: no streams line in: $out"
has "$out" "determinism switch on" && bad "devices: determinism line while off: $out" || ok
has "$out" "capped at the CPUs" && bad "devices: a budget of 2 said capped: $out" || ok
OPENBLAS_NUM_THREADS=4096 run devices
has "$out" "budget for products 4096 (OPENBLAS_NUM_THREADS=4096, OMP_NUM_THREADS unset), capped at the CPUs" &&
  ok || bad "devices: a budget of 4096 not said capped: $out"
# any whole number is a budget (no hidden upper bound): capped, not ignored
saved_blas=${OPENBLAS_NUM_THREADS-unset}
unset OPENBLAS_NUM_THREADS # (scripts/test sets it for the suite)
OMP_NUM_THREADS=5000 run devices
[ "$saved_blas" = unset ] || export OPENBLAS_NUM_THREADS="$saved_blas"
has "$out" "budget for products 5000 (OPENBLAS_NUM_THREADS unset, OMP_NUM_THREADS=5000), capped at the CPUs" &&
  [ -z "$err" ] && ok || bad "devices: a budget of 5000: $out $err"
OPENBLAS_NUM_THREADS=99999999999999999999 run devices
has "$out" "budget for products 2147483647 (OPENBLAS_NUM_THREADS=99999999999999999999, OMP_NUM_THREADS unset), capped at the CPUs" &&
  [ -z "$err" ] && ok || bad "devices: a budget beyond an int: $out $err"
env -u VDEV_SIM_GPUS VDEV_DETERMINISTIC=1 OPENBLAS_NUM_THREADS=2 "$vdev" devices \
  >"$tmp/out" 2>"$tmp/err"; rc=$?; out=$(cat "$tmp/out")
[ $rc -eq 0 ] && ok || bad "devices under VDEV_DETERMINISTIC=1: exit $rc"
has "$out" "1 stream runs products: each split over" && ok ||
  bad "devices, determinism switch: no split line in: $out"
has "$out" "determinism switch on: each product cut into blocks fixed by its shape" && ok ||
  bad "devices, determinism switch: no determinism line in: $out"
if command -v python3 >/dev/null 2>&1; then
  OPENBLAS_NUM_THREADS=2 run devices --json
  python3 - "$tmp/out" <<'EOF' && ok || bad "devices --json: threads: $out"
import json, sys
t = json.load(open(sys.argv[1]))["threads"]
assert t["budget"] == 2 and t["streams"] == 3 and t["threads_per_product"] == 1, t
assert t["cpus"] >= 1 and t["concurrent_products"] == min(2, t["cpus"]), t
assert t["kernel_threads"] >= 1 and t["deterministic"] is False, t
EOF
  env -u VDEV_SIM_GPUS OPENBLAS_NUM_THREADS=2 OMP_NUM_THREADS=1 "$vdev" devices --json \
    >"$tmp/out" 2>"$tmp/err"
  python3 - "$tmp/out" <<'EOF' && ok || bad "devices --json: threads, cpu alone: $out"
import json, sys
t = json.load(open(sys.argv[1]))["threads"]
assert t["streams"] == 1 and t["threads_per_product"] == min(2, t["cpus"]), t
assert t["concurrent_products"] == 0 and t["kernel_threads"] == 1, t
EOF
fi

# ---- errors: one line on stderr, nothing on stdout ----
expect_fail() { # expect_fail CODE SUBSTRING ARGS... (environment already set)
  local code=$1 sub=$2; shift 2
  run "$@"
  [ $rc -eq "$code" ] && ok || bad "$*: exit $rc, expected $code (stderr: $err)"
  [ -z "$out" ] && ok || bad "$*: wrote to stdout: $out"
  [ "$(lines "$err")" -eq 1 ] && ok || bad "$*: stderr is not one line: $err"
  [[ $err == "vdev devices:"* ]] && ok || bad "$*: stderr does not start 'vdev devices:': $err"
  has "$err" "$sub" && ok || bad "$*: stderr lacks '$sub': $err"
}
for spec in "3x" "" "x16GiB" "0x16GiB" "3x16Gib?" "3y16GiB" "3x16GiB," ",3x16GiB" "65x1GiB" \
            "3x512KiB"; do
  VDEV_SIM_GPUS=$spec expect_fail 1 "VDEV_SIM_GPUS" devices
  VDEV_SIM_GPUS=$spec expect_fail 1 "VDEV_SIM_GPUS" devices --json
done
VDEV_SIM_GPUS=3x expect_fail 1 "VDEV_SIM_GPUS=\"3x\": bad size in '3x'" devices
VDEV_MEMORY_GROWTH=yes expect_fail 1 \
  "vdev devices: start-up failed: VDEV_MEMORY_GROWTH=\"yes\" could not be parsed" devices
VDEV_LOGICAL_DEVICES="0:banana" expect_fail 1 "bad limit 'banana' for GPU 0" devices --json
VDEV_LOGICAL_DEVICES="0:10GiB,10GiB" expect_fail 1 \
  "/physical_device:GPU:0: its 2 logical devices' limits sum to 20.00 GiB" devices
TF_GPU_MEMORY_FRACTION=1.5 expect_fail 1 "TF_GPU_MEMORY_FRACTION=\"1.5\" is not a fraction" devices
expect_fail 2 "unknown option '--bogus'" devices --bogus
expect_fail 2 "unknown option 'extra'" devices --json extra

# ---- help ----
run --help
[ $rc -eq 0 ] && ok || bad "--help: exit $rc"
has "$out" "usage: vdev" && ok || bad "--help: no usage: $out"
has "$out" "devices" && ok || bad "--help does not list devices: $out"
# Every variable vdev reads (a getenv in src/ or tools/, or a row of the
# README's table of environment variables) has a line of its own in --help.
src=$(cd "$(dirname "$0")/.." && pwd)
vars=$( (grep -rhoE 'getenv\("[A-Z0-9_]+"\)' "$src/src" "$src/tools" | sed 's/getenv("\(.*\)")/\1/'
         sed -n '/^### Environment variables/,/^#/s/^| `\([A-Z0-9_]*\)`.*/\1/p' "$src/README.md"
         sed -n '/^### Environment variables/,/^#/s/^| `[A-Z0-9_]*`, `\([A-Z0-9_]*\)`.*/\1/p' "$src/README.md"
       ) | sort -u)
[ "$(wc -l <<<"$vars")" -ge 18 ] && ok || bad "found only these variables: $vars"
run --help
for v in $vars; do
  grep -q "^  $v  *[a-zA-Z0-9]" <<<"$out" && ok || bad "--help does not describe $v: $out"
done
run --version extra
[ $rc -eq 2 ] && [ "$err" = "vdev: --version takes no argument, not 'extra' (see 'vdev --help')" ] &&
  [ -z "$out" ] && ok || bad "--version extra: exit $rc: $out $err"
run devices --help
[ $rc -eq 0 ] && ok || bad "devices --help: exit $rc"
has "$out" "usage: vdev devices [--json]" && ok || bad "devices --help: $out"
[ -z "$err" ] && ok || bad "devices --help wrote to stderr: $err"
run help devices
[ $rc -eq 0 ] && ok || bad "help devices: exit $rc"
has "$out" "usage: vdev devices" && ok || bad "help devices: $out"
run
[ $rc -eq 2 ] && ok || bad "no command: exit $rc"
run bogus-command
[ $rc -eq 2 ] && ok || bad "unknown command: exit $rc"
has "$err" "vdev: unknown command 'bogus-command'" && ok || bad "unknown command: $err"

# ---- standard output that cannot be written: one line, exit 1 ----
if [ -w /dev/full ]; then
  for a in "" --json --help; do
    VDEV_SIM_GPUS=3x16GiB "$vdev" devices $a >/dev/full 2>"$tmp/err"; rc=$?; err=$(cat "$tmp/err")
    [ $rc -eq 1 ] && [ "$err" = "vdev devices: write error on standard output: No space left on device" ] &&
      ok || bad "devices $a >/dev/full: exit $rc: $err"
  done
  "$vdev" --help >/dev/full 2>"$tmp/err"; rc=$?; err=$(cat "$tmp/err")
  [ $rc -eq 1 ] && [ "$err" = "vdev: write error on standard output: No space left on device" ] &&
    ok || bad "vdev --help >/dev/full: exit $rc: $err"
  # what `vdev plot` said before every command did (its wording, one line)
  VDEV_SIM_GPUS=3x1GiB VDEV_TRACE_FILE="$tmp/t.json" "$vdev" demo --epochs 1 --steps 2 >/dev/null 2>&1
  "$vdev" plot "$tmp/t.json" >/dev/full 2>"$tmp/err"; rc=$?; err=$(cat "$tmp/err")
  [ $rc -eq 1 ] && [ "$err" = "vdev plot: write error on standard output: No space left on device" ] &&
    ok || bad "plot >/dev/full: exit $rc: $err"
fi

# ---- no GPUs: no VDEV_SIM_GPUS and no CUDA plugin ----
unset VDEV_SIM_GPUS
VDEV_CUDA_PLUGIN=/nonexistent/libvdev-cuda.so run devices
if has "$out" "GPUs: none"; then
  [ $rc -eq 0 ] && ok || bad "no GPUs: exit $rc: $err"
  has "$out" "GPUs: none (CUDA plugin: " && ok || bad "no GPUs: no reason: $out"
  has "$out" "ops run on the CPU" && ok || bad "no GPUs: $out"
  has "$out" "Simulated GPUs need no hardware: VDEV_SIM_GPUS=3x16GiB vdev devices" \
    && ok || bad "no GPUs: no word of simulated GPUs: $out"
  grep -q "MinSystemMemory" <<<"$out" && bad "no GPUs: explains GPU limits: $out" || ok
  grep -q '/device:GPU' <<<"$out" && bad "no GPUs: lists a GPU: $out" || ok
  VDEV_CUDA_PLUGIN=/nonexistent/libvdev-cuda.so run devices --json
  if command -v python3 >/dev/null 2>&1; then
    python3 - "$tmp/out" <<'EOF' && ok || bad "no GPUs --json: $out"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["gpu_backend"] == "none" and d["no_gpu_reason"].startswith("CUDA plugin: ")
assert len(d["physical"]) == 1 and len(d["logical"]) == 1
EOF
  fi
else
  echo "cli_devices: CUDA GPUs present, the no-GPU case was not run"
fi

# ---- a setting for a hidden GPU: applied to nothing, and said so ----
w="vdev: warning: /physical_device:GPU:0 is not visible, so the logical devices of VDEV_LOGICAL_DEVICES for it are not applied (settings name GPUs by their physical index, not by their place among the visible ones)"
VDEV_SIM_GPUS=1x4GiB,1x8GiB,1x16GiB VDEV_VISIBLE_DEVICES=2 VDEV_LOGICAL_DEVICES="0:1GiB,1GiB" run devices
[ $rc -eq 0 ] && ok || bad "hidden GPU's split: exit $rc: $err"
[ "$err" = "$w" ] && ok || bad "hidden GPU's split: stderr '$err', expected '$w'"
VDEV_SIM_GPUS=1x4GiB,1x8GiB,1x16GiB VDEV_VISIBLE_DEVICES=0,2 VDEV_LOGICAL_DEVICES="0:1GiB,1GiB" run devices
[ $rc -eq 0 ] && [ -z "$err" ] && ok || bad "visible GPU's split: exit $rc, stderr '$err'"

# ---- every GPU hidden: said so, in the text and in no_gpu_reason ----
export VDEV_SIM_GPUS=3x16GiB
for v in "" "-1"; do
  VDEV_VISIBLE_DEVICES="$v" run devices
  [ $rc -eq 0 ] && [ -z "$err" ] && ok || bad "VDEV_VISIBLE_DEVICES='$v': exit $rc, stderr '$err'"
  [ "$(head -2 <<<"$out")" = "GPUs: 3 from the sim backend (simulated GPUs from VDEV_SIM_GPUS)
No logical GPU: VDEV_VISIBLE_DEVICES=\"$v\" hides every GPU; ops run on the CPU." ] \
    && ok || bad "VDEV_VISIBLE_DEVICES='$v': no reason given: $out"
  grep -q '/device:GPU' <<<"$out" && bad "VDEV_VISIBLE_DEVICES='$v': lists a GPU: $out" || ok
  grep -q "MinSystemMemory" <<<"$out" &&
    bad "VDEV_VISIBLE_DEVICES='$v': explains GPU limits: $out" || ok
  VDEV_VISIBLE_DEVICES="$v" run devices --json
  why="VDEV_VISIBLE_DEVICES=\\\"$v\\\" hides every GPU"
  has "$out" "\"gpu_backend\": \"sim\", \"no_gpu_reason\": \"$why\"" \
    && ok || bad "VDEV_VISIBLE_DEVICES='$v' --json: no reason given: $out"
done
echo '{"default": {"visible_devices": ""}}' >"$tmp/vis.json"
VDEV_CLUSTER_CONFIG="$tmp/vis.json" run devices
why="VDEV_CLUSTER_CONFIG=$tmp/vis.json: default: visible_devices=\"\" hides every GPU"
has "$out" "No logical GPU: $why; ops run on the CPU." \
  && ok || bad "devices: file's visible_devices: $out"
VDEV_VISIBLE_DEVICES=1 run devices
has "$out" "No logical GPU" && bad "VDEV_VISIBLE_DEVICES=1: said no logical GPU: $out" || ok
unset VDEV_SIM_GPUS

# ---- a fraction of 0 is none: the limit is explained as free less the reserve ----
VDEV_SIM_GPUS=1x4GiB VDEV_MEMORY_FRACTION=0 run devices
[ $rc -eq 0 ] && ok || bad "fraction 0: exit $rc: $err"
has "$out" "A GPU's limit is its free memory less the reserve" && ok || bad "fraction 0 explained as: $out"
if has "$out" "VDEV_MEMORY_FRACTION=0"; then bad "fraction 0 named as the limit: $out"; else ok; fi

finish
