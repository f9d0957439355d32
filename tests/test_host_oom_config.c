/* test_host_oom_config.c — the host refusing memory, at every allocation in turn, in
 * the configuration and the runtime's own layers.
 *
 * As test_host_oom.c (host_oom.h): each scenario runs once for each n from 1 up with
 * the n-th host allocation of its thread refused, until a run makes fewer than n,
 * then once with nothing refused. A call that fails must fail with VDEV_ERR_OOM, and
 * only a call in which the refusal came; the same call made again must succeed; and
 * the run must end with the digest of the run without a refusal. The sanitizer
 * build's leak check reports what a failed path left.
 *
 * The scenarios: start-up of several simulated GPUs configured through the API
 * (visible devices, growth, splits, a fraction, logical CPUs), then through the
 * environment, each read back (physical and logical devices, details, memory,
 * limits); the cluster file and TF_CONFIG, and start-up as the task they name;
 * placement (scopes, soft placement, the placement log, the audit and the reports)
 * and governance (floors, ceilings, priorities, lending) on a card split in three;
 * the metrics text and the profiler trace, with what varies with time masked. */
#define _GNU_SOURCE
#include "host_oom.h"

#include "runtime/metrics.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MIB (1ull << 20)

/* Standard error into a file while a scenario writes warnings and placement lines;
 * what a failed check printed meanwhile is printed again once it is back. */
static int bad_before;

static void capture_begin(void)
{
    bad_before = check_failed;
    check_capture_begin();
}

static char *capture_end(void)
{
    char *text = check_capture_end();
    if (check_failed != bad_before && text)
        fputs(text, stderr);
    return text;
}

/* ---- what the runtime says of its devices -------------------------------- */

/* The physical devices, each GPU's configuration and details, the visible GPUs
 * (before start-up: what start-up will put in force). Starts nothing. */
static uint64_t config_digest(uint64_t h)
{
    struct vdev_physical_device pd[8];
    int n = 0;
    RETRY_OK(vdev_list_physical_devices(pd, 8, &n));
    CHECK(n >= 1 && n <= 8);
    h = mix(h, (uint64_t)n);
    for (int i = 0; i < n && i < 8; i++) {
        h = mix(mix(h, pd[i].type), (uint64_t)pd[i].index);
        h = mix_str(mix_str(mix_str(h, pd[i].name), pd[i].model), pd[i].backend);
        if (pd[i].type == VDEV_DEVICE_GPU) /* the host's free memory moves */
            h = mix(mix(h, pd[i].total_bytes), pd[i].free_bytes);
        struct vdev_device_details dd;
        RETRY_OK(vdev_device_details(pd[i].name, &dd));
        h = mix(mix(mix_str(h, dd.device_name), (uint64_t)dd.cc_major), (uint64_t)dd.cc_minor);
        uint64_t limits[16];
        int nl = 0;
        RETRY_OK(vdev_config_get_logical_devices(pd[i].name, limits, 16, &nl));
        h = mix(h, (uint64_t)nl);
        for (int k = 0; k < nl && k < 16; k++)
            h = mix(h, limits[k]);
        if (pd[i].type != VDEV_DEVICE_GPU)
            continue;
        int growth = -2;
        RETRY_OK(vdev_config_get_memory_growth(pd[i].name, &growth));
        struct vdev_logical_device_config cfg[16];
        RETRY_OK(vdev_config_get_logical_devices_ex(pd[i].name, cfg, 16, &nl));
        h = mix(mix(h, (uint64_t)(growth + 2)), (uint64_t)nl);
        for (int k = 0; k < nl && k < 16; k++)
            h = mix(mix(mix(h, cfg[k].floor_bytes), cfg[k].ceiling_bytes), cfg[k].priority);
    }
    int vis[8], nv = 0;
    RETRY_OK(vdev_config_get_visible_devices(vis, 8, &nv));
    h = mix(h, (uint64_t)nv);
    for (int i = 0; i < nv && i < 8; i++)
        h = mix(h, (uint64_t)vis[i]);
    h = mix_str(h, vdev_gpu_absence_reason());
    h = mix(h, vdev_config_get_soft_device_placement());
    h = mix(mix(h, vdev_config_get_deterministic()), vdev_get_log_device_placement());
    return mix(h, (uint64_t)vdev_get_placement_policy());
}

