#!/usr/bin/env bash
# cli_config_env.sh — configuration from the environment through the vdev
# command: logical CPUs ("cpu:N" in VDEV_LOGICAL_DEVICES) in `vdev devices`,
# table and JSON; a misspelt variable warned about once on stderr while the
# command still succeeds; a limit written in MiB refused with exit 1 and one
# line naming the variable; a driver reserve that overrides a memory fraction
# (TensorFlow's rule) said once on stderr; a thread count that is not a
# number ignored, as OpenBLAS ignores it, with one warning; `vdev --help`
# names the variables start-up does not check and both ways to hide every GPU
# (empty or -1); the caps on logical devices (16 per GPU, 128 logical GPUs in
# all) are refused as the README says. Usage: cli_config_env.sh VDEV SHARED
set -u
vdev=$1
. "${BASH_SOURCE%/*}/testlib.sh"
[ -x "$vdev" ] || { echo "cli_config_env: no vdev binary at '$vdev'"; exit 77; }

for v in $(compgen -e); do
  case $v in VDEV_*|TF_*) unset "$v" ;; esac
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
run() {
  "$vdev" "$@" >"$tmp/out" 2>"$tmp/err"; rc=$?
  out=$(cat "$tmp/out"); err=$(cat "$tmp/err")
}
export VDEV_SIM_GPUS=2x4GiB

# Logical CPUs, then the logical GPUs.
VDEV_LOGICAL_DEVICES="cpu:3;1:1GiB,1GiB" run devices
[ $rc -eq 0 ] && ok || bad "devices with cpu:3: exit $rc: $err"
[ -z "$err" ] && ok || bad "devices with cpu:3 wrote to stderr: $err"
[ "$(grep -c '^  /device:CPU:[0-2] *CPU:0 *cpu *grow ' <<<"$out")" -eq 3 ] \
  && ok || bad "devices: three logical CPU rows: $out"
grep -q '^  /device:GPU:2 *GPU:1 *sim *grow *1.00 GiB' <<<"$out" \
  && ok || bad "devices: GPU:2 row: $out"
[ "$(grep -n '/device:' <<<"$out" | head -1 | grep -c 'CPU:0')" -eq 1 ] \
  && ok || bad "devices: CPU:0 not first: $out"
VDEV_LOGICAL_DEVICES="cpu:2" run devices --json
[ $rc -eq 0 ] && ok || bad "devices --json with cpu:2: exit $rc: $err"
if command -v python3 >/dev/null 2>&1; then
  python3 - "$tmp/out" <<'PY' && ok || bad "devices --json: logical CPUs: $out"
import json, sys
d = json.load(open(sys.argv[1]))
names = [l["name"] for l in d["logical"]]
sys.exit(0 if names == ["/device:CPU:0", "/device:CPU:1", "/device:GPU:0", "/device:GPU:1"] else 1)
PY
fi

# A misspelt variable: one warning, and the command goes on.
VDEV_MEMORY_GROWT=false run devices
[ $rc -eq 0 ] && ok || bad "devices with VDEV_MEMORY_GROWT: exit $rc: $err"
[ "$err" = "vdev: warning: VDEV_MEMORY_GROWT is set but vdev reads no such variable, so it is ignored; did you mean VDEV_MEMORY_GROWTH?" ] \
  && ok || bad "devices with VDEV_MEMORY_GROWT: stderr: $err"
grep -q '^  /device:GPU:0 *GPU:0 *sim *grow ' <<<"$out" && ok || bad "growth not default: $out"

# A limit in MiB where bytes are meant: exit 1, one line.
VDEV_LOGICAL_DEVICES="0:4096,2048" run devices
[ $rc -eq 1 ] && ok || bad "devices with 0:4096,2048: exit $rc"
[ "$(lines "$err")" -eq 1 ] && ok || bad "devices with 0:4096,2048: stderr not one line: $err"
grep -qF 'VDEV_LOGICAL_DEVICES="0:4096,2048": limit '"'"'4096'"'"' for GPU 0 is 4096 bytes, less than 1 MiB (did you mean 4096MiB?)' <<<"$err" \
  && ok || bad "devices with 0:4096,2048: $err"

# A reserve and a fraction: the reserve wins, as in TensorFlow, and says so.
VDEV_MEMORY_FRACTION=0.5 run devices
grep -q '^  /device:GPU:0 *GPU:0 *sim *grow *2.00 GiB' <<<"$out" && [ -z "$err" ] \
  && ok || bad "fraction 0.5 alone: $out $err"
