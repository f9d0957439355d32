/* test_cluster.c — the cluster file and TF_CONFIG, without MPI: the launcher's
 * rank is set in the environment as mpirun sets it (OMPI_COMM_WORLD_RANK),
 * so one process plays each task in turn.
 *
 *  - a task gets its own entry over the default, over the environment;
 *    memory_growth hides TF_FORCE_GPU_ALLOW_GROWTH; code still wins;
 *  - roles: the rank's task counting chief, workers, ps; TF_CONFIG's task;
 *    every process a worker without a cluster; the task names the devices
 *    (/job:worker/replica:0/task:1/device:GPU:0), which device names accept;
 *  - every malformed entry fails start-up with VDEV_ERR_CONFIG and a message
 *    naming the file, the task and the key, on every task (an entry of
 *    another task too); what depends on the machine (a GPU it lacks, limits
 *    beyond its card) fails on the task whose entry it is, named alike. */
#define _GNU_SOURCE
#include "check.h"

#include <stdlib.h>
#include <unistd.h>

static char dir[] = "/tmp/vdev_cluster_XXXXXX";
static char path[256];

/* Writes the cluster file and points VDEV_CLUSTER_CONFIG at it. */
static void cluster_file(const char *json)
{
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f)
        return;
    fputs(json, f);
    fclose(f);
    setenv("VDEV_CLUSTER_CONFIG", path, 1);
}

/* A fresh process of rank `rank` of a launch of `size` (-1: not launched). */
static void fresh(const char *sim, int rank, int size)
{
    check_fresh(sim);
    unsetenv("OMPI_COMM_WORLD_RANK");
    unsetenv("OMPI_COMM_WORLD_SIZE");
    if (rank >= 0) {
        char r[16], n[16];
        snprintf(r, sizeof r, "%d", rank);
        snprintf(n, sizeof n, "%d", size);
        setenv("OMPI_COMM_WORLD_RANK", r, 1);
        setenv("OMPI_COMM_WORLD_SIZE", n, 1);
    }
}

static uint64_t limit_of(const char *dev)
{
    struct vdev_memory_info mi;
    CHECK_OK(vdev_memory_info(dev, &mi));
    return mi.bytes_limit;
}

static const char *CLUSTER =
    "{\"cluster\": {\"chief\": [\"h0:1\"], \"worker\": [\"h1:1\", \"h2:1\"], \"ps\": [\"h3:1\"]},\n"
    " \"default\": {\"memory_growth\": false, \"logical_devices\": \"0:8MiB\"},\n"
    " \"tasks\": {\"worker:0\": {\"logical_devices\": \"0:4MiB,2MiB\"},\n"
    "           \"worker:1\": {\"logical_devices\": \"0:3MiB\", \"sim_gpus\": \"2x64MiB\",\n"
    "                        \"memory_fraction\": 0.5},\n"
    "           \"ps:0\": {\"visible_devices\": \"\"}}}\n";

