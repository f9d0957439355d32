#!/usr/bin/env bash
# bench_trace.sh — what the profiler trace costs: the demo's steps/s with
# VDEV_TRACE_FILE set and not, alternating runs, median of each; prints the
# overhead in percent (target: under 10%).
# Usage: bench/bench_trace.sh VDEV [RUNS] [STEPS]   (defaults 5, 100)
set -u
vdev=${1:?usage: bench_trace.sh VDEV [RUNS] [STEPS]}
runs=${2:-5}; steps=${3:-100}
export VDEV_SIM_GPUS=${VDEV_SIM_GPUS:-3x2GiB}
unset VDEV_TRACE_FILE
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
# the mean of an run's per-epoch steps/s ("(830.9 steps/s)")
rate() { "$@" demo --epochs 3 --steps "$steps" --seed 1 2>/dev/null |
         sed -n 's/.*(\([0-9.]*\) steps\/s).*/\1/p' |
         awk '{ s += $1; n++ } END { if (n) printf "%.1f\n", s / n; else exit 1 }'; }
off=(); on=()
for ((i = 0; i < runs; i++)); do
  r=$(rate "$vdev") || { echo "bench_trace: demo failed" >&2; exit 1; }; off+=("$r")
  r=$(VDEV_TRACE_FILE=$tmp/run.json rate "$vdev") || { echo "bench_trace: traced demo failed" >&2; exit 1; }
  on+=("$r")
done
median() { printf '%s\n' "$@" | sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
m_off=$(median "${off[@]}"); m_on=$(median "${on[@]}")
echo "untraced steps/s: ${off[*]} (median $m_off)"
echo "traced   steps/s: ${on[*]} (median $m_on), trace $(wc -c <"$tmp/run.json") bytes"
awk -v a="$m_off" -v b="$m_on" 'BEGIN { printf "trace overhead: %.1f%% of step time (target < 10%%)\n", (a / b - 1) * 100 }'