/* The configuration, then the logical devices and each one's memory and limits,
 * and the thread plan (the runtime running). */
static uint64_t devices_digest(uint64_t h)
{
    h = config_digest(h);
    struct vdev_logical_device ld[16];
    int n = 0;
    RETRY_OK(vdev_list_logical_devices(ld, 16, &n));
    CHECK(n >= 1 && n <= 16);
    h = mix(h, (uint64_t)n);
    for (int i = 0; i < n && i < 16; i++) {
        h = mix_str(mix_str(h, ld[i].name), ld[i].backend);
        h = mix(mix(mix(h, ld[i].type), (uint64_t)ld[i].index), (uint64_t)ld[i].physical_index);
        h = mix(mix(h, ld[i].policy), ld[i].limit_bytes);
        char canon[64];
        RETRY_OK(vdev_device_canonical_name(ld[i].name, canon, sizeof canon));
        h = mix_str(h, canon);
        struct vdev_memory_info mi;
        RETRY_OK(vdev_memory_info(ld[i].name, &mi));
        h = mix(mix(mix(h, mi.bytes_in_use), mi.bytes_reserved), mi.bytes_limit);
        h = mix(mix(h, mi.n_regions), mi.largest_free_block);
        struct vdev_memory_limits lim;
        RETRY_OK(vdev_memory_get_limits(ld[i].name, &lim));
        h = mix(mix(mix(h, lim.floor_bytes), lim.ceiling_bytes), lim.priority);
        h = mix(mix(h, lim.card_budget_bytes), lim.card_floors_bytes);
        h = mix(mix(h, lim.card_claimed_bytes), lim.available_bytes);
    }
    struct vdev_thread_info ti;
    RETRY_OK(vdev_thread_info(&ti));
    return mix(mix(mix(h, (uint64_t)ti.streams), (uint64_t)ti.blas_threads), ti.deterministic);
}

/* A block of each logical device's memory taken and given back. */
static uint64_t touch_devices(uint64_t h)
{
    struct vdev_logical_device ld[16];
    int n = 0;
    RETRY_OK(vdev_list_logical_devices(ld, 16, &n));
    for (int i = 0; i < n && i < 16; i++) {
        void *p = NULL;
        RETRY_OK(vdev_mem_alloc(ld[i].name, MIB, &p));
        struct vdev_memory_info mi;
        RETRY_OK(vdev_memory_info(ld[i].name, &mi));
        h = mix(mix(h, mi.bytes_in_use), mi.n_allocs);
        RETRY_OK(vdev_mem_free(ld[i].name, p));
        uint64_t released = 0;
        RETRY_OK(vdev_memory_release_cached(ld[i].name, &released));
        h = mix(h, released);
    }
    return h;
}

/* ---- start-up under configuration ---------------------------------------- */

/* Three simulated GPUs; code hides GPU:0, lists the others out of order, splits
 * GPU:1 in three and preallocates it, gives GPU:2 half its memory split in two
 * with floors, ceilings and priorities, and splits the host in two. */
static uint64_t startup_api(void)
{
    check_fresh("2x64MiB,1x32MiB");
    const int vis[2] = {2, 1};
    RETRY_OK(vdev_config_set_visible_devices(vis, 2));
    RETRY_OK(vdev_config_set_memory_growth("GPU:1", false));
    RETRY_OK(vdev_config_set_memory_growth("/physical_device:GPU:2", true));
    const uint64_t lim[3] = {8 * MIB, 4 * MIB, 2 * MIB};
    RETRY_OK(vdev_config_set_logical_devices("gpu:1", lim, 3));
    const struct vdev_logical_device_config ex[2] = {
        {.floor_bytes = 2 * MIB, .ceiling_bytes = 6 * MIB, .priority = VDEV_PRIORITY_HIGH},
        {.ceiling_bytes = 4 * MIB, .priority = VDEV_PRIORITY_LOW}};
    RETRY_OK(vdev_config_set_logical_devices_ex("GPU:2", ex, 2));
    RETRY_OK(vdev_config_set_memory_fraction("GPU:2", 0.5));
    RETRY_OK(vdev_config_set_logical_devices("CPU:0", NULL, 2));
    RETRY_OK(vdev_set_placement_policy(VDEV_PLACEMENT_STRICT));
    vdev_config_set_soft_device_placement(true);
    vdev_config_set_deterministic(true);
    uint64_t h = config_digest(0); /* before start-up: what it will put in force */
    RETRY_OK(vdev_init());
    h = devices_digest(h);
    h = touch_devices(h);
    /* floors moved at run time: GPU:0-2 are GPU:1's, preallocated; GPU:3-4 GPU:2's */
    void *p = NULL;
    RETRY_OK(vdev_mem_alloc("GPU:1", 3 * MIB, &p));
    RETRY_OK(vdev_memory_set_limits("GPU:0", 2 * MIB, 6 * MIB)); /* its region is empty */
    RETRY_OK(vdev_memory_set_limits("GPU:1", 1 * MIB, 4 * MIB)); /* its region is in use */
    RETRY_OK(vdev_memory_set_limits("GPU:2", 2 * MIB, 2 * MIB));
    RETRY_OK(vdev_memory_set_limits("GPU:3", 1 * MIB, 0));
    RETRY_OK(vdev_mem_free("GPU:1", p));
    RETRY_OK(vdev_memory_reset_peak("GPU:1"));
    h = devices_digest(h);
    h = touch_devices(h);
    /* a repeat of what is in force is a no-op after start-up */
    RETRY_OK(vdev_config_set_memory_growth("GPU:1", false));
    RETRY_OK(vdev_config_set_logical_devices("GPU:1", lim, 3));
    vdev_shutdown();
    return h;
}

