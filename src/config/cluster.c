/* cluster.c — the cluster a process belongs to, and its device configuration
 * from the cluster file, read before start-up (at discovery).
 *
 * Sources:
 *  - VDEV_CLUSTER_CONFIG=FILE, a JSON object:
 *      {"cluster": {"chief": ["host:port"], "worker": ["...", "..."], "ps": [...]},
 *       "default": {"memory_growth": "true"},
 *       "tasks": {"worker:0": {"logical_devices": "0:2GiB"},
 *                 "worker:1": {"logical_devices": "0:1GiB", "sim_gpus": "1x4GiB"}}}
 *    "cluster" is TensorFlow's ClusterSpec (a job's list of addresses, whose
 *    length is what counts here: MPI launches the processes; a count is
 *    accepted too); "default" applies to every task and a task's entry in
 *    "tasks" to that task, each key in the syntax of the environment variable
 *    it stands for (visible_devices, memory_growth, logical_devices,
 *    memory_fraction, sim_gpus);
 *  - TF_CONFIG, TensorFlow's {"cluster": {...}, "task": {"type": "worker",
 *    "index": 1}}, for the roles: the cluster (when the file has none) and
 *    this process's task (refused without a cluster); rpc_layer, environment
 *    and a cloud's "job" are accepted unread, any other key refused.
 * Without TF_CONFIG's task, a process launched by MPI is the task at its
 * rank (OMPI_COMM_WORLD_RANK, PMIX_RANK or PMI_RANK, read from the
 * environment since MPI has not started yet), counting chief, then workers,
 * then ps; without a cluster, every process of the launch is a worker (as
 * many as OMPI_COMM_WORLD_SIZE, PMI_SIZE or Slurm's SLURM_STEP_NUM_TASKS say). A
 * process that nothing launched and no variable names is /job:localhost.
 *
 * Every process checks every entry of the file, its own and the others',
 * before start-up, so a malformed entry fails start-up on every process
 * with the same message ("VDEV_CLUSTER_CONFIG=FILE: worker:1:
 * logical_devices=\"0:4XB\": ...") and none waits for one that stopped.
 * What depends on the hardware (a GPU index past this machine's GPUs, limits
 * beyond its cards) is checked by the process whose entry it is, at
 * start-up, with the same naming.
 *
 * This process's values replace the environment's for the variables they
 * stand for (memory_growth and memory_fraction also hide TensorFlow's names
 * of the same settings, TF_FORCE_GPU_ALLOW_GROWTH and TF_GPU_MEMORY_FRACTION);
 * code still wins over both. The state is loaded at discovery and forgotten
 * at vdev_shutdown, both with the configuration's lock held; its own lock
 * guards the public queries. */
#define _GNU_SOURCE
#include "config/internal.h"

#include <errno.h>
#include <string.h>
#include <yajl/yajl_tree.h>

#define CL_FILE_MAX (1u << 20) /* bytes of a cluster file */
#define CL_VALUE 512           /* bytes of a value */
#define CL_MAX_TASKS 4096      /* tasks of one job */

enum { K_VISIBLE, K_GROWTH, K_LOGICAL, K_FRACTION, K_SIM, K_COUNT };

/* Each key of an entry, the variable it stands for, and a variable it hides. */
static const struct {
    const char *key, *var, *hides;
} KEYS[K_COUNT] = {
    {"visible_devices", "VDEV_VISIBLE_DEVICES", NULL},
    {"memory_growth", "VDEV_MEMORY_GROWTH", "TF_FORCE_GPU_ALLOW_GROWTH"},
    {"logical_devices", "VDEV_LOGICAL_DEVICES", NULL},
    {"memory_fraction", "VDEV_MEMORY_FRACTION", "TF_GPU_MEMORY_FRACTION"},
    {"sim_gpus", "VDEV_SIM_GPUS", NULL},
};

static const char *const JOBS[VDEV_JOB_COUNT] = {"chief", "worker", "ps"};