VDEV_MEMORY_FRACTION=0.5 TF_DEVICE_MIN_SYS_MEMORY_IN_MB=100 run devices
[ $rc -eq 0 ] && ok || bad "fraction and reserve: exit $rc: $err"
grep -q '^  /device:GPU:0 *GPU:0 *sim *grow *3.90 GiB' <<<"$out" && ok || bad "the reserve's budget: $out"
[ "$err" = 'vdev: warning: TF_DEVICE_MIN_SYS_MEMORY_IN_MB="100" is set, so a GPU'"'"'s budget is its free memory less that reserve and the memory fraction 0.5 is not applied (TensorFlow'"'"'s rule); unset one of the two' ] \
  && ok || bad "fraction and reserve: one warning: $err"

# A thread count that is junk: ignored, and said.
OMP_NUM_THREADS=abc run devices
[ $rc -eq 0 ] && ok || bad "OMP_NUM_THREADS=abc: exit $rc: $err"
[ "$err" = 'vdev: warning: OMP_NUM_THREADS="abc" is not a whole number >= 1, so it is ignored (as OpenBLAS and OpenMP ignore it)' ] \
  && ok || bad "OMP_NUM_THREADS=abc: one warning: $err"

# `vdev --help` says which variables are not checked at start-up, and they are not
want="Environment (the README's \"Configuration\" has every value). Read at start-up,
a malformed value is an error that names the variable, except:
VDEV_MPI_TIMEOUT, VDEV_TORCH_DEVICES and NCCL_RUNTIME_CONNECT are read and
checked only when used; a malformed OPENBLAS_NUM_THREADS or OMP_NUM_THREADS
is ignored with a warning; VDEV_LIBRARY is read by the Python package:"
run --help
[ "$(sed -n '/^Environment/,/^  /p' <<<"$out" | sed '$d')" = "$want" ] && ok ||
  bad "--help: the environment's header: $(sed -n '/^Environment/,/^  /p' <<<"$out")"
# --help gives both ways to hide every GPU, as the README's table does, and -1 does hide them
grep -A1 '^  VDEV_VISIBLE_DEVICES ' <<<"$out" | grep -qx ' *values: 0,2; empty or -1 hides every GPU' &&
  ok || bad "--help: VDEV_VISIBLE_DEVICES: $(grep -A1 '^  VDEV_VISIBLE_DEVICES ' <<<"$out")"
grep -q '^| `VDEV_VISIBLE_DEVICES` | `0,2` (spaces allowed); empty or `-1` hides every GPU |' \
  "$(dirname "$0")/../README.md" && ok || bad "README: VDEV_VISIBLE_DEVICES's row"
VDEV_SIM_GPUS=2x1GiB VDEV_VISIBLE_DEVICES=-1 run devices
[ $rc -eq 0 ] && grep -q '^  /device:CPU:0 ' <<<"$out" && ! grep -q '^  /device:GPU' <<<"$out" &&
  ok || bad "VDEV_VISIBLE_DEVICES=-1: exit $rc: $out $err"
for v in VDEV_MPI_TIMEOUT VDEV_TORCH_DEVICES NCCL_RUNTIME_CONNECT; do
  env "$v=zz" VDEV_SIM_GPUS=1x1GiB "$vdev" devices >/dev/null 2>"$tmp/err"; rc=$?
  [ $rc -eq 0 ] && [ ! -s "$tmp/err" ] && ok || bad "$v=zz at start-up: exit $rc: $(cat "$tmp/err")"
done

# The caps on logical devices: refused with the messages the README quotes, and the README's
# table row states them
readme=$(tr -s ' \n' ' ' <"$(dirname "$0")/../README.md")
parts=$(printf '1MiB,%.0s' $(seq 17))
VDEV_SIM_GPUS=1x1GiB VDEV_LOGICAL_DEVICES="0:${parts%,}" run devices
[ $rc -eq 1 ] && has "$err" ": more than 16 logical devices on GPU 0" &&
  has "$readme" '`VDEV_LOGICAL_DEVICES` at start-up ("more than 16 logical devices on GPU 0")' &&
  ok || bad "17 logical devices on GPU 0: exit $rc: $err"
parts=$(printf '1MiB,%.0s' $(seq 16))
spec=$(for g in $(seq 0 8); do printf '%d:%s;' "$g" "${parts%,}"; done)
VDEV_SIM_GPUS=9x1GiB VDEV_LOGICAL_DEVICES="${spec%;}" run devices
[ $rc -eq 1 ] && has "$err" ": /physical_device:GPU:8: more than 128 logical GPUs in all" &&
  has "$readme" '("/physical_device:GPU:8: more than 128 logical GPUs in all",' &&
  ok || bad "144 logical GPUs: exit $rc: $err"
row='logical devices per physical GPU (at most 16 per GPU, and 128 logical GPUs in all, a GPU'
has "$readme" "$row left whole counting as one)" && ok ||
  bad "README: VDEV_LOGICAL_DEVICES's row lacks the caps"

finish