/* The lines of a file, added so that the order in which threads wrote them does
 * not count; lines starting with `skip` left out. The file is removed. */
static uint64_t file_digest(const char *path, const char *skip)
{
    char *text = check_slurp(path);
    CHECK(text != NULL);
    uint64_t sum = 0, lines = 0;
    for (char *line = text, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        if (!skip || strncmp(line, skip, strlen(skip))) {
            uint64_t h = 0;
            for (const char *c = line; *c; c++)
                h = mix(h, (uint64_t)(unsigned char)*c);
            sum += h;
            lines++;
        }
        if (!next)
            break;
    }
    free(text);
    unlink(path);
    return mix(sum, lines);
}

/* A product on a logical device, read back. */
static uint64_t product_on(uint64_t h, const char *device)
{
    const int64_t shape[2] = {3, 5};
    float x[15];
    for (int i = 0; i < 15; i++)
        x[i] = (float)(i % 7) - 2.5f;
    vdev_tensor_t *a, *b, *c;
    RETRY_OK(vdev_device_push(device));
    RETRY_PTR(a, vdev_tensor_from_host(x, shape, 2, VDEV_F32));
    RETRY_PTR(b, vdev_tensor_fill(shape, 2, VDEV_F32, 0.5f));
    RETRY_PTR(c, vdev_matmul(a, b, false, true));
    RETRY_OK(vdev_device_pop());
    float v[9];
    RETRY_OK(vdev_tensor_to_host(c, v, sizeof v));
    for (int i = 0; i < 9; i++) {
        uint32_t bits;
        memcpy(&bits, &v[i], sizeof bits);
        h = mix(h, bits);
    }
    h = mix_str(h, vdev_tensor_device(c));
    vdev_tensor_free(a);
    vdev_tensor_free(b);
    vdev_tensor_free(c);
    return h;
}

/* The same through the environment: VDEV_VISIBLE_DEVICES (in the order listed),
 * growth by both names, floors and ceilings in VDEV_LOGICAL_DEVICES, a fraction by
 * both names, the placement switches, the allocation trace, the metrics endpoint,
 * the placement report at shutdown, and a misspelt variable (warned of); products
 * on a logical CPU and a logical GPU. */
