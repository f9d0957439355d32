#!/usr/bin/env bash
# bench_observe.sh — what serving metrics costs the main job: the demo's
# steps/s with VDEV_METRICS_ADDR set and a scraper fetching /metrics every
# second, against the demo with no endpoint. Runs alternately, ROUNDS times
# each, and prints the median steps/s of each and the overhead in percent
# (target: under 2%).
#
#   bench/bench_observe.sh [VDEV] [ROUNDS] [EPOCHS] [STEPS]
#   (defaults: build/vdev 3 4 200; VDEV_SIM_GPUS=3x1GiB)
#
# A busy or shared machine moves these numbers by more than 2%: run it on an
# idle one, with more rounds, before reading much into one result.
set -euo pipefail
vdev=${1:-build/vdev}
rounds=${2:-3}
epochs=${3:-4}
steps=${4:-200}
export VDEV_SIM_GPUS=${VDEV_SIM_GPUS:-3x1GiB}
unset VDEV_METRICS_ADDR VDEV_TRACE_FILE
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# mean steps/s over the epochs after the first (the first warms up)
steps_per_s() { sed -n 's/.*(\([0-9.]*\) steps\/s)$/\1/p' | tail -n +2 | awk '{ s += $1; n++ } END { if (n) printf "%.1f\n", s / n }'; }

run_plain() { "$vdev" demo --epochs "$epochs" --steps "$steps" | steps_per_s; }
run_served() {
  local port out scraper
  port=$(free_port)
  out=$(mktemp)
  VDEV_METRICS_ADDR=127.0.0.1:$port "$vdev" demo --epochs "$epochs" --steps "$steps" >"$out" &
  local demo=$!
  ( while kill -0 "$demo" 2>/dev/null; do
      curl -s --max-time 2 "http://127.0.0.1:$port/metrics" >/dev/null || true
      sleep 1
    done ) &
  scraper=$!
  wait "$demo"
  kill "$scraper" 2>/dev/null || true
  wait "$scraper" 2>/dev/null || true
  steps_per_s <"$out"
  rm -f "$out"
}

median() { sort -n | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

plain=(); served=()
for r in $(seq 1 "$rounds"); do
  plain+=("$(run_plain)")
  served+=("$(run_served)")
  echo "round $r: plain ${plain[-1]} steps/s, served+scraped ${served[-1]} steps/s"
done
p=$(printf '%s\n' "${plain[@]}" | median)
s=$(printf '%s\n' "${served[@]}" | median)
awk -v p="$p" -v s="$s" 'BEGIN { printf "median: plain %.1f steps/s, served+scraped %.1f steps/s, overhead %.2f%% (target < 2%%)\n", p, s, (p - s) / p * 100 }'
