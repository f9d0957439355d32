#!/usr/bin/env bash
# bench/mpi/run.sh — runs bench_mpi under mpirun (shared memory only, one
# simulated GPU per process) and prints its figures: the all-reduce across 2
# and 4 processes against plain MPI_Allreduce, then training on 4 and 5
# processes, multi-worker mirrored against parameter servers (a chief, 1 or
# 2 ps tasks, 2 workers). BENCHMARKS.md's section "Training across
# processes" gives the figures of one run.
# Usage: bench/mpi/run.sh [BUILD_DIR] [--quick]   (default build/)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
quick=${2:-}
bench=$build/bench/mpi/bench_mpi
[ -x "$bench" ] || { echo "bench/mpi/run.sh: no $bench (configure with MPI: libopenmpi-dev)" >&2; exit 1; }
export OPENBLAS_NUM_THREADS=1 VDEV_SIM_GPUS=1x4GiB
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
  OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_btl=self,vader
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for np in 2 4; do
  echo "== all-reduce, $np processes"
  mpirun -np "$np" "$bench" allreduce $quick
done
for np in 4 5; do
  echo "== multi-worker mirrored, $np processes"
  mpirun -np "$np" "$bench" mirrored $quick
  servers=$((np - 3))
  ps='"ps": ["h3:1"]' tasks='"ps:0": {"visible_devices": ""}'
  if [ $servers = 2 ]; then
    ps='"ps": ["h3:1", "h4:1"]' tasks='"ps:0": {"visible_devices": ""}, "ps:1": {"visible_devices": ""}'
  fi
  echo "{\"cluster\": {\"chief\": [\"h0:1\"], \"worker\": [\"h1:1\", \"h2:1\"], $ps}, \"tasks\": {$tasks}}" \
    >"$tmp/cluster.json"
  echo "== parameter servers, $np processes: a chief, $servers ps, 2 workers"
  VDEV_CLUSTER_CONFIG=$tmp/cluster.json mpirun -np "$np" "$bench" ps $quick
done