static uint64_t startup_env(void)
{
    char trace[64], path[64];
    snprintf(trace, sizeof trace, "/tmp/vdev-host-oom-config-%%p.trace");
    snprintf(path, sizeof path, "/tmp/vdev-host-oom-config-%d.trace", (int)getpid());
    check_fresh("2x64MiB,1x32MiB");
    setenv("VDEV_VISIBLE_DEVICES", "2,0", 1);
    setenv("VDEV_MEMORY_GROWTH", "false", 1);
    setenv("TF_FORCE_GPU_ALLOW_GROWTH", "false", 1);
    setenv("VDEV_LOGICAL_DEVICES", "0:8MiB,2MiB..6MiB@high,..4MiB@low;cpu:3", 1);
    setenv("VDEV_MEMORY_FRACTION", "0.5", 1);
    setenv("TF_GPU_MEMORY_FRACTION", "0.5", 1);
    setenv("VDEV_PLACEMENT", "tf", 1);
    setenv("VDEV_SOFT_DEVICE_PLACEMENT", "1", 1);
    setenv("VDEV_DETERMINISTIC", "true", 1);
    setenv("VDEV_LOG_DEVICE_PLACEMENT", "0", 1);
    setenv("VDEV_OOM_REPORT", "0", 1);
    setenv("VDEV_ALLOC_TRACE", trace, 1);
    setenv("VDEV_METRICS_ADDR", "127.0.0.1:0", 1);
    setenv("VDEV_PLACEMENT_REPORT", "1", 1);
    setenv("VDEV_MEMORY_GROWHT", "1", 1); /* misspelt: a warning at start-up */
    capture_begin();
    uint64_t h = config_digest(0);
    RETRY_OK(vdev_init());
    free(capture_end()); /* warnings come once a process: not in the digest */
    CHECK(vdev_metrics_port() > 0);
    h = devices_digest(h);
    h = product_on(h, "CPU:2");
    h = product_on(h, "GPU:1");
    h = touch_devices(h);
    capture_begin();
    vdev_shutdown();
    char *report = capture_end();
    h = mix_str(h, report ? report : "");
    free(report);
    /* every allocation and free; a failed one's comment ("# oom") left out */
    return mix(h, file_digest(path, "#"));
}

/* ---- the cluster --------------------------------------------------------- */

static char cluster_path[64];

static const char *CLUSTER =
    "{\"cluster\": {\"chief\": [\"h0:1\"], \"worker\": [\"h1:1\", \"h2:1\"], \"ps\": 1},\n"
    " \"default\": {\"memory_growth\": false, \"logical_devices\": \"0:8MiB\"},\n"
    " \"tasks\": {\"worker:0\": {\"logical_devices\": \"0:4MiB,2MiB\"},\n"
    "           \"worker:1\": {\"logical_devices\": \"0:3MiB,5MiB;1:2MiB..\", \"sim_gpus\": "
    "\"2x64MiB\",\n"
    "                        \"memory_fraction\": 0.5, \"visible_devices\": \"1,0\"},\n"
    "           \"ps:0\": {\"visible_devices\": \"\"}}}\n";

/* The cluster file and TF_CONFIG name this process worker:1, whose entry gives it
 * two GPUs of its own, split; its devices carry the task's name. */
static uint64_t cluster(void)
{
    check_fresh("1x64MiB");
    unsetenv("OMPI_COMM_WORLD_RANK");
    unsetenv("OMPI_COMM_WORLD_SIZE");
    setenv("VDEV_CLUSTER_CONFIG", cluster_path, 1);
    setenv("TF_CONFIG",
           "{\"cluster\": {\"chief\": [\"h0:1\"], \"worker\": [\"h1:1\", \"h2:1\"], "
           "\"ps\": [\"h3:1\"]}, \"task\": {\"type\": \"worker\", \"index\": 1}, "
           "\"rpc_layer\": \"grpc\"}",
           1);
    setenv("VDEV_OOM_REPORT", "1", 1);
    struct vdev_cluster_task t;
    RETRY_OK(vdev_cluster_task(&t));
    uint64_t h = mix_str(mix_str(0, t.type), t.name);
    h = mix(mix(mix(mix(h, (uint64_t)t.index), (uint64_t)t.num_chief), (uint64_t)t.num_workers),
            (uint64_t)t.num_ps);
    h = mix(h, t.is_chief);
    h = config_digest(h);
    RETRY_OK(vdev_init());
    h = devices_digest(h);
    char name[128];
    RETRY_OK(vdev_device_canonical_name("/job:worker/replica:0/task:1/device:GPU:2", name,
                                        sizeof name));
    h = mix_str(h, name);
    RETRY_OK(vdev_device_push("/job:worker/task:1/device:GPU:1"));
    h = mix_str(h, vdev_device_current());
    const int64_t shape[1] = {1 << 20}; /* 4 MiB: past GPU:1's 3 MiB... */
    capture_begin();
    before_call();
    vdev_tensor_t *x = vdev_tensor_zeros(shape, 1, VDEV_F32);
    if (armed && !refusal_pending()) /* the refusal took this one: the device's own again */
        x = vdev_tensor_zeros(shape, 1, VDEV_F32);
    free(capture_end()); /* the report: VDEV_OOM_REPORT */
    CHECK(x == NULL);
    CHECK_STATUS(vdev_last_status(), VDEV_ERR_OOM);
    h = mix_str(h, vdev_last_error());
    h = mix_str(h, vdev_last_oom_report());
    RETRY_OK(vdev_device_pop());
    capture_begin(); /* a refused allocation is reported too */
    h = touch_devices(h);
    free(capture_end());
    vdev_shutdown();
    return h;
}