static void test_tasks(void)
{
    struct vdev_cluster_task t;
    /* rank 0: the chief, with the default entry */
    fresh("1x64MiB", 0, 4);
    cluster_file(CLUSTER);
    CHECK_OK(vdev_cluster_task(&t));
    CHECK_STR(t.type, "chief");
    CHECK(t.index == 0 && t.is_chief);
    CHECK_STR(t.name, "/job:chief/replica:0/task:0");
    CHECK(t.num_chief == 1 && t.num_workers == 2 && t.num_ps == 1);
    CHECK_EQ_U64(limit_of("GPU:0"), 8u << 20);
    int g = -1;
    CHECK_OK(vdev_config_get_memory_growth("GPU:0", &g));
    CHECK(g == -1); /* what code set: nothing */

    /* rank 2: worker:1, its own GPUs, split and fraction over the default */
    fresh("1x64MiB", 2, 4);
    cluster_file(CLUSTER);
    CHECK_OK(vdev_cluster_task(&t));
    CHECK_STR(t.type, "worker");
    CHECK(t.index == 1 && !t.is_chief);
    struct vdev_physical_device pd[4];
    int n = 0;
    CHECK_OK(vdev_list_physical_devices(pd, 4, &n));
    CHECK(n == 3 && pd[1].total_bytes == 64u << 20); /* sim_gpus: 2x64MiB */
    CHECK_EQ_U64(limit_of("GPU:0"), 3u << 20);
    CHECK_EQ_U64(limit_of("/job:worker/replica:0/task:1/device:GPU:1"), 32u << 20);
    /* the task names its devices, in out-of-memory messages too */
    char name[128];
    CHECK_OK(vdev_device_canonical_name("GPU:0", name, sizeof name));
    int64_t big[1] = {1 << 20}; /* 4 MiB of floats: past the 3 MiB limit */
    CHECK_OK(vdev_device_push("GPU:0"));
    vdev_tensor_t *x = vdev_tensor_zeros(big, 1, VDEV_F32);
    CHECK(x == NULL);
    CHECK_STATUS(vdev_last_status(), VDEV_ERR_OOM);
    CHECK_MSG("OOM when allocating tensor with shape[1048576] and type float (4.00 MiB) on "
              "/job:worker/replica:0/task:1/device:GPU:0:");
    CHECK_OK(vdev_device_pop());
    CHECK_STATUS(vdev_device_push("/job:worker/replica:0/task:0/device:GPU:0"), VDEV_ERR_NOT_FOUND);
    CHECK_STR(vdev_last_error(),
              "/job:worker/replica:0/task:0/device:GPU:0 unknown device: only "
              "/job:localhost/replica:0/task:0 and /job:worker/replica:0/task:1 are local");
    CHECK_OK(vdev_device_push("/job:worker/task:1/device:GPU:0"));
    CHECK_OK(vdev_device_pop());
    CHECK_OK(vdev_device_push("/job:localhost/replica:0/task:0/device:GPU:0"));
    CHECK_OK(vdev_device_pop());

    /* rank 3: ps:0 sees no GPU */
    fresh("1x64MiB", 3, 4);
    cluster_file(CLUSTER);
    CHECK_OK(vdev_cluster_task(&t));
    CHECK_STR(t.type, "ps");
    struct vdev_logical_device ld[4];
    CHECK_OK(vdev_list_logical_devices(ld, 4, &n));
    CHECK(n == 1);

    /* the entry beats the environment; memory_growth hides TensorFlow's name */
    fresh("1x64MiB", 1, 4);
    cluster_file(CLUSTER);
    setenv("VDEV_LOGICAL_DEVICES", "0:1MiB", 1);
    setenv("TF_FORCE_GPU_ALLOW_GROWTH", "true", 1); /* would disagree with false */
    CHECK_OK(vdev_init());
    CHECK_EQ_U64(limit_of("GPU:0"), 4u << 20);
    CHECK_EQ_U64(limit_of("GPU:1"), 2u << 20);
    /* and code beats the entry */
    fresh("1x64MiB", 1, 4);
    cluster_file(CLUSTER);
    uint64_t lim[1] = {5u << 20};
    CHECK_OK(vdev_config_set_logical_devices("GPU:0", lim, 1));
    CHECK_EQ_U64(limit_of("GPU:0"), 5u << 20);

    /* TF_CONFIG names the task, whatever the rank */
    fresh("1x64MiB", 0, 4);
    cluster_file(CLUSTER);
    setenv("TF_CONFIG", "{\"cluster\": {\"chief\": [\"a\"], \"worker\": [\"b\", \"c\"], "
                        "\"ps\": [\"d\"]}, \"task\": {\"type\": \"worker\", \"index\": 0}, "
                        "\"rpc_layer\": \"grpc\"}", 1);
    CHECK_OK(vdev_cluster_task(&t));
    CHECK_STR(t.name, "/job:worker/replica:0/task:0");
    /* TF_CONFIG alone, without a file */
    fresh("1x64MiB", -1, 0);
    setenv("TF_CONFIG", "{\"cluster\": {\"worker\": [\"b\", \"c\"]}, \"task\": {\"type\": "
                        "\"worker\", \"index\": 1}}", 1);
    CHECK_OK(vdev_cluster_task(&t));
    CHECK_STR(t.name, "/job:worker/replica:0/task:1");
    CHECK(t.num_workers == 2 && !t.is_chief);
    /* the index as TensorFlow's int() reads it: a string of digits, or 1.0 */
    static const char *const idx[] = {"\"1\"", "\" 1 \"", "1.0", "1e0"};
    for (size_t i = 0; i < sizeof idx / sizeof *idx; i++) {
        char j[160];
        snprintf(j, sizeof j, "{\"cluster\": {\"worker\": [\"b\", \"c\"]}, \"task\": "
                              "{\"type\": \"worker\", \"index\": %s}}", idx[i]);
        fresh("1x64MiB", -1, 0);
        setenv("TF_CONFIG", j, 1);
        CHECK_OK(vdev_cluster_task(&t));
        CHECK_STR(t.name, "/job:worker/replica:0/task:1");
    }
    /* a cloud's TF_CONFIG: its job spec and environment beside the roles */
    fresh("1x64MiB", -1, 0);
    setenv("TF_CONFIG", "{\"cluster\": {\"chief\": [\"a\"], \"worker\": [\"b\"]}, \"task\": "
                        "{\"type\": \"worker\", \"index\": 0, \"trial\": \"1\"}, \"job\": "
                        "{\"python_module\": \"trainer.task\"}, \"environment\": \"cloud\"}", 1);
    CHECK_OK(vdev_cluster_task(&t));
    CHECK_STR(t.name, "/job:worker/replica:0/task:0");
    CHECK(t.num_chief == 1 && !t.is_chief);
    /* launched with no cluster: every process a worker; worker 0 is the chief */
    fresh("1x64MiB", 0, 3);
    CHECK_OK(vdev_cluster_task(&t));
    CHECK_STR(t.name, "/job:worker/replica:0/task:0");
    CHECK(t.num_workers == 3 && t.is_chief);
    /* Slurm's srun with PMIx: PMIX_RANK, the size from the step's task count */
    fresh("1x64MiB", -1, 0);
    setenv("PMIX_RANK", "1", 1);
    setenv("SLURM_STEP_NUM_TASKS", "4", 1);
    CHECK_OK(vdev_cluster_task(&t));
    CHECK_STR(t.name, "/job:worker/replica:0/task:1");
    CHECK(t.num_workers == 4 && !t.is_chief);
    unsetenv("PMIX_RANK");
    unsetenv("SLURM_STEP_NUM_TASKS");
    /* nothing at all: the local task */
    fresh("1x64MiB", -1, 0);
    CHECK_OK(vdev_cluster_task(&t));
    CHECK_STR(t.name, "/job:localhost/replica:0/task:0");
    CHECK_STR(t.type, "localhost");
    CHECK(t.is_chief);
    CHECK_STATUS(vdev_cluster_task(NULL), VDEV_ERR_INVALID_ARG);
    CHECK_STR(vdev_last_error(), "vdev_cluster_task: out is NULL");
}

