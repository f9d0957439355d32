#!/usr/bin/env bash
# mpi_tests.sh — the tests across processes, each a function run by its own
# ctest entry (tests/mpi/CMakeLists.txt):
#
#   mirrored  two workers of one replica each equal a one-process mirrored
#             strategy over two devices bit for bit (losses and parameters);
#             four workers, and two workers of two replicas, equal one over
#             four devices within 1e-6 (the sums are added in another
#             order); the cluster file gives the two workers different
#             memory limits, and an allocation past worker 1's limit fails
#             there alone, with its name; workers whose global batches
#             differ in size (48 and 40 rows) fail the step on every worker
#             with a message naming both sizes and both workers, and so
#             does a step where worker 1 skips apply_gradients, or passes
#             an all-reduce a tensor of another shape, or (a step each)
#             splits the batch in other proportions, all-reduces with
#             another op or an int32 tensor, returns a code without a
#             message, or reduces (vdev_strategy_reduce) a value of another
#             shape of as many elements or with another op: every worker's
#             message leads with worker 1, and names the API call;
#             workers of one and two replicas equal one process over three
#             devices within 1e-6;
#   cluster   every malformed cluster file is rejected at start-up by every
#             process with the same message, and so are (when making a
#             multi-worker strategy) a cluster with more tasks than
#             processes, two processes given the same task, and a chief
#             (or, in a cluster without one, worker 0) that is not rank 0,
#             and processes given different clusters (each its own chief;
#             for parameter servers too, one told of another ps count);
#             a process whose own start-up fails (a bad VDEV_SIM_GPUS) fails
#             the strategy on every process, named by its task, or by its
#             rank alone when its cluster file is malformed;
#   failure   a worker killed mid-training ends the job with an error within
#             60 s (not the 300 s a worker waits by default: a bound a loaded
#             machine's teardown, sanitizers' exit checks included, stays
#             under); a restart resumes from the chief's checkpoint with the
#             losses of an uninterrupted run, bit for bit; a worker that
#             stops answering fails the others after VDEV_MPI_TIMEOUT, with
#             a message naming it, and the job ends; a worker that leaves
#             early (returns 3 from main after a local error, or calls
#             exit(4) inside a step) ends the job at once with its status
#             (MPI_Abort), instead of leaving the others to wait for it;
#             a child that worker 1 forks and that exits with status 3 is no
#             rank: the job goes on and ends as an uninterrupted one does;
#   ps        parameter-server training (a chief, two servers, two workers):
#             the loss falls, the shards are balanced within 10% by bytes,
#             and with max_staleness 0 the result equals one process
#             training on the same batches; that run also checks the
#             errors of the calls (mpi_ps.c --errors), and those of a child the
#             chief forks (the fork error; its free and exit leave the job alone).
#   conv      a convolutional net (conv2d, ReLU, max pool, dense; Adam)
#             trained by two workers of one replica each equals one process
#             over two devices bit for bit (each step's loss, then the
#             parameters), on both workers;
#   examples  the README's two examples (examples/mpi), run as the README
#             runs them: multi_worker.c on 4 processes fits 384 MiB everywhere
#             but on worker 1 (256 MiB), whose error names its device;
#             parameter_server.c with 2 servers and 2 workers lowers the loss
#             and splits the bytes within one float; multi_worker.c started
#             alone, or with mpirun -np 1, fails with its message alone and
#             its exit status (no MPI_Abort: no other process waits).
#
# Usage: mpi_tests.sh TEST MPIRUN BUILD_DIR  (MPIRUN empty: MPI is missing)
set -uo pipefail
test=$1 mpirun=${2:-} build=$3
if [ -z "$mpirun" ] || [ ! -x "$build/libvdev-mpi.so" ]; then
  echo "SKIP: MPI not found (install libopenmpi-dev openmpi-bin and configure with -DVDEV_MPI=AUTO or ON)"
  exit 77
fi
train=$build/tests/mpi/mpi_train
ps_train=$build/tests/mpi/mpi_ps
conv_train=$build/tests/mpi/mpi_conv
work=$(mktemp -d /tmp/vdev_mpi_test.XXXXXX)
trap 'rm -rf "$work"' EXIT
export OPENBLAS_NUM_THREADS=1
# Root in a container, two cores: run as root, oversubscribe, shared memory.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
  OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_btl=self,vader
# Open only the modules these tests use: the ob1 messaging layer (not the
# psm/psm2/ofi network layers, whose libraries it would load and unload) and
# no OpenCL probe in hwloc. Those modules pull in libraries with thread-local
# storage (libnuma, libuuid, librdmacm, libOpenCL); Open MPI dlcloses them
# when it does not select them, and LeakSanitizer's tracer (gcc 12), walking
# the threads' TLS at exit, can fault on a stale slot of one ("Tracer caught
# signal 11" ... "LeakSanitizer has encountered a fatal error"): no finding,
# but the test failed. With these two settings a process unloads no module
# with TLS (LD_DEBUG=files lists the unloaded ones).
export OMPI_MCA_pml=ob1 HWLOC_PLUGINS_BLACKLIST=hwloc_opencl
# Under AddressSanitizer: LeakSanitizer unwinds each allocation's stack in
# full, so that Open MPI's own leaks (made inside MPI_Init, in libraries
# built without frame pointers) show the libraries that lsan.supp names.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}fast_unwind_on_malloc=0"
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
pass() { echo "ok: $*"; }