/* ---- placement and governance -------------------------------------------- */

static vdev_tensor_t *filled(float v)
{
    const int64_t shape[2] = {4, 3};
    vdev_tensor_t *t;
    RETRY_PTR(t, vdev_tensor_fill(shape, 2, VDEV_F32, v));
    return t;
}

static uint64_t tensor_digest(uint64_t h, const vdev_tensor_t *t)
{
    float v[64];
    size_t bytes = (size_t)vdev_tensor_numel(t) * sizeof v[0];
    CHECK(bytes <= sizeof v);
    RETRY_OK(vdev_tensor_to_host(t, v, bytes));
    for (size_t i = 0; i < bytes / sizeof v[0]; i++) {
        uint32_t bits;
        memcpy(&bits, &v[i], sizeof bits);
        h = mix(h, bits);
    }
    return mix_str(h, vdev_tensor_device(t));
}

/* What a report writes into a FILE, in the digest. */
static uint64_t report_digest(uint64_t h, void (*report)(FILE *))
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    CHECK(f != NULL);
    if (!f)
        return h;
    report(f);
    fclose(f);
    h = mix_str(h, buf);
    free(buf);
    return h;
}

static int pressure_calls;
static void on_pressure(const char *device, enum vdev_pressure what, uint64_t bytes, void *user)
{
    (void)device;
    (void)bytes;
    (void)user;
    pressure_calls += 1 + (int)what;
}

/* GPU:0 split in three with floors, ceilings and priorities, GPU:1 whole: ops in
 * scopes and out of them, a variable's ops run away from it (the audit), a scope
 * soft placement sends to GPU:0, the placement log; then the limits changed at run
 * time and a device that must borrow its card's cached memory from another. */