/* One malformed file: start-up fails on the process of `rank` with code and
 * the message (%s is the file's path, given as many times as it appears). */
static void bad(int rank, const char *json, enum vdev_status code, const char *fmt)
{
    fresh("1x64MiB", rank, 4);
    cluster_file(json);
    struct vdev_cluster_task t;
    CHECK_STATUS(vdev_cluster_task(&t), code);
    char want[2048];
    snprintf(want, sizeof want, fmt, path, path);
    CHECK_STR(vdev_last_error(), want);
    /* start-up says the same, and nothing started */
    CHECK_STATUS(vdev_init(), code);
    CHECK_STR(vdev_last_error(), want);
    CHECK(!vdev_is_initialized());
}

#define C4 "\"cluster\": {\"worker\": [\"a\", \"b\", \"c\", \"d\"]}"

static void test_malformed(void)
{
    /* every task rejects each of these, its own entry or not */
    for (int rank = 0; rank < 2; rank++) {
        bad(rank, "{\"cluster\": ", VDEV_ERR_CONFIG,
            "VDEV_CLUSTER_CONFIG=%s: not valid JSON: parse error: premature EOF");
        bad(rank, "[1, 2]", VDEV_ERR_CONFIG, "VDEV_CLUSTER_CONFIG=%s: expected a JSON object");
        bad(rank, "{" C4 ", \"workers\": {}}", VDEV_ERR_CONFIG,
            "VDEV_CLUSTER_CONFIG=%s: unknown key \"workers\" (expected cluster, default or tasks)");
        bad(rank, "{\"cluster\": {\"evaluator\": [\"a\"]}}", VDEV_ERR_CONFIG,
            "VDEV_CLUSTER_CONFIG=%s: cluster: job \"evaluator\" is not one vdev runs (chief, "
            "worker or ps)");
        bad(rank, "{\"cluster\": {\"chief\": [\"a\", \"b\"], \"worker\": 2}}", VDEV_ERR_CONFIG,
            "VDEV_CLUSTER_CONFIG=%s: cluster: 2 chief tasks; a cluster has at most one");
        bad(rank, "{\"cluster\": {\"worker\": [\"a\", 7]}}", VDEV_ERR_CONFIG,
            "VDEV_CLUSTER_CONFIG=%s: cluster: worker: task 1's address is not a string");
        bad(rank, "{\"cluster\": {\"worker\": \"a,b\"}}", VDEV_ERR_CONFIG,
            "VDEV_CLUSTER_CONFIG=%s: cluster: worker: expected a list of addresses or a number of "
            "tasks");
        bad(rank, "{\"cluster\": {\"ps\": [\"a\"]}}", VDEV_ERR_CONFIG,
            "VDEV_CLUSTER_CONFIG=%s: cluster: no chief and no worker task");
        bad(rank, "{" C4 ", \"tasks\": [\"worker:0\"]}", VDEV_ERR_CONFIG,
            "VDEV_CLUSTER_CONFIG=%s: \"tasks\" is not an object of tasks (expected e.g. "
            "{\"worker:0\": {\"logical_devices\": \"0:2GiB\"}})");
        bad(rank, "{" C4 ", \"tasks\": {\"worker-1\": {}}}", VDEV_ERR_CONFIG,
            "VDEV_CLUSTER_CONFIG=%s: tasks: \"worker-1\" is not a task name (expected chief:0, "
            "worker:N or ps:N)");
        bad(rank, "{" C4 ", \"tasks\": {\"worker:4\": {}}}", VDEV_ERR_CONFIG,
            "VDEV_CLUSTER_CONFIG=%s: tasks: worker:4 is not in the cluster, which has 4 worker "
            "tasks");
        bad(rank, "{" C4 ", \"tasks\": {\"worker:1\": {}, \"worker:1\": {}}}", VDEV_ERR_CONFIG,
            "VDEV_CLUSTER_CONFIG=%s: tasks: \"worker:1\" appears twice");
        bad(rank, "{" C4 ", \"tasks\": {\"worker:1\": {}, \"worker:01\": {}}}", VDEV_ERR_CONFIG,
            "VDEV_CLUSTER_CONFIG=%s: tasks: \"worker:1\" and \"worker:01\" are the same task "
            "(worker:1)");
        bad(rank, "{" C4 ", \"tasks\": {\"worker:1\": \"0:1GiB\"}}", VDEV_ERR_CONFIG,
            "VDEV_CLUSTER_CONFIG=%s: worker:1: expected an object of settings (visible_devices, "
            "memory_growth, logical_devices, memory_fraction, sim_gpus)");
        bad(rank, "{" C4 ", \"tasks\": {\"worker:1\": {\"memory_limit\": \"1GiB\"}}}",
            VDEV_ERR_CONFIG,
            "VDEV_CLUSTER_CONFIG=%s: worker:1: unknown key \"memory_limit\" (expected "
            "visible_devices, memory_growth, logical_devices, memory_fraction or sim_gpus)");
        bad(rank, "{" C4 ", \"default\": {\"sim_gpus\": \"1x1GiB\", \"sim_gpus\": \"1x1GiB\"}}",
            VDEV_ERR_CONFIG, "VDEV_CLUSTER_CONFIG=%s: default: key \"sim_gpus\" appears twice");
        bad(rank, "{" C4 ", \"tasks\": {\"worker:1\": {\"logical_devices\": 1024}}}",
            VDEV_ERR_CONFIG,
            "VDEV_CLUSTER_CONFIG=%s: worker:1: logical_devices: expected a string in the syntax "
            "of VDEV_LOGICAL_DEVICES");
        bad(rank, "{" C4 ", \"tasks\": {\"worker:1\": {\"logical_devices\": \"0:4XB\"}}}",
            VDEV_ERR_CONFIG,
            "VDEV_CLUSTER_CONFIG=%s: worker:1: logical_devices=\"0:4XB\": bad limit '4XB' for GPU "
            "0 (a size such as 4GiB)");
        bad(rank, "{" C4 ", \"tasks\": {\"worker:1\": {\"memory_fraction\": 1.5}}}",
            VDEV_ERR_CONFIG,
            "VDEV_CLUSTER_CONFIG=%s: worker:1: memory_fraction=\"1.5\" is not a fraction in [0, "
            "1] (e.g. 0.5 for half of each GPU's total memory; 0 for none)");
        bad(rank, "{" C4 ", \"tasks\": {\"worker:1\": {\"memory_growth\": \"maybe\"}}}",
            VDEV_ERR_CONFIG,
            "VDEV_CLUSTER_CONFIG=%s: worker:1: memory_growth=\"maybe\" could not be parsed: valid "
            "values are true or false (any case), 1 or 0, or per GPU 0:true,1:false");
        bad(rank, "{" C4 ", \"tasks\": {\"worker:1\": {\"visible_devices\": \"0,0\"}}}",
            VDEV_ERR_CONFIG,
            "VDEV_CLUSTER_CONFIG=%s: worker:1: visible_devices=\"0,0\": VDEV_CLUSTER_CONFIG=%s: "
            "worker:1: visible_devices contained a duplicate entry: 0,0");
        bad(rank, "{" C4 ", \"tasks\": {\"worker:1\": {\"sim_gpus\": \"2xfoo\"}}}",
            VDEV_ERR_CONFIG,
            "VDEV_CLUSTER_CONFIG=%s: worker:1: sim_gpus=\"2xfoo\": bad size in '2xfoo' (expected "
            "COUNTxSIZE[,COUNTxSIZE...], e.g. 3x16GiB or 2x80GiB,1x24GiB)");
    }
    /* the file itself */
    fresh("1x64MiB", 0, 4);
    setenv("VDEV_CLUSTER_CONFIG", "/nonexistent/cluster.json", 1);
    CHECK_STATUS(vdev_init(), VDEV_ERR_NOT_FOUND);
    CHECK_STR(vdev_last_error(), "VDEV_CLUSTER_CONFIG=/nonexistent/cluster.json: cannot open it: "
                                 "No such file or directory");
    fresh("1x64MiB", 0, 4);
    setenv("VDEV_CLUSTER_CONFIG", "", 1);
    CHECK_STATUS(vdev_init(), VDEV_ERR_CONFIG);
    CHECK_STR(vdev_last_error(), "VDEV_CLUSTER_CONFIG is empty (expected the path of a JSON file)");
    /* a rank past the cluster's tasks */
    bad(4, "{" C4 "}", VDEV_ERR_CONFIG,
        "VDEV_CLUSTER_CONFIG: this process is rank 4 of the launch, but the cluster has 4 tasks (0 "
        "chief, 4 worker, 0 ps)");
    /* TF_CONFIG */
    fresh("1x64MiB", -1, 0);
    setenv("TF_CONFIG", "", 1); /* not unset: TensorFlow's json.loads('') fails too */
    CHECK_STATUS(vdev_init(), VDEV_ERR_CONFIG);
    CHECK_STR(vdev_last_error(), "TF_CONFIG is empty (expected JSON such as {\"cluster\": {...}, "
                                 "\"task\": {...}}; unset it for none)");
    static const char *const no_index[] = {"", ", \"index\": 1.5", ", \"index\": \"1.0\"",
                                           ", \"index\": \"\"", ", \"index\": \"-1\"",
                                           ", \"index\": -1", ", \"index\": \"99999999999\"",
                                           ", \"index\": null", ", \"index\": [1]"};
    for (size_t i = 0; i < sizeof no_index / sizeof *no_index; i++) {
        char j[160];
        snprintf(j, sizeof j, "{\"cluster\": {\"worker\": [\"a\"]}, \"task\": {\"type\": "
                              "\"worker\"%s}}", no_index[i]);
        fresh("1x64MiB", -1, 0);
        setenv("TF_CONFIG", j, 1);
        CHECK_STATUS(vdev_init(), VDEV_ERR_CONFIG);
        CHECK_STR(vdev_last_error(), "TF_CONFIG: \"task\" must be {\"type\": \"worker\", "
                                     "\"index\": 0} (a job name and a whole number)");
    }
    fresh("1x64MiB", -1, 0);
    setenv("TF_CONFIG", "{\"cluster\": {\"worker\": [\"a\"]}, \"task\": {\"type\": \"evaluator\", "
                        "\"index\": 0}}", 1);
    CHECK_STATUS(vdev_init(), VDEV_ERR_CONFIG);
    CHECK_STR(vdev_last_error(), "TF_CONFIG: task type \"evaluator\" is not one vdev runs (chief, "
                                 "worker or ps)");
    fresh("1x64MiB", -1, 0);
    setenv("TF_CONFIG", "{\"cluster\": {\"worker\": [\"a\"]}, \"task\": {\"type\": \"worker\", "
                        "\"index\": 3}}", 1);
    CHECK_STATUS(vdev_init(), VDEV_ERR_CONFIG);
    CHECK_STR(vdev_last_error(), "TF_CONFIG: task worker:3 is not in the cluster, which has 1 "
                                 "worker task");
    fresh("1x64MiB", 0, 4);
    cluster_file("{" C4 "}");
    setenv("TF_CONFIG", "{\"cluster\": {\"worker\": [\"a\", \"b\"]}}", 1);
    CHECK_STATUS(vdev_init(), VDEV_ERR_CONFIG);
    char want[1024];
    snprintf(want, sizeof want, "VDEV_CLUSTER_CONFIG=%s and TF_CONFIG disagree: 4 worker tasks in "
                                "the file, 2 in TF_CONFIG", path);
    CHECK_STR(vdev_last_error(), want);
    fresh("1x64MiB", -1, 0);
    cluster_file("{" C4 "}");
    CHECK_STATUS(vdev_init(), VDEV_ERR_CONFIG);
    CHECK_STR(vdev_last_error(), "VDEV_CLUSTER_CONFIG gives a cluster but not this process's task: "
                                 "set TF_CONFIG's \"task\", or launch the processes with mpirun");
    /* the cluster TF_CONFIG's, beside a file of settings alone: TF_CONFIG is named */
    const char *settings = "{\"default\": {\"memory_growth\": true}}";
    fresh("1x64MiB", -1, 0);
    cluster_file(settings);
    setenv("TF_CONFIG", "{\"cluster\": {\"worker\": [\"a\", \"b\"]}}", 1);
    CHECK_STATUS(vdev_init(), VDEV_ERR_CONFIG);
    CHECK_STR(vdev_last_error(), "TF_CONFIG gives a cluster but not this process's task: set "
                                 "TF_CONFIG's \"task\", or launch the processes with mpirun");
    fresh("1x64MiB", 2, 3);
    cluster_file(settings);
    setenv("TF_CONFIG", "{\"cluster\": {\"worker\": [\"a\", \"b\"]}}", 1);
    CHECK_STATUS(vdev_init(), VDEV_ERR_CONFIG);
    CHECK_STR(vdev_last_error(), "TF_CONFIG: this process is rank 2 of the launch, but the cluster "
                                 "has 2 tasks (0 chief, 2 worker, 0 ps)");
    /* a task without a cluster: a lone process would be worker 3 of none, not the chief */
    for (int rank = -1; rank < 1; rank++) {
        fresh("1x64MiB", rank, 2);
        setenv("TF_CONFIG", "{\"task\": {\"type\": \"worker\", \"index\": 3}}", 1);
        CHECK_STATUS(vdev_init(), VDEV_ERR_CONFIG);
        CHECK_STR(vdev_last_error(), "TF_CONFIG gives this process's task (worker:3) but no "
                                     "cluster: add TF_CONFIG's \"cluster\" (or "
                                     "VDEV_CLUSTER_CONFIG's), or unset \"task\"");
    }
    fresh("1x64MiB", -1, 0);
    setenv("TF_CONFIG", "{\"clsuter\": {\"worker\": [\"a\"]}}", 1);
    CHECK_STATUS(vdev_init(), VDEV_ERR_CONFIG);
    CHECK_STR(vdev_last_error(), "TF_CONFIG: unknown key \"clsuter\" (expected cluster, task, "
                                 "rpc_layer, environment or job)");

    /* what depends on the machine: the task whose entry it is, at start-up */
    const char *hw = "{" C4 ", \"tasks\": {\"worker:1\": {\"logical_devices\": \"2:1MiB\"},"
                     " \"worker:2\": {\"logical_devices\": \"0:1GiB\"}}}";
    fresh("1x64MiB", 0, 4);
    cluster_file(hw);
    CHECK_OK(vdev_init()); /* worker:0 has no such entry */
    fresh("1x64MiB", 1, 4);
    cluster_file(hw);
    CHECK_STATUS(vdev_init(), VDEV_ERR_CONFIG);
    snprintf(want, sizeof want, "VDEV_CLUSTER_CONFIG=%s: worker:1: logical_devices=\"2:1MiB\": "
                                "there is no GPU 2 (1 GPU)", path);
    CHECK_STR(vdev_last_error(), want);
    fresh("1x64MiB", 2, 4);
    cluster_file(hw);
    CHECK_STATUS(vdev_init(), VDEV_ERR_CONFIG);
    snprintf(want, sizeof want,
             "/physical_device:GPU:0: its 1 logical device's limit is 1.00 GiB (1073741824 "
             "bytes), more than the card's budget of 64.00 MiB (67108864 bytes: 64.00 MiB "
             "free: the card is too small for the 225.00 MiB driver reserve, so none is left "
             "aside, as TensorFlow) (VDEV_CLUSTER_CONFIG=%s: worker:2: logical_devices)",
             path);
    CHECK_STR(vdev_last_error(), want);
}

int main(void)
{
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/cluster.json", dir);
    test_tasks();
    test_malformed();
    check_fresh(NULL);
    unsetenv("OMPI_COMM_WORLD_RANK");
    unsetenv("OMPI_COMM_WORLD_SIZE");
    unlink(path);
    rmdir(dir);
    return check_done();
}