static struct {
    pthread_mutex_t lock;
    int loaded;
    int job, index;               /* this task; job VDEV_JOB_LOCAL without a cluster */
    int n[VDEV_JOB_COUNT];        /* tasks of each job */
    char path[1024];              /* VDEV_CLUSTER_CONFIG, "" unset */
    int set[K_COUNT];             /* this task's values */
    char value[K_COUNT][CL_VALUE];
    char from[K_COUNT][32];       /* "worker:1" or "default" */
} C = {.lock = PTHREAD_MUTEX_INITIALIZER, .job = VDEV_JOB_LOCAL};

/* ---- helpers ---- */

/* A whole number in [0, max] from an environment variable; -1 when unset or
 * not one. */
static int env_index(const char *name, int max)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return -1;
    long n = 0;
    for (const char *p = v; *p; p++) {
        if (*p < '0' || *p > '9' || n > max)
            return -1;
        n = n * 10 + (*p - '0');
    }
    return n <= max ? (int)n : -1;
}

/* The launcher's rank of this process (-1: no launcher), and the size. */
static int launch_rank(int *size)
{
    static const char *const R[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"};
    /* Slurm's srun with PMIx gives PMIX_RANK and no size of its own: its step's
     * task count stands in (without it each process would count rank + 1). */
    static const char *const S[] = {"OMPI_COMM_WORLD_SIZE", "OMPI_UNIVERSE_SIZE", "PMI_SIZE",
                                    "SLURM_STEP_NUM_TASKS"};
    int r = -1;
    *size = -1;
    for (size_t i = 0; i < VDEV_ARRAY_LEN(R) && r < 0; i++)
        r = env_index(R[i], 1 << 24);
    for (size_t i = 0; i < VDEV_ARRAY_LEN(S) && *size < 0; i++)
        *size = env_index(S[i], 1 << 24);
    return r;
}

static int job_of(const char *s)
{
    for (int j = 0; j < VDEV_JOB_COUNT; j++)
        if (strcmp(s, JOBS[j]) == 0)
            return j;
    return -1;
}

/* Reads a whole file of at most CL_FILE_MAX bytes; *text is the caller's. */
static enum vdev_status read_file(const char *path, char **text)
{
    *text = NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return vdev_error(errno == ENOENT ? VDEV_ERR_NOT_FOUND : VDEV_ERR_IO,
                          "VDEV_CLUSTER_CONFIG=%s: cannot open it: %s", path, strerror(errno));
    char *buf = vdev_malloc(CL_FILE_MAX + 1);
    if (!buf) {
        fclose(f);
        return vdev_error(VDEV_ERR_OOM, "VDEV_CLUSTER_CONFIG=%s: out of host memory", path);
    }
    size_t n = fread(buf, 1, CL_FILE_MAX + 1, f);
    int err = ferror(f);
    fclose(f);
    if (err || n > CL_FILE_MAX) {
        free(buf);
        return vdev_error(VDEV_ERR_IO, err ? "VDEV_CLUSTER_CONFIG=%s: cannot read it"
                                           : "VDEV_CLUSTER_CONFIG=%s: larger than 1 MiB",
                          path);
    }
    buf[n] = '\0';
    *text = buf;
    return VDEV_OK;
}

/* Parses JSON text; `what` names the source in messages. */
static enum vdev_status parse_json(const char *text, const char *what, yajl_val *out)
{
    char err[256] = "";
    *out = yajl_tree_parse(text, err, sizeof err);
    if (*out && YAJL_IS_OBJECT(*out))
        return VDEV_OK;
    if (*out) {
        yajl_tree_free(*out);
        *out = NULL;
        return vdev_error(VDEV_ERR_CONFIG, "%s: expected a JSON object", what);
    }
    err[strcspn(err, "\n")] = '\0';
    return vdev_error(VDEV_ERR_CONFIG, "%s: not valid JSON: %s", what, err[0] ? err : "?");
}

/* A cluster spec: job -> list of addresses (or a count) into n[]. */
static enum vdev_status parse_cluster(yajl_val v, const char *what, int n[VDEV_JOB_COUNT])
{
    for (int j = 0; j < VDEV_JOB_COUNT; j++)
        n[j] = 0;
    if (!YAJL_IS_OBJECT(v))
        return vdev_error(VDEV_ERR_CONFIG, "%s: \"cluster\" is not an object of jobs (expected "
                                           "e.g. {\"worker\": [\"host0:2222\", "
                                           "\"host1:2222\"]})",
                          what);
    int seen[VDEV_JOB_COUNT] = {0};
    for (size_t i = 0; i < v->u.object.len; i++) {
        const char *job = v->u.object.keys[i];
        yajl_val t = v->u.object.values[i];
        int j = job_of(job);
        if (j < 0)
            return vdev_error(VDEV_ERR_CONFIG, "%s: cluster: job \"%s\" is not one vdev runs "
                                               "(chief, worker or ps)",
                              what, job);
        if (seen[j]++)
            return vdev_error(VDEV_ERR_CONFIG, "%s: cluster: job \"%s\" appears twice", what, job);
        long long count;
        if (YAJL_IS_ARRAY(t)) {
            count = (long long)t->u.array.len;
            for (size_t k = 0; k < t->u.array.len; k++)
                if (!YAJL_IS_STRING(t->u.array.values[k]))
                    return vdev_error(VDEV_ERR_CONFIG, "%s: cluster: %s: task %zu's address is "
                                                       "not a string",
                                      what, job, k);
        } else if (YAJL_IS_INTEGER(t)) {
            count = YAJL_GET_INTEGER(t);
        } else {
            return vdev_error(VDEV_ERR_CONFIG, "%s: cluster: %s: expected a list of addresses "
                                               "or a number of tasks",
                              what, job);
        }
        if (count < 0 || count > CL_MAX_TASKS)
            return vdev_error(VDEV_ERR_CONFIG, "%s: cluster: %s: %lld tasks (0 to %d)", what,
                              job, count, CL_MAX_TASKS);
        n[j] = (int)count;
    }
    if (n[VDEV_JOB_CHIEF] > 1)
        return vdev_error(VDEV_ERR_CONFIG, "%s: cluster: %d chief tasks; a cluster has at most "
                                           "one",
                          what, n[VDEV_JOB_CHIEF]);
    if (n[VDEV_JOB_CHIEF] + n[VDEV_JOB_WORKER] == 0)
        return vdev_error(VDEV_ERR_CONFIG, "%s: cluster: no chief and no worker task", what);
    return VDEV_OK;
}

/* A task's name "worker:1" into job and index; 0 when malformed. */
static int parse_task_name(const char *s, int *job, int *index)
{
    const char *colon = strchr(s, ':');
    if (!colon || colon == s || strlen(colon + 1) == 0 || strlen(colon + 1) > 6)
        return 0;
    char j[16];
    size_t len = (size_t)(colon - s);
    if (len >= sizeof j)
        return 0;
    memcpy(j, s, len);
    j[len] = '\0';
    if ((*job = job_of(j)) < 0)
        return 0;
    int n = 0;
    for (const char *p = colon + 1; *p; p++) {
        if (*p < '0' || *p > '9')
            return 0;
        n = n * 10 + (*p - '0');
    }
    *index = n;
    return 1;
}

/* ---- an entry's settings ---- */

/* The text of a value: a string as it is, a boolean as "true"/"false" and a
 * number as written (memory_growth and memory_fraction). */
static int value_text(yajl_val v, int key, char *out, size_t cap)
{
    if (YAJL_IS_STRING(v)) {
        if (strlen(v->u.string) >= cap)
            return 0;
        vdev_strlcpy(out, v->u.string, cap);
        return 1;
    }
    if (key == K_GROWTH && (YAJL_IS_TRUE(v) || YAJL_IS_FALSE(v))) {
        vdev_strlcpy(out, YAJL_IS_TRUE(v) ? "true" : "false", cap);
        return 1;
    }
    if (key == K_FRACTION && YAJL_IS_NUMBER(v) && strlen(v->u.number.r) < cap) {
        vdev_strlcpy(out, v->u.number.r, cap);
        return 1;
    }
    return 0;
}

/* Checks one value with the parser of its variable (GPU indices up to the
 * most vdev has: the machine's own count is checked at start-up). */
static enum vdev_status check_value(int key, const char *label, const char *text)
{
    enum vdev_status st = VDEV_OK;
    switch (key) {
    case K_VISIBLE: {
        int vis[VDEV_MAX_GPUS], n;
        st = vdev_env_visible(label, text, VDEV_MAX_GPUS, vis, &n);
        break;
    }
    case K_GROWTH: {
        int g[VDEV_MAX_GPUS];
        st = vdev_env_growth(label, text, VDEV_MAX_GPUS, g);
        break;
    }
    case K_LOGICAL: {
        struct vdev_gpu_cfg *cfg = vdev_calloc(VDEV_MAX_GPUS, sizeof *cfg);
        int set[VDEV_MAX_GPUS] = {0}, cpus = 0;
        if (!cfg)
            return vdev_error(VDEV_ERR_OOM, "out of host memory reading the cluster file");
        st = vdev_env_logical(label, text, VDEV_MAX_GPUS, cfg, set, &cpus);
        free(cfg);
        break;
    }
    case K_FRACTION: {
        double f;
        st = vdev_env_fraction(label, text, &f);
        break;
    }
    case K_SIM:
        st = vdev_backend_sim_check(text, label);
        break;
    default:
        break;
    }
    return st;
}

/* Checks an entry ("default" or a task's) and, when mine, keeps its values
 * (a task's over the default's). */
static enum vdev_status entry(yajl_val v, const char *name, int mine)
{
    char label[1200];
    if (!YAJL_IS_OBJECT(v))
        return vdev_error(VDEV_ERR_CONFIG, "VDEV_CLUSTER_CONFIG=%s: %s: expected an object of "
                                           "settings (visible_devices, memory_growth, "
                                           "logical_devices, memory_fraction, sim_gpus)",
                          C.path, name);
    int seen[K_COUNT] = {0};
    for (size_t i = 0; i < v->u.object.len; i++) {
        const char *k = v->u.object.keys[i];
        int key = -1;
        for (int q = 0; q < K_COUNT; q++)
            if (strcmp(k, KEYS[q].key) == 0)
                key = q;
        if (key < 0)
            return vdev_error(VDEV_ERR_CONFIG, "VDEV_CLUSTER_CONFIG=%s: %s: unknown key \"%s\" "
                                               "(expected visible_devices, memory_growth, "
                                               "logical_devices, memory_fraction or sim_gpus)",
                              C.path, name, k);
        if (seen[key]++)
            return vdev_error(VDEV_ERR_CONFIG, "VDEV_CLUSTER_CONFIG=%s: %s: key \"%s\" appears "
                                               "twice",
                              C.path, name, k);
        snprintf(label, sizeof label, "VDEV_CLUSTER_CONFIG=%s: %s: %s", C.path, name, k);
        char text[CL_VALUE];
        if (!value_text(v->u.object.values[i], key, text, sizeof text))
            return vdev_error(VDEV_ERR_CONFIG, "%s: expected a string in the syntax of %s%s",
                              label, KEYS[key].var,
                              key == K_GROWTH     ? " (or true/false)"
                              : key == K_FRACTION ? " (or a number)"
                                                  : "");
        enum vdev_status st = check_value(key, label, text);
        if (st != VDEV_OK)
            return st;
        if (mine) {
            C.set[key] = 1;
            vdev_strlcpy(C.value[key], text, sizeof C.value[key]);
            vdev_strlcpy(C.from[key], name, sizeof C.from[key]);
        }
    }
    return VDEV_OK;
}

/* ---- loading ---- */

/* TF_CONFIG's task index as TensorFlow reads it (int() of the value): a whole
 * number, a number with no fraction (1.0), or a string of decimal digits with
 * blanks around ("1"); -1 for anything else (1.5 too, which int() would cut). */
static long long tf_index_of(yajl_val x)
{
    if (x && YAJL_IS_INTEGER(x))
        return YAJL_GET_INTEGER(x);
    if (x && YAJL_IS_DOUBLE(x)) {
        double d = YAJL_GET_DOUBLE(x);
        return d >= 0 && d < CL_MAX_TASKS && d == (double)(long long)d ? (long long)d : -1;
    }
    if (!x || !YAJL_IS_STRING(x))
        return -1;
    const char *p = x->u.string;
    while (*p == ' ' || *p == '\t' || *p == '\n')
        p++;
    long long n = -1;
    for (; *p >= '0' && *p <= '9' && n < CL_MAX_TASKS; p++)
        n = (n < 0 ? 0 : n * 10) + (*p - '0');
    while (*p == ' ' || *p == '\t' || *p == '\n')
        p++;
    return *p ? -1 : n;
}

/* TF_CONFIG: its cluster (*have_cluster) and task (job -1 when absent). */
static enum vdev_status read_tf_config(int n[VDEV_JOB_COUNT], int *have_cluster, int *job,
                                       int *index)
{
    *have_cluster = 0;
    *job = -1;
    const char *text = getenv("TF_CONFIG");
    if (!text)
        return VDEV_OK;
    /* empty is not unset: TensorFlow's TFConfigClusterResolver json.loads it and fails */
    if (!*text)
        return vdev_error(VDEV_ERR_CONFIG, "TF_CONFIG is empty (expected JSON such as "
                                           "{\"cluster\": {...}, \"task\": {...}}; unset it for "
                                           "none)");
    yajl_val root;
    enum vdev_status st = parse_json(text, "TF_CONFIG", &root);
    if (st != VDEV_OK)
        return st;
    for (size_t i = 0; i < root->u.object.len && st == VDEV_OK; i++) {
        const char *k = root->u.object.keys[i];
        yajl_val v = root->u.object.values[i];
        if (strcmp(k, "cluster") == 0) {
            st = parse_cluster(v, "TF_CONFIG", n);
            *have_cluster = 1;
        } else if (strcmp(k, "task") == 0) {
            const char *tpath[] = {"type", NULL}, *ipath[] = {"index", NULL};
            yajl_val t = YAJL_IS_OBJECT(v) ? yajl_tree_get(v, tpath, yajl_t_string) : NULL;
            yajl_val x = YAJL_IS_OBJECT(v) ? yajl_tree_get(v, ipath, yajl_t_any) : NULL;
            long long ix = tf_index_of(x);
            if (!t || ix < 0 || ix >= CL_MAX_TASKS)
                st = vdev_error(VDEV_ERR_CONFIG, "TF_CONFIG: \"task\" must be {\"type\": "
                                                 "\"worker\", \"index\": 0} (a job name and a "
                                                 "whole number)");
            else if ((*job = job_of(t->u.string)) < 0)
                st = vdev_error(VDEV_ERR_CONFIG, "TF_CONFIG: task type \"%s\" is not one vdev "
                                                 "runs (chief, worker or ps)",
                                t->u.string);
            else
                *index = (int)ix;
        } else if (strcmp(k, "rpc_layer") != 0 && strcmp(k, "environment") != 0 &&
                   strcmp(k, "job") != 0) { /* "job": the cloud's job spec, beside its TF_CONFIG */
            st = vdev_error(VDEV_ERR_CONFIG, "TF_CONFIG: unknown key \"%s\" (expected cluster, "
                                             "task, rpc_layer, environment or job)",
                            k);
        }
    }
    yajl_tree_free(root);
    return st;
}

/* The task at a launcher's rank, counting chief, workers, then ps. */
static int task_at(const int n[VDEV_JOB_COUNT], int rank, int *job, int *index)
{
    for (int j = 0; j < VDEV_JOB_COUNT; j++) {
        if (rank < n[j]) {
            *job = j;
            *index = rank;
            return 1;
        }
        rank -= n[j];
    }
    return 0;
}

static void forget_locked(void)
{
    C.loaded = 0;
    C.job = VDEV_JOB_LOCAL;
    C.index = 0;
    C.path[0] = '\0';
    for (int j = 0; j < VDEV_JOB_COUNT; j++)
        C.n[j] = 0;
    for (int k = 0; k < K_COUNT; k++) {
        C.set[k] = 0;
        C.value[k][0] = C.from[k][0] = '\0';
    }
}

static enum vdev_status load_locked(void)
{
    forget_locked();
    int tf_n[VDEV_JOB_COUNT], tf_cluster, tf_job, tf_index = 0;
    enum vdev_status st = read_tf_config(tf_n, &tf_cluster, &tf_job, &tf_index);
    if (st != VDEV_OK)
        return st;
    const char *path = getenv("VDEV_CLUSTER_CONFIG");
    yajl_val root = NULL, file_cluster = NULL, def = NULL, tasks = NULL;
    if (path) {
        if (!*path || strlen(path) >= sizeof C.path)
            return vdev_error(VDEV_ERR_CONFIG, "VDEV_CLUSTER_CONFIG is %s (expected the path of "
                                               "a JSON file)",
                              *path ? "too long" : "empty");
        vdev_strlcpy(C.path, path, sizeof C.path);
        char *text, what[1100];
        if ((st = read_file(path, &text)) != VDEV_OK)
            return st;
        snprintf(what, sizeof what, "VDEV_CLUSTER_CONFIG=%s", path);
        st = parse_json(text, what, &root);
        free(text);
        if (st != VDEV_OK)
            return st;
        for (size_t i = 0; i < root->u.object.len && st == VDEV_OK; i++) {
            const char *k = root->u.object.keys[i];
            yajl_val *slot = strcmp(k, "cluster") == 0   ? &file_cluster
                             : strcmp(k, "default") == 0 ? &def
                             : strcmp(k, "tasks") == 0   ? &tasks
                                                         : NULL;
            if (!slot)
                st = vdev_error(VDEV_ERR_CONFIG, "%s: unknown key \"%s\" (expected cluster, "
                                                 "default or tasks)",
                                what, k);
            else if (*slot)
                st = vdev_error(VDEV_ERR_CONFIG, "%s: key \"%s\" appears twice", what, k);
            else
                *slot = root->u.object.values[i];
        }
        if (st == VDEV_OK && file_cluster)
            st = parse_cluster(file_cluster, what, C.n);
        if (st == VDEV_OK && file_cluster && tf_cluster)
            for (int j = 0; j < VDEV_JOB_COUNT && st == VDEV_OK; j++)
                if (tf_n[j] != C.n[j])
                    st = vdev_error(VDEV_ERR_CONFIG, "%s and TF_CONFIG disagree: %d %s task%s "
                                                     "in the file, %d in TF_CONFIG",
                                    what, C.n[j], JOBS[j], C.n[j] == 1 ? "" : "s", tf_n[j]);
        if (st == VDEV_OK && tasks && !YAJL_IS_OBJECT(tasks))
            st = vdev_error(VDEV_ERR_CONFIG, "%s: \"tasks\" is not an object of tasks (expected "
                                             "e.g. {\"worker:0\": {\"logical_devices\": "
                                             "\"0:2GiB\"}})",
                            what);
        if (st != VDEV_OK) {
            yajl_tree_free(root);
            return st;
        }
    }
    if (!file_cluster && tf_cluster)
        memcpy(C.n, tf_n, sizeof C.n);
    int have_cluster = file_cluster || tf_cluster;
    const char *source = file_cluster ? "VDEV_CLUSTER_CONFIG" : "TF_CONFIG"; /* the cluster's */
    int size, rank = launch_rank(&size);
    /* this process's task */
    if (tf_job >= 0 && !have_cluster) {
        /* TensorFlow's strategies ignore such a task (one local worker) or fail */
        st = vdev_error(VDEV_ERR_CONFIG, "TF_CONFIG gives this process's task (%s:%d) but no "
                                         "cluster: add TF_CONFIG's \"cluster\" (or "
                                         "VDEV_CLUSTER_CONFIG's), or unset \"task\"",
                        JOBS[tf_job], tf_index);
    } else if (tf_job >= 0) {
        C.job = tf_job;
        C.index = tf_index;
    } else if (rank >= 0 && have_cluster) {
        if (!task_at(C.n, rank, &C.job, &C.index))
            st = vdev_error(VDEV_ERR_CONFIG, "%s: this process is rank %d of the launch, but "
                                             "the cluster has %d task%s (%d chief, %d worker, "
                                             "%d ps)",
                            source, rank,
                            C.n[0] + C.n[1] + C.n[2], C.n[0] + C.n[1] + C.n[2] == 1 ? "" : "s",
                            C.n[0], C.n[1], C.n[2]);
    } else if (rank >= 0) { /* launched, no cluster: every process a worker */
        C.job = VDEV_JOB_WORKER;
        C.index = rank;
        C.n[VDEV_JOB_WORKER] = size > rank ? size : rank + 1;
    } else if (have_cluster) {
        st = vdev_error(VDEV_ERR_CONFIG, "%s gives a cluster but not this process's task: set "
                                         "TF_CONFIG's \"task\", or launch the processes with "
                                         "mpirun",
                        source);
    } else if (path) { /* settings alone, for the one local process */
        C.job = VDEV_JOB_LOCAL;
    }
    if (st == VDEV_OK && C.job >= 0 && have_cluster && C.index >= C.n[C.job])
        st = vdev_error(VDEV_ERR_CONFIG, "TF_CONFIG: task %s:%d is not in the cluster, which has "
                                         "%d %s task%s",
                        JOBS[C.job], C.index, C.n[C.job], JOBS[C.job], C.n[C.job] == 1 ? "" : "s");
    /* every entry, mine kept */
    if (st == VDEV_OK && def)
        st = entry(def, "default", 1);
    for (size_t i = 0; st == VDEV_OK && tasks && i < tasks->u.object.len; i++) {
        const char *name = tasks->u.object.keys[i];
        int job, index;
        if (!parse_task_name(name, &job, &index)) {
            st = vdev_error(VDEV_ERR_CONFIG, "VDEV_CLUSTER_CONFIG=%s: tasks: \"%s\" is not a task "
                                             "name (expected chief:0, worker:N or ps:N)",
                            C.path, name);
            break;
        }
        for (size_t k = 0; k < i && st == VDEV_OK; k++) {
            const char *other = tasks->u.object.keys[k];
            int oj = -1, oi = -1;
            if (strcmp(other, name) == 0)
                st = vdev_error(VDEV_ERR_CONFIG, "VDEV_CLUSTER_CONFIG=%s: tasks: \"%s\" appears "
                                                 "twice",
                                C.path, name);
            else if (parse_task_name(other, &oj, &oi) && oj == job && oi == index)
                st = vdev_error(VDEV_ERR_CONFIG, "VDEV_CLUSTER_CONFIG=%s: tasks: \"%s\" and "
                                                 "\"%s\" are the same task (%s:%d)",
                                C.path, other, name, JOBS[job], index);
        }
        if (st == VDEV_OK && have_cluster && index >= C.n[job])
            st = vdev_error(VDEV_ERR_CONFIG, "VDEV_CLUSTER_CONFIG=%s: tasks: %s is not in the "
                                             "cluster, which has %d %s task%s",
                            C.path, name, C.n[job], JOBS[job], C.n[job] == 1 ? "" : "s");
        if (st == VDEV_OK)
            st = entry(tasks->u.object.values[i], name, job == C.job && index == C.index);
    }
    yajl_tree_free(root);
    if (st != VDEV_OK) {
        forget_locked();
        return st;
    }
    C.loaded = 1;
    return VDEV_OK;
}

enum vdev_status vdev_cluster_load(void)
{
    pthread_mutex_lock(&C.lock);
    enum vdev_status st = load_locked();
    pthread_mutex_unlock(&C.lock);
    return st;
}

void vdev_cluster_forget(void)
{
    pthread_mutex_lock(&C.lock);
    forget_locked();
    pthread_mutex_unlock(&C.lock);
}

/* ---- what the configuration reads ---- */

/* The key a variable stands for (*hidden: the variable is one an entry
 * hides), or -1. */
static int key_of(const char *var, int *hidden)
{
    *hidden = 0;
    for (int k = 0; k < K_COUNT; k++) {
        if (strcmp(var, KEYS[k].var) == 0)
            return k;
        if (KEYS[k].hides && strcmp(var, KEYS[k].hides) == 0) {
            *hidden = 1;
            return k;
        }
    }
    return -1;
}

const char *vdev_config_getenv(const char *var)
{
    int hidden;
    int k = key_of(var, &hidden);
    const char *v = NULL;
    pthread_mutex_lock(&C.lock);
    int mine = k >= 0 && C.loaded && C.set[k];
    if (mine && !hidden)
        v = C.value[k]; /* stays put until the next load, at the next discovery */
    pthread_mutex_unlock(&C.lock);
    return mine ? v : getenv(var);
}

const char *vdev_config_var_label(const char *var, char *buf, size_t cap)
{
    int hidden;
    int k = key_of(var, &hidden);
    pthread_mutex_lock(&C.lock);
    if (k >= 0 && !hidden && C.loaded && C.set[k])
        snprintf(buf, cap, "VDEV_CLUSTER_CONFIG=%s: %s: %s", C.path, C.from[k], KEYS[k].key);
    else
        snprintf(buf, cap, "%s", var);
    pthread_mutex_unlock(&C.lock);
    return buf;
}

void vdev_cluster_get(struct vdev_cluster_view *out)
{
    pthread_mutex_lock(&C.lock);
    out->job = C.loaded ? C.job : VDEV_JOB_LOCAL;
    out->index = C.loaded ? C.index : 0;
    for (int j = 0; j < VDEV_JOB_COUNT; j++)
        out->n[j] = C.loaded ? C.n[j] : 0;
    if (out->job < 0)
        snprintf(out->name, sizeof out->name, "/job:localhost/replica:0/task:0");
    else
        snprintf(out->name, sizeof out->name, "/job:%s/replica:0/task:%d", JOBS[out->job],
                 out->index);
    pthread_mutex_unlock(&C.lock);
}

const char *vdev_cluster_job_name(int job)
{
    return job >= 0 && job < VDEV_JOB_COUNT ? JOBS[job] : "localhost";
}

/* ---- the public query ---- */

VDEV_API enum vdev_status vdev_cluster_task(struct vdev_cluster_task *out)
{
    if (!out)
        return vdev_error(VDEV_ERR_INVALID_ARG, "vdev_cluster_task: out is NULL");
    enum vdev_status st = vdev_config_discover();
    if (st != VDEV_OK)
        return st;
    struct vdev_cluster_view v;
    vdev_cluster_get(&v);
    memset(out, 0, sizeof *out);
    vdev_strlcpy(out->type, vdev_cluster_job_name(v.job), sizeof out->type);
    out->index = v.index;
    vdev_strlcpy(out->name, v.name, sizeof out->name);
    out->num_chief = v.n[VDEV_JOB_CHIEF];
    out->num_workers = v.n[VDEV_JOB_WORKER];
    out->num_ps = v.n[VDEV_JOB_PS];
    out->is_chief = v.job == VDEV_JOB_CHIEF ||
                    (v.job == VDEV_JOB_WORKER && v.index == 0 && v.n[VDEV_JOB_CHIEF] == 0) ||
                    v.job == VDEV_JOB_LOCAL;
    return VDEV_OK;
}