static uint64_t placement(void)
{
    check_fresh("1x48MiB,1x64MiB");
    const struct vdev_logical_device_config devs[3] = {
        {.floor_bytes = 4 * MIB, .ceiling_bytes = 24 * MIB, .priority = VDEV_PRIORITY_CRITICAL},
        {.ceiling_bytes = 32 * MIB, .priority = VDEV_PRIORITY_LOW},
        {.floor_bytes = 2 * MIB}};
    RETRY_OK(vdev_config_set_logical_devices_ex("GPU:0", devs, 3));
    vdev_config_set_soft_device_placement(true);
    RETRY_OK(vdev_init());
    vdev_placement_reset();
    RETRY_OK(vdev_memory_set_pressure_callback("GPU:1", on_pressure, NULL));
    pressure_calls = 0;

    RETRY_OK(vdev_device_push("GPU:2"));
    vdev_tensor_t *v;
    RETRY_PTR(v, vdev_variable(filled(2)));
    RETRY_OK(vdev_device_pop());
    RETRY_OK(vdev_device_push("/device:GPU:3"));
    vdev_tensor_t *a = filled(1), *b = filled(3);
    RETRY_OK(vdev_device_push("GPU")); /* the enclosing scope's index */
    uint64_t h = mix_str(0, vdev_device_current());
    vdev_tensor_t *m;
    RETRY_PTR(m, vdev_matmul(a, b, false, true));
    RETRY_OK(vdev_device_pop());
    RETRY_OK(vdev_device_pop());

    capture_begin();
    vdev_set_log_device_placement(true);
    RETRY_OK(vdev_device_push("GPU:0"));
    vdev_tensor_t *away, *away2;
    RETRY_PTR(away, vdev_add(a, v));
    RETRY_PTR(away2, vdev_relu(away));
    RETRY_OK(vdev_device_pop());
    vdev_tensor_t *here;
    RETRY_PTR(here, vdev_mul(v, v)); /* unscoped: by its variable */
    RETRY_OK(vdev_device_push("GPU:42")); /* soft placement: GPU:0, and a warning */
    vdev_tensor_t *soft;
    RETRY_PTR(soft, vdev_sub(a, b));
    RETRY_OK(vdev_device_pop());
    vdev_set_log_device_placement(false);
    char *log = capture_end();
    /* the placement lines, in order; the warning comes once a process */
    for (char *line = log, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        if (!strncmp(line, "Executing op ", 13))
            h = mix_str(h, line);
        if (!next)
            break;
    }
    free(log);

    vdev_tensor_t *all[] = {v, a, b, m, away, away2, here, soft};
    for (size_t i = 0; i < VDEV_ARRAY_LEN(all); i++)
        h = tensor_digest(h, all[i]);
    struct vdev_audit_entry e[8];
    int n = 0;
    RETRY_OK(vdev_placement_audit(e, 8, &n));
    CHECK(n >= 2 && n <= 8);
    for (int i = 0; i < n && i < 8; i++) {
        h = mix_str(mix_str(mix_str(h, e[i].op_type), e[i].ran_on), e[i].home);
        h = mix(mix(h, e[i].count), e[i].bytes_copied);
    }
    h = mix(mix(h, vdev_placement_op_count(NULL, NULL)),
            vdev_placement_bytes_copied(NULL, "/device:GPU:0"));
    h = report_digest(h, vdev_placement_report);
    h = report_digest(h, vdev_device_report);
    for (size_t i = 0; i < VDEV_ARRAY_LEN(all); i++)
        vdev_tensor_free(all[i]);
    h = touch_devices(h); /* their frees done, every region empty given back */

    /* governance at run time */
    RETRY_OK(vdev_memory_set_limits("GPU:2", 1 * MIB, 8 * MIB));
    RETRY_OK(vdev_memory_set_priority("GPU:1", VDEV_PRIORITY_HIGH));
    RETRY_OK(vdev_memory_set_priority("GPU:0", VDEV_PRIORITY_LOW));
    /* GPU:0 leaves empty regions; GPU:1 then needs more than the card has
     * unclaimed, and borrows them */
    void *p[31] = {0};
    for (int i = 0; i < 3; i++)
        RETRY_OK(vdev_mem_alloc("GPU:0", 7 * MIB, &p[i]));
    for (int i = 0; i < 3; i++)
        RETRY_OK(vdev_mem_free("GPU:0", p[i]));
    for (int i = 0; i < 31; i++)
        RETRY_OK(vdev_mem_alloc("GPU:1", MIB, &p[i]));
    for (int d = 0; d < 3; d++) {
        char name[16];
        snprintf(name, sizeof name, "GPU:%d", d);
        struct vdev_memory_limits lim;
        RETRY_OK(vdev_memory_get_limits(name, &lim));
        h = mix(mix(mix(h, lim.floor_bytes), lim.ceiling_bytes), lim.priority);
        h = mix(mix(mix(h, lim.card_claimed_bytes), lim.available_bytes), lim.n_lends);
        h = mix(mix(h, lim.lent_bytes), lim.borrowed_bytes);
        if (run_n == 0 && d == 0)
            CHECK(lim.n_lends > 0); /* the run exercises lending */
    }
    for (int i = 0; i < 31; i++)
        RETRY_OK(vdev_mem_free("GPU:1", p[i]));
    h = mix(h, (uint64_t)pressure_calls);
    RETRY_OK(vdev_memory_set_pressure_callback("GPU:1", NULL, NULL));
    h = devices_digest(h);
    vdev_shutdown();
    return h;
}

/* ---- metrics and the profiler trace -------------------------------------- */

/* A line of the metrics text, without its value where the value need not be the
 * same: the op-time histogram's buckets and sum vary with time, and a refusal in a
 * device allocation fails that allocation with VDEV_ERR_OOM, which the failure
 * counter counts (the call made again is another allocation). */
static uint64_t metrics_line(uint64_t h, const char *line)
{
    int masked = (!strncmp(line, "vdev_op_duration_seconds_", 25) &&
                  strncmp(line, "vdev_op_duration_seconds_count", 30)) ||
                 !strncmp(line, "vdev_allocation_failures_total{", 31);
    const char *end = masked ? strrchr(line, ' ') : NULL;
    if (!end)
        return mix_str(h, line);
    for (const char *c = line; c < end; c++)
        h = mix(h, (uint64_t)(unsigned char)*c);
    return mix(h, 0xff);
}