# alone CMD...: runs CMD (a process started without mpirun: Open MPI's
# singleton), its output on stdout and its exit status. Only when the output
# is LeakSanitizer's own crash at exit, not a finding (see the settings above:
# it should not happen now; this stays for a machine whose Open MPI unloads
# another module with TLS), CMD runs again, up to 3 runs, said on stderr;
# after a third crash, once more without the leak check (ASAN_OPTIONS
# detect_leaks=0), said on stderr too, so that the behaviour is still checked.
# A leak report reads "ERROR: LeakSanitizer: detected memory leaks" instead
# and is never run again.
alone() {
  local out rc try
  for try in 1 2 3; do
    out=$("$@" 2>&1)
    rc=$?
    grep -q "^==[0-9]*==LeakSanitizer has encountered a fatal error" <<<"$out" || break
    echo "note: $*: LeakSanitizer crashed at exit (its tracer), run $try of 3" >&2
    if [ $try = 3 ]; then
      echo "note: $*: run 4 without the leak check (its tracer crashed 3 times)" >&2
      out=$(ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=0" "$@" 2>&1)
      rc=$?
    fi
  done
  printf '%s\n' "$out"
  return $rc
}

# run NP ARGS...: mpirun with NP processes; its output in $work/out.txt
run() {
  local np=$1; shift
  "$mpirun" -np "$np" "$@" >"$work/out.txt" 2>&1
}

# same_file A B WHAT
same_file() { if cmp -s "$1" "$2"; then pass "$3"; else fail "$3: $1 and $2 differ"; diff "$1" "$2" | head -5; fi; }

# close A B TOL WHAT: the hex floats of the last column of A and B within TOL
close() {
  python3 - "$1" "$2" "$3" <<'EOF' && pass "$4" || fail "$4"
import sys
a = [float.fromhex(l.split()[-2 if len(l.split()) > 2 else -1]) for l in open(sys.argv[1])]
b = [float.fromhex(l.split()[-2 if len(l.split()) > 2 else -1]) for l in open(sys.argv[2])]
worst = max(abs(x - y) for x, y in zip(a, b)) if a else 0
print("  %d values, largest difference %.3g" % (len(a), worst))
sys.exit(0 if len(a) == len(b) and len(a) > 0 and worst <= float(sys.argv[3]) else 1)
EOF
}

t_mirrored() {
  mkdir -p "$work/ref2" "$work/ref4" "$work/w2" "$work/w4" "$work/w22"
  VDEV_SIM_GPUS=4x1GiB "$train" --reference 2 --out "$work/ref2" || fail "reference over 2 devices"
  VDEV_SIM_GPUS=4x1GiB "$train" --reference 4 --out "$work/ref4" || fail "reference over 4 devices"
  cat >"$work/limits.json" <<'EOF'
{"cluster": {"worker": ["host0:2222", "host1:2222"]},
 "default": {"sim_gpus": "1x1GiB"},
 "tasks": {"worker:0": {"logical_devices": "0:64MiB"},
           "worker:1": {"logical_devices": "0:32MiB"}}}
EOF
  VDEV_CLUSTER_CONFIG=$work/limits.json run 2 "$train" --out "$work/w2" --alloc 50331648 ||
    { fail "2 workers"; cat "$work/out.txt"; }
  for w in 0 1; do
    same_file "$work/ref2/losses.reference" "$work/w2/losses.$w" "2 workers: worker $w's losses"
    same_file "$work/ref2/params.reference" "$work/w2/params.$w" "2 workers: worker $w's parameters"
  done
  if [ "$(cat "$work/w2/alloc.0" 2>/dev/null)" = ok ]; then pass "48 MiB fit worker 0's 64 MiB"
  else fail "worker 0's allocation: $(cat "$work/w2/alloc.0" 2>/dev/null)"; fi
  want="VDEV_ERR_OOM OOM when allocating tensor with shape[12582912] and type float (48.00 MiB) on /job:worker/replica:0/task:1/device:GPU:0: "
  got=$(cat "$work/w2/alloc.1" 2>/dev/null)
  if [ "${got:0:${#want}}" = "$want" ]; then pass "48 MiB fail on worker 1 (32 MiB), with its name"
  else fail "worker 1's allocation: '$got'"; fi

  VDEV_SIM_GPUS=1x1GiB run 4 "$train" --out "$work/w4" || { fail "4 workers"; cat "$work/out.txt"; }
  # after its training, one more step where worker 1's global batch has 40
  # rows and worker 0's 48: the run fails on every worker, naming both
  VDEV_SIM_GPUS=2x1GiB run 2 "$train" --replicas 2 --out "$work/w22" --mismatch 40 ||
    { fail "2 workers of 2 replicas"; cat "$work/out.txt"; }
  # then a step where worker 1 skips vdev_replica_apply_gradients, and one
  # where its all-reduce passes a [3] tensor and worker 0's a [4] one: every
  # worker's message leads with worker 1 (its first replica, 2), the one
  # that differs, and names the API call (call numbers read as N)
  local want_batch want_skip want_shape
  want_batch='VDEV_ERR_INVALID_ARG replica 2 (/job:worker/replica:0/task:1/device:GPU:0): vdev_replica_batch: worker 0 (/job:worker/replica:0/task:0) passes a global batch of 48 rows but worker 1 (/job:worker/replica:0/task:1) one of 40 rows; every worker passes the same global batch (each replica takes its rows of it)'
  want_skip='VDEV_ERR_INVALID_ARG worker 1 (/job:worker/replica:0/task:1) finished its step without making vdev_replica_apply_gradients (all-reduce, call N), which worker 0 (/job:worker/replica:0/task:0) made; every worker must make the same collective calls in the same order'
  want_shape='VDEV_ERR_INVALID_ARG replica 2 (/job:worker/replica:0/task:1/device:GPU:0): Shape mismatch in the collective instance N. Op at worker 1 (/job:worker/replica:0/task:1) expected shape [3] but another member in the group expected shape [4]. This is likely due to different input shapes at different members of the collective op.'
  # then worker 1 splits the batch 3:1:1:1 and worker 0 evenly, all-reduces
  # with MEAN (worker 0 SUM), all-reduces an int32 tensor, returns a code
  # with no message; then vdev_strategy_reduce of [3,2] against [2,3], and
  # with MEAN against SUM: each refused on every worker, worker 1 first
  local w1='worker 1 (/job:worker/replica:0/task:1)' w0='worker 0 (/job:worker/replica:0/task:0)'
  local r2='replica 2 (/job:worker/replica:0/task:1/device:GPU:0)'
  local want_more=(
    "VDEV_ERR_INVALID_ARG $r2: vdev_replica_batch: replica 1 on $w0 takes rows 12-23 of the global batch of 48 rows but replica 2 on $w1 rows 32-39: rows 24-31 would go to no replica; every worker splits the batch the same way (the same vdev_strategy_set_batch_proportions on every worker, or none)"
    "VDEV_ERR_INVALID_ARG $r2: vdev_replica_all_reduce (all-reduce, call N): $w1 called vdev_replica_all_reduce (all-reduce, MEAN, 1 tensor, root 0) but $w0 called vdev_replica_all_reduce (all-reduce, SUM, 1 tensor, root 0); every worker must make the same collective calls in the same order"
    "VDEV_ERR_INVALID_ARG $r2: $w1: vdev_replica_all_reduce (all-reduce, call N): its $r2: vdev_replica_all_reduce: tensor #0 is int32; all-reduce takes float tensors"
    "VDEV_ERR_INVALID_ARG $r2: the step function returned VDEV_ERR_INVALID_ARG without a message"
    "VDEV_ERR_SHAPE vdev_strategy_reduce: replica 2's value is float of shape[3,2] but replica 0's is float of shape[2,3] (replica 2 is on $w1, replica 0 on $w0)"
    "VDEV_ERR_INVALID_ARG vdev_strategy_reduce: $w1 reduces with MEAN but $w0 with SUM; every worker reduces with the same op")
  local what_more=("batch proportions 3:1:1:1 against 1:1:1:1" "an all-reduce with MEAN against SUM"
    "an all-reduce of int32 on worker 1" "a step that returns a code without a message"
    "vdev_strategy_reduce of [3,2] against [2,3]" "vdev_strategy_reduce with MEAN against SUM")
  for w in 0 1; do
    sed -E 's/call [0-9]+\)/call N)/; s/instance [0-9]+\./instance N./' "$work/w22/mismatch.$w" \
      >"$work/w22/mismatch_n.$w" 2>/dev/null
    local i
    for i in 0 1 2 3 4 5; do
      got=$(sed -n "$((i + 4))p" "$work/w22/mismatch_n.$w")
      if [ "$got" = "${want_more[$i]}" ]; then pass "${what_more[$i]}: refused on worker $w"
      else fail "worker $w, ${what_more[$i]}: '$got'"; fi
    done
    local got
    got=$(sed -n 1p "$work/w22/mismatch_n.$w")
    if [ "$got" = "$want_batch" ]; then pass "global batches of 48 and 40 rows: refused on worker $w, naming both"
    else fail "worker $w, batches of 48 and 40 rows: '$got'"; fi
    got=$(sed -n 2p "$work/w22/mismatch_n.$w")
    if [ "$got" = "$want_skip" ]; then pass "worker 1 skips apply_gradients: refused on worker $w, naming it first"
    else fail "worker $w, worker 1 skipping apply_gradients: '$got'"; fi
    got=$(sed -n 3p "$work/w22/mismatch_n.$w")
    if [ "$got" = "$want_shape" ]; then pass "an all-reduce of another shape on worker 1: refused on worker $w, naming it first"
    else fail "worker $w, all-reduce shapes [3] and [4]: '$got'"; fi
  done
  for w in 1 2 3; do
    same_file "$work/w4/params.0" "$work/w4/params.$w" "4 workers: worker $w holds worker 0's bits"
  done
  same_file "$work/w22/params.0" "$work/w22/params.1" "2x2: worker 1 holds worker 0's bits"
  close "$work/ref4/params.reference" "$work/w4/params.0" 1e-6 "4 workers: parameters within 1e-6"
  close "$work/ref4/losses.reference" "$work/w4/losses.0" 1e-6 "4 workers: losses within 1e-6"
  close "$work/ref4/params.reference" "$work/w22/params.0" 1e-6 "2x2: parameters within 1e-6"
  close "$work/ref4/losses.reference" "$work/w22/losses.0" 1e-6 "2x2: losses within 1e-6"

  # workers of different sizes: one replica on worker 0, two on worker 1,
  # three in sync sharing the global batch, as one process over three GPUs
  mkdir -p "$work/ref3" "$work/w12"
  VDEV_SIM_GPUS=4x1GiB "$train" --reference 3 --out "$work/ref3" || fail "reference over 3 devices"
  VDEV_SIM_GPUS=2x1GiB run 1 "$train" --replicas 1 --out "$work/w12" : \
    -np 1 "$train" --replicas 2 --out "$work/w12" || { fail "workers of 1 and 2 replicas"; cat "$work/out.txt"; }
  same_file "$work/w12/params.0" "$work/w12/params.1" "1+2: worker 1 holds worker 0's bits"
  close "$work/ref3/params.reference" "$work/w12/params.0" 1e-6 "1+2: parameters within 1e-6"
  close "$work/ref3/losses.reference" "$work/w12/losses.0" 1e-6 "1+2: losses within 1e-6"
}

t_cluster() {
  mkdir -p "$work/cases" "$work/res"
  local c='"cluster": {"worker": 2}'
  echo '{"cluster": ' >"$work/cases/01-not-json.json"
  echo "{$c, \"tasks\": {\"worker:1\": {\"logical_devices\": \"0:4XB\"}}}" >"$work/cases/02-logical.json"
  echo "{$c, \"tasks\": {\"worker:0\": {\"memory_fraction\": 2}}}" >"$work/cases/03-fraction.json"
  echo "{$c, \"tasks\": {\"worker:1\": {\"memory_limit\": \"1GiB\"}}}" >"$work/cases/04-key.json"
  echo "{$c, \"tasks\": {\"worker:2\": {}}}" >"$work/cases/05-task.json"
  echo "{$c, \"default\": {\"sim_gpus\": \"2xfoo\"}}" >"$work/cases/06-sim.json"
  echo "{\"cluster\": {\"worker\": 2, \"evaluator\": 1}}" >"$work/cases/07-job.json"
  echo "{$c, \"tasks\": {\"worker:0\": {\"memory_growth\": \"maybe\"}}}" >"$work/cases/08-growth.json"
  # two cases that start up but cannot make a strategy: the cluster has three
  # workers for two processes, or both processes are told they are worker 0
  echo '{"cluster": {"worker": 3}}' >"$work/cases/09-count.json"
  echo '{"cluster": {"worker": ["a:1", "b:1"]}, "task": {"type": "worker", "index": 0}}' \
    >"$work/cases/10-same.tfconfig"
  # the chief at rank 1: replica 0 (a broadcast's root) would not be the chief's
  printf '%s\n' '{"cluster": {"chief": ["a:1"], "worker": ["b:1"]}, "task": {"type": "worker", "index": 0}}' \
    '{"cluster": {"chief": ["a:1"], "worker": ["b:1"]}, "task": {"type": "chief", "index": 0}}' \
    >"$work/cases/11-chief-second.tfconfig"
  # no chief: worker 0 is the chief, and it is rank 1 here
  printf '%s\n' '{"cluster": {"worker": ["a:1", "b:1"]}, "task": {"type": "worker", "index": 1}}' \
    '{"cluster": {"worker": ["a:1", "b:1"]}, "task": {"type": "worker", "index": 0}}' \
    >"$work/cases/11b-worker0-second.tfconfig"
  # two processes given different clusters: each would be the chief of its own
  printf '%s\n' '{"cluster": {"chief": ["a:1"], "worker": ["b:1"]}, "task": {"type": "chief", "index": 0}}' \
    '{"cluster": {"worker": ["a:1", "b:1"]}, "task": {"type": "worker", "index": 0}}' \
    >"$work/cases/11c-two-clusters.tfconfig"
  # parameter servers: a worker index past the number of processes (it once
  # read and wrote past an array of one slot per process)
  echo '{"cluster": {"chief": ["a:1"], "worker": ["b:1", "c:1", "d:1"], "ps": ["e:1"]}, "task": {"type": "worker", "index": 2}}' \
    >"$work/cases/12-count.ps.tfconfig"
  # parameter servers: a process told of two servers where the others know one
  printf '%s\n' '{"cluster": {"chief": ["a:1"], "worker": ["b:1"], "ps": ["c:1"]}, "task": {"type": "chief", "index": 0}}' \
    '{"cluster": {"chief": ["a:1"], "worker": ["b:1"], "ps": ["c:1", "d:1"]}, "task": {"type": "ps", "index": 1}}' \
    >"$work/cases/12b-two-clusters.ps.tfconfig"
  VDEV_SIM_GPUS=1x1GiB run 2 "$train" --cases "$work/cases" --out "$work/res" ||
    { fail "the launch"; cat "$work/out.txt"; }
  same_file "$work/res/cases.0" "$work/res/cases.1" "every process rejects each file with the same message"
  local n
  n=$(grep -c ' VDEV_ERR_CONFIG VDEV_CLUSTER_CONFIG=' "$work/res/cases.0" 2>/dev/null)
  if [ "$n" = 8 ]; then pass "8 files, 8 VDEV_ERR_CONFIG naming the file"
  else fail "expected 8 rejections, got: $(cat "$work/res/cases.0")"; fi
  grep -q '^04-key.json VDEV_ERR_CONFIG VDEV_CLUSTER_CONFIG=[^ ]*: worker:1: unknown key "memory_limit"' \
    "$work/res/cases.0" && pass "the message names the task and the key" || fail "04-key.json's message"
  grep -qx '09-count.json VDEV_ERR_CONFIG the job has 2 processes, the cluster 3 tasks; launch one process per task' \
    "$work/res/cases.0" && pass "a cluster of 3 workers on 2 processes is refused" ||
    fail "09-count.json: $(grep 09- "$work/res/cases.0")"
  grep -qxF '10-same.tfconfig VDEV_ERR_CONFIG two processes are /job:worker/replica:0/task:0 (ranks 0 and 1); give each process its own task (TF_CONFIG'"'"'s "task", or none: rank r is the r-th task)' \
    "$work/res/cases.0" && pass "two processes with the same task are refused" ||
    fail "10-same.tfconfig: $(grep 10- "$work/res/cases.0")"
  grep -qxF '11-chief-second.tfconfig VDEV_ERR_CONFIG the chief (/job:chief/replica:0/task:0) is MPI rank 1; replica 0, whose values a broadcast from root 0 gives every replica, is rank 0'"'"'s: launch the chief as rank 0 (first in the TF_CONFIG order, or give no task: rank 0 is then the chief)' \
    "$work/res/cases.0" && pass "a chief that is not rank 0 is refused" ||
    fail "11-chief-second.tfconfig: $(grep 11- "$work/res/cases.0")"
  grep -qxF '11b-worker0-second.tfconfig VDEV_ERR_CONFIG worker 0 (/job:worker/replica:0/task:0), the chief of a cluster without a chief task, is MPI rank 1; replica 0, whose values a broadcast from root 0 gives every replica, is rank 0'"'"'s: launch worker 0 as rank 0 (first in the TF_CONFIG order, or give no task: rank 0 is then worker 0)' \
    "$work/res/cases.0" && pass "without a chief, a worker 0 that is not rank 0 is refused" ||
    fail "11b-worker0-second.tfconfig: $(grep 11b- "$work/res/cases.0")"
  grep -qxF '11c-two-clusters.tfconfig VDEV_ERR_CONFIG process 1 (/job:worker/replica:0/task:0) reads a cluster of 2 worker tasks but process 0 (/job:chief/replica:0/task:0) a cluster of 1 chief task and 1 worker task; give every process the same cluster (TF_CONFIG'"'"'s "cluster", or VDEV_CLUSTER_CONFIG)' \
    "$work/res/cases.0" && pass "processes given different clusters are refused, naming both" ||
    fail "11c-two-clusters.tfconfig: $(grep 11c- "$work/res/cases.0")"
  grep -qxF '12-count.ps.tfconfig VDEV_ERR_CONFIG vdev_ps_strategy_new: the job has 2 processes, the cluster 5 tasks; launch one process per task' \
    "$work/res/cases.0" && pass "parameter servers: too few processes refused before the roles" ||
    fail "12-count.ps.tfconfig: $(grep 12- "$work/res/cases.0")"
  grep -qxF '12b-two-clusters.ps.tfconfig VDEV_ERR_CONFIG vdev_ps_strategy_new: /job:ps/replica:0/task:1 (process 1) reads a cluster of 1 chief, 1 worker and 2 ps tasks but /job:chief/replica:0/task:0 (process 0) one of 1 chief, 1 worker and 1 ps tasks; give every process the same cluster (TF_CONFIG'"'"'s "cluster", or VDEV_CLUSTER_CONFIG)' \
    "$work/res/cases.0" && pass "parameter servers: processes given different clusters are refused" ||
    fail "12b-two-clusters.ps.tfconfig: $(grep 12b- "$work/res/cases.0")"
  # one process whose start-up fails (its own environment) when the strategy
  # is made: every process names it by its task, or, when its cluster file
  # is malformed (no task known), by its rank alone
  local m=(--make-only --out "$work/make")
  mkdir -p "$work/make"
  "$mpirun" -np 1 env VDEV_SIM_GPUS=1x1GiB "$train" "${m[@]}" : \
    -np 1 env VDEV_SIM_GPUS=1xfoo "$train" "${m[@]}" >"$work/out.txt" 2>&1 ||
    { fail "the launch with a bad VDEV_SIM_GPUS"; cat "$work/out.txt"; }
  same_file "$work/make/make.0" "$work/make/make.1" "every process gets worker 1's start-up error"
  grep -qxF "VDEV_ERR_CONFIG worker 1 (/job:worker/replica:0/task:1): VDEV_SIM_GPUS=\"1xfoo\": bad size in '1xfoo' (expected COUNTxSIZE[,COUNTxSIZE...], e.g. 3x16GiB or 2x80GiB,1x24GiB)" \
    "$work/make/make.0" && pass "a start-up error names the worker's task" ||
    fail "bad VDEV_SIM_GPUS on worker 1: $(cat "$work/make/make.0")"
  "$mpirun" -np 1 env VDEV_SIM_GPUS=1x1GiB "$train" "${m[@]}" : -np 1 env VDEV_SIM_GPUS=1x1GiB \
    VDEV_CLUSTER_CONFIG="$work/cases/04-key.json" "$train" "${m[@]}" >"$work/out.txt" 2>&1 ||
    { fail "the launch with a malformed cluster file"; cat "$work/out.txt"; }
  grep -qx "VDEV_ERR_CONFIG process 1: VDEV_CLUSTER_CONFIG=$work/cases/04-key.json: worker:1: unknown key \"memory_limit\" (.*)" \
    "$work/make/make.0" && pass "a process that could not read its task is named by its rank" ||
    fail "malformed cluster file on process 1: $(cat "$work/make/make.0")"
}

t_failure() {
  mkdir -p "$work/full" "$work/kill" "$work/resume" "$work/hang"
  export VDEV_SIM_GPUS=1x1GiB
  run 2 "$train" --out "$work/full" || { fail "uninterrupted run"; cat "$work/out.txt"; }
  # worker 1 kills itself before step 12; the chief saved after step 10
  run 2 "$train" --out "$work/kill" --ckpt "$work/ckpt.safetensors" --every 5 --kill-at 12
  local rc=$? end
  end=$(date +%s.%N)
  if [ $rc -ne 0 ]; then pass "the job failed (exit $rc)"; else fail "the job with a killed worker exited 0"; fi
  grep -q 'exited on signal 9' "$work/out.txt" && pass "the error names the killed process: $(grep -o 'process rank [0-9]* .*signal 9 (Killed)' "$work/out.txt" | head -1)" ||
    { fail "no error names the killed worker"; cat "$work/out.txt"; }
  if python3 -c "import sys; t=float(open(sys.argv[1]).read()); d=float(sys.argv[2])-t; print('  ended %.2f s after the kill' % d); sys.exit(0 if 0 <= d <= 60 else 1)" \
    "$work/kill/event.1" "$end"; then pass "the job ended within 60 s of the kill"; else fail "the job took longer than 60 s to end"; fi
  run 2 "$train" --out "$work/resume" --ckpt "$work/ckpt.safetensors" --resume ||
    { fail "the restart"; cat "$work/out.txt"; }
  if [ "$(head -c 3 "$work/resume/losses.0")" = "10 " ]; then pass "the restart resumed at step 10"
  else fail "the restart began at: $(head -1 "$work/resume/losses.0")"; fi
  tail -n 10 "$work/full/losses.0" >"$work/full_tail"
  for w in 0 1; do
    same_file "$work/full_tail" "$work/resume/losses.$w" "worker $w's losses after the restart equal the uninterrupted run's"
    same_file "$work/full/params.0" "$work/resume/params.$w" "worker $w's parameters equal the uninterrupted run's"
  done
  # worker 1 stops answering before step 5; worker 0 gives up after 10 s (a
  # bound no collective before step 5 reaches on a loaded machine, where one
  # process can start or step seconds behind the other)
  VDEV_MPI_TIMEOUT=10 run 2 "$train" --out "$work/hang" --hang-at 5
  rc=$?
  end=$(date +%s.%N)
  if [ $rc -ne 0 ]; then pass "the job failed (exit $rc)"; else fail "the job with a stopped worker exited 0"; fi
  # (a step's first collective is vdev_replica_batch's check of the batch's
  # rows across workers: an all-gather; the message names the API call)
  want='0: step 5: Collective has timed out waiting for other workers: vdev_replica_batch (all-gather, call '
  want2=') on worker 0 (/job:worker/replica:0/task:0) waited 10 s (VDEV_MPI_TIMEOUT) for worker 1 (/job:worker/replica:0/task:1), which did not make this call (stopped, died, or making other calls)'
  if grep -qF "$want" "$work/out.txt" && grep -qF "$want2" "$work/out.txt"; then pass "worker 0 names the worker it waited for"
  else fail "worker 0's message"; cat "$work/out.txt"; fi
  if python3 -c "import sys; t=float(open(sys.argv[1]).read()); d=float(sys.argv[2])-t; print('  ended %.2f s after the stop' % d); sys.exit(0 if 0 <= d <= 60 else 1)" \
    "$work/hang/event.1" "$end"; then pass "the job ended within 60 s of the stop"; else fail "the job took longer than 60 s to end"; fi
  # worker 1 leaves early with a non-zero status: MPI_Finalize there would
  # wait for worker 0, and worker 0 for it until VDEV_MPI_TIMEOUT (here 60 s);
  # instead the job ends with that status, and nobody times out
  local how code
  for how in "--exit-at 5:3" "--exit-in-step 5:4"; do
    code=${how##*:}
    VDEV_MPI_TIMEOUT=60 run 2 "$train" --out "$work/hang" ${how%:*}
    rc=$?
    if [ $rc -eq "$code" ] && grep -qxF "vdev: rank 1 exits with status $code; ending the job (MPI_Abort) so that no other process waits for it" "$work/out.txt" &&
      ! grep -q 'timed out\|VDEV_MPI_TIMEOUT' "$work/out.txt"; then
      pass "${how%:*}: the job ended with worker 1's status $code, no one waiting for it"
    else fail "${how%:*}: exit $rc"; cat "$work/out.txt"; fi
  done
  # worker 1 forks a child that exits with status 3: the child is no rank,
  # so its exit neither ends the job (MPI_Abort) nor finalises MPI, and the
  # training ends as an uninterrupted one does
  mkdir -p "$work/fork"
  VDEV_MPI_TIMEOUT=60 run 2 "$train" --out "$work/fork" --fork-at 5
  rc=$?
  if [ $rc -eq 0 ] && grep -qF "1: the child forked before step 5 exited with status 3" "$work/out.txt" &&
    ! grep -q 'MPI_Abort' "$work/out.txt"; then
    same_file "$work/full/losses.0" "$work/fork/losses.0" "a forked child's exit leaves the job alone"
  else fail "a forked child's exit: exit $rc"; cat "$work/out.txt"; fi
  # worker 1 leaves cleanly (status 0) while worker 0 goes on, as a worker
  # with fewer batches would: its goodbye makes worker 0 fail at once
  # (a second's grace), not after VDEV_MPI_TIMEOUT (60 s here)
  local t0 t1
  for how in "--exit-at 5" "--exit-in-step 5"; do
    t0=$(date +%s.%N)
    VDEV_MPI_TIMEOUT=60 run 2 "$train" --out "$work/hang" $how --exit-status 0
    rc=$?
    t1=$(date +%s.%N)
    want='(/job:worker/replica:0/task:1), which ended its process cleanly (exit status 0) without making this call (did it run fewer steps than the others?)'
    if [ $rc -ne 0 ] && grep -q "^0: step 5: Collective failed: .* on worker 0 (/job:worker/replica:0/task:0) waits for worker 1 " "$work/out.txt" &&
      grep -qF "$want" "$work/out.txt" && ! grep -q 'timed out\|VDEV_MPI_TIMEOUT' "$work/out.txt"; then
      python3 -c "import sys; print('  the job took %.2f s' % (float(sys.argv[2]) - float(sys.argv[1])))" "$t0" "$t1"
      pass "$how, status 0: worker 0 failed at once, naming worker 1 that left"
    else fail "$how, status 0: exit $rc"; cat "$work/out.txt"; fi
  done
}

t_ps() {
  mkdir -p "$work/ps" "$work/ps0"
  export VDEV_SIM_GPUS=1x1GiB
  cat >"$work/ps.json" <<'EOF'
{"cluster": {"chief": ["h0:1"], "worker": ["h1:1", "h2:1"], "ps": ["h3:1", "h4:1"]},
 "tasks": {"ps:0": {"visible_devices": ""}, "ps:1": {"visible_devices": ""}}}
EOF
  VDEV_DETERMINISTIC=1 VDEV_CLUSTER_CONFIG=$work/ps.json run 5 "$ps_train" --out "$work/ps" \
    --steps 60 || { fail "parameter-server training"; cat "$work/out.txt"; }
  # asynchronous under the determinism switch: the chief warns, once
  [ "$(grep -c 'the determinism switch is on, but with max_staleness -1 the servers apply' \
    "$work/out.txt")" = 1 ] && pass "determinism switch with async training: one warning" ||
    fail "the warning of async training under the determinism switch"
  python3 - "$work/ps/chief.txt" <<'EOF' && pass "the loss fell and the shards are balanced" || fail "loss or balance"
import sys
kv = dict(l.split(None, 1) for l in open(sys.argv[1]) if l.strip())
first, last, balance = float(kv["first_loss"]), float(kv["last_loss"]), float(kv["balance"])
print("  loss %.4f -> %.4f, balance %.4f, bytes %s" % (first, last, balance, kv["bytes"].strip()))
sys.exit(0 if last < 0.5 * first and balance <= 1.10 else 1)
EOF
  # staleness 0: the steps apply one after another, as one process would
  VDEV_DETERMINISTIC=1 VDEV_CLUSTER_CONFIG=$work/ps.json run 5 "$ps_train" --out "$work/ps0" \
    --steps 20 --staleness 0 --errors ||
    { fail "parameter-server training with staleness 0"; cat "$work/out.txt"; }
  ! grep -q 'determinism switch' "$work/out.txt" && pass "staleness 0: no determinism warning" ||
    fail "a determinism warning with staleness 0"
  VDEV_DETERMINISTIC=1 "$ps_train" --reference --out "$work/ps0" --steps 20 ||
    fail "the one-process reference"
  same_file "$work/ps0/params.reference" "$work/ps0/params.chief" "staleness 0 equals one process, bit for bit"
}

t_conv() {
  VDEV_SIM_GPUS=2x256MiB "$conv_train" --replicas 2 --out "$work/conv" ||
    fail "conv: the reference over 2 devices"
  VDEV_SIM_GPUS=1x256MiB run 2 "$conv_train" --multi --out "$work/conv" ||
    { fail "conv: 2 workers"; cat "$work/out.txt"; }
  for w in 0 1; do
    same_file "$work/conv.reference" "$work/conv.$w" "conv: worker $w's losses and parameters"
  done
}

t_examples() {
  local src t
  src=$(cd "$(dirname "$0")/../.." && pwd)
  ( cd "$src" && "$mpirun" -np 4 env VDEV_CLUSTER_CONFIG=examples/mpi/cluster.json \
      "$build/examples/mpi/example_multi_worker" ) >"$work/mw.txt" 2>&1 ||
    { fail "examples/mpi/multi_worker.c"; cat "$work/mw.txt"; }
  grep -qx '4 workers in sync, 4 replicas' "$work/mw.txt" && pass "multi_worker: 4 workers" ||
    fail "multi_worker: the strategy"
  python3 - "$work/mw.txt" <<'EOF' && pass "multi_worker: the loss fell" || fail "multi_worker: the loss"
import sys
l = [float(x.split()[3]) for x in open(sys.argv[1]) if x.startswith("step ")]
print("  loss %s" % l)
sys.exit(0 if len(l) == 4 and l[-1] < 0.2 * l[0] else 1)
EOF
  for t in chief:0 worker:0 worker:2; do
    grep -qx "/job:${t%:*}/replica:0/task:${t#*:}: limit [0-9]* MiB; 384 MiB: ok" "$work/mw.txt" &&
      pass "multi_worker: 384 MiB fit $t" || fail "multi_worker: $t"
  done
  grep -q '^/job:worker/replica:0/task:1: limit 256 MiB; 384 MiB: OOM when allocating tensor with shape\[100663296\] and type float (384.00 MiB) on /job:worker/replica:0/task:1/device:GPU:0: ' \
    "$work/mw.txt" && pass "multi_worker: 384 MiB fail on worker:1, named" || fail "multi_worker: worker:1"
  # --help says how to start the job; started alone (no cluster), a failure
  # names the task once (vdev's message names it already) and says how to
  # start the job. (No GPU for the lone multi-worker process: no plugin.)
  local mw=$build/examples/mpi/example_multi_worker
  local ex_ps=$build/examples/mpi/example_parameter_server
  local out alone="started alone, without a cluster; run it under mpirun with VDEV_CLUSTER_CONFIG:"
  out=$("$mw" --help 2>&1) && [ "$(head -1 <<<"$out")" = "usage: example_multi_worker" ] &&
    grep -qxF "  mpirun -np 4 env VDEV_CLUSTER_CONFIG=examples/mpi/cluster.json $mw" <<<"$out" &&
    pass "multi_worker --help" || fail "multi_worker --help: $out"
  out=$(cd "$work" && alone env -u VDEV_CLUSTER_CONFIG -u TF_CONFIG -u VDEV_SIM_GPUS \
    VDEV_CUDA_PLUGIN="$work/none.so" "$mw") && fail "multi_worker alone, no GPU: exit 0"
  grep -q "^process 0 (/job:localhost/replica:0/task:0): No matching devices found for 'GPU:0': " \
    <<<"$(head -1 <<<"$out")" && [ "$(sed -n 2p <<<"$out")" = "example_multi_worker: $alone" ] &&
    [ "$(wc -l <<<"$out")" = 3 ] &&
    pass "multi_worker alone: one task name, the hint, no MPI_Abort" || fail "multi_worker alone: $out"
  # one process under mpirun (-np 1 for -np 4): the refusal, the exit status,
  # and no MPI_Abort (no other process waits for it)
  out=$(cd "$src" && "$mpirun" -np 1 env VDEV_CLUSTER_CONFIG=examples/mpi/cluster.json "$mw" 2>&1)
  local rc=$?
  local np1="/job:chief/replica:0/task:0: the job has 1 process, the cluster 4 tasks; launch"
  np1+=" one process per task"
  [ $rc = 1 ] && [ "$(head -1 <<<"$out")" = "$np1" ] && ! grep -q MPI_Abort <<<"$out" &&
    pass "multi_worker -np 1: refused, exit 1, no MPI_Abort" ||
    fail "multi_worker -np 1 (exit $rc): $out"
  out=$("$ex_ps" -h 2>&1) && [ "$(head -1 <<<"$out")" = "usage: example_parameter_server" ] &&
    grep -qxF "  mpirun -np 5 env VDEV_CLUSTER_CONFIG=examples/mpi/ps_cluster.json $ex_ps" \
      <<<"$out" &&
    pass "parameter_server -h" || fail "parameter_server -h: $out"
  out=$(cd "$work" && alone env -u VDEV_CLUSTER_CONFIG -u TF_CONFIG "$ex_ps") &&
    fail "parameter_server alone: exit 0"
  local want="/job:localhost/replica:0/task:0: vdev_ps_strategy_new: a parameter-server cluster"
  want+=" has one chief, workers and ps tasks (this one: 0 chief, 0 worker, 0 ps;"
  want+=" VDEV_CLUSTER_CONFIG or TF_CONFIG gives the cluster)"
  [ "$(head -1 <<<"$out")" = "$want" ] &&
    [ "$(sed -n 2p <<<"$out")" = "example_parameter_server: $alone" ] &&
    pass "parameter_server alone: one task name, the hint" || fail "parameter_server alone: $out"
  ( cd "$src" && "$mpirun" -np 5 env VDEV_CLUSTER_CONFIG=examples/mpi/ps_cluster.json \
      "$build/examples/mpi/example_parameter_server" ) >"$work/ps.txt" 2>&1 ||
    { fail "examples/mpi/parameter_server.c"; cat "$work/ps.txt"; }
  python3 - "$work/ps.txt" <<'EOF' && pass "parameter_server: the loss fell, the shares differ by a float" || fail "parameter_server"
import sys
t = open(sys.argv[1]).read().splitlines()
loss = [float(x.split()[-1]) for x in t if x.startswith("steps ")]
held = [int(x.split()[2]) for x in t if x.startswith("ps:")]
print("  mean losses %s, bytes %s" % (loss, held))
sys.exit(0 if len(loss) == 4 and loss[-1] < 0.5 * loss[0] and sorted(held) == [640, 644] else 1)
EOF
}

case $test in
  mirrored) t_mirrored ;;
  cluster) t_cluster ;;
  failure) t_failure ;;
  ps) t_ps ;;
  conv) t_conv ;;
  examples) t_examples ;;
  *) echo "mpi_tests.sh: unknown test $test"; exit 2 ;;
esac
[ $fails -eq 0 ] && echo "all passed" || echo "$fails failed"
[ $fails -eq 0 ]