/* A line of the trace, digits left out (times, thread ids, the process id), added
 * so that the order in which threads wrote does not count. Left out: memory
 * samples, which come at most one every so often, and an allocation failed by a
 * refusal, traced as the OOM it was reported as; and the comma that ends every
 * event but the last, as which event comes last depends on those samples. */
static uint64_t trace_line(const char *line)
{
    uint64_t h = 0;
    if (strstr(line, "\"cat\":\"oom\"") || strstr(line, "\"ph\":\"C\""))
        return 0;
    size_t n = strlen(line);
    if (n && line[n - 1] == ',')
        n--;
    for (size_t i = 0; i < n; i++)
        if (line[i] < '0' || line[i] > '9')
            h = mix(h, (uint64_t)(unsigned char)line[i]);
    return h;
}

/* Ops on two GPUs and a copy between them, observed (a profiler trace and the
 * endpoint, which records op times while it serves); the metrics text, then the
 * trace written at shutdown. */
static uint64_t metrics(void)
{
    char path[64];
    snprintf(path, sizeof path, "/tmp/vdev-host-oom-config-%d.json", (int)getpid());
    check_fresh("2x64MiB");
    setenv("VDEV_TRACE_FILE", path, 1);
    RETRY_OK(vdev_init());
    vdev_placement_reset();
    RETRY_OK(vdev_metrics_serve("127.0.0.1:0"));
    CHECK(vdev_metrics_port() > 0);
    RETRY_OK(vdev_device_push("GPU:1"));
    vdev_tensor_t *a = filled(1), *b = filled(2), *c;
    RETRY_OK(vdev_device_pop());
    RETRY_OK(vdev_device_push("GPU:0"));
    RETRY_PTR(c, vdev_matmul(a, b, true, false));
    RETRY_OK(vdev_device_pop());
    void *p;
    RETRY_OK(vdev_mem_alloc("GPU:1", 3 * MIB, &p));
    RETRY_OK(vdev_memory_set_limits("GPU:1", 0, 16 * MIB));
    uint64_t h = tensor_digest(0, c);
    h = touch_devices(h); /* the copies' frees done: the gauges hold still */

    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    CHECK(f != NULL);
    if (f) {
        vdev_metrics_write(f);
        fclose(f);
        CHECK(strstr(text, "vdev_memory_in_use_bytes{device=\"/device:GPU:1\"") != NULL);
        CHECK(strstr(text, "vdev_ops_total{device=\"/device:GPU:0\",op=\"MatMul\"} 1\n") != NULL);
        for (char *line = text, *next; *line; line = next) {
            next = strchr(line, '\n');
            if (next)
                *next++ = '\0';
            h = metrics_line(h, line);
            if (!next)
                break;
        }
        free(text);
    }
    vdev_metrics_stop();
    RETRY_OK(vdev_mem_free("GPU:1", p));
    vdev_tensor_free(a);
    vdev_tensor_free(b);
    vdev_tensor_free(c);
    vdev_shutdown();

    char *trace = check_slurp(path);
    CHECK(trace != NULL);
    uint64_t sum = 0, lines = 0;
    for (char *line = trace, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        uint64_t lh = trace_line(line);
        sum += lh;
        lines += lh != 0;
        if (!next)
            break;
    }
    free(trace);
    unlink(path);
    return mix(mix(h, sum), lines);
}

int main(void)
{
    char dir[] = "/tmp/vdev-host-oom-config-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    snprintf(cluster_path, sizeof cluster_path, "%s/cluster.json", dir);
    FILE *f = fopen(cluster_path, "w");
    CHECK(f != NULL);
    if (f) {
        fputs(CLUSTER, f);
        fclose(f);
    }
    sweep("start-up configured by code", startup_api);
    sweep("start-up configured by the environment", startup_env);
    sweep("the cluster file and TF_CONFIG", cluster);
    /* These two count the copies an op makes of its inputs before its output is
     * allocated (the placement report and audit, the metrics): an output the device
     * refuses leaves those copies made, and the same op made again makes them again,
     * so their digests would differ for a device refusal while nothing is lost.
     * Host refusals only; the ops' device refusals are test_host_oom_ops's. */
    sweep_kind("placement and governance", placement, 0);
    sweep_kind("metrics and the profiler trace", metrics, 0);
    unlink(cluster_path);
    rmdir(dir);
    return check_done();
}
