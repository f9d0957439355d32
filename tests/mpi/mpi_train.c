/* mpi_train.c — the program the MPI tests run (tests/mpi/mpi_tests.sh), one
 * copy per MPI process: the mirrored test model (tests/mirrored_model.h)
 * trained with the multi-worker mirrored strategy, or with the one-process
 * mirrored strategy for the reference, writing what the script compares
 * into files of an output folder:
 *   OUT/losses.<task>   the global loss of each step, "STEP HEXFLOAT DECIMAL"
 *   OUT/params.<task>   replica 0's parameters after the last step, one
 *                       hex float a line (every replica of the worker equal)
 *   OUT/alloc.<task>    with --alloc: "ok", or the status and message of an
 *                       allocation of that size on GPU:0
 *   OUT/event.<task>    with --kill-at/--hang-at: the wall-clock second the
 *                       process killed itself or stopped answering
 *   OUT/mismatch.<task> with --mismatch B: after the training, one more step
 *                       on a global batch of B rows on worker 1 and 48 on the
 *                       others, then one where worker 1 skips
 *                       vdev_replica_apply_gradients, then one where its
 *                       vdev_replica_all_reduce passes a tensor of another
 *                       shape, then with worker 1's batch proportions
 *                       3:1:1:1 and the others' even, then an all-reduce
 *                       with MEAN on worker 1, then one of an int32
 *                       tensor there, then a step where worker 1 returns
 *                       VDEV_ERR_INVALID_ARG with no message; then
 *                       vdev_strategy_reduce of [3,2] on worker 1 and [2,3]
 *                       on the others, and one with MEAN on worker 1: the
 *                       status and message of each, a line each
 * <task> is "reference", or the worker's task index.
 *
 * Options: --steps N (20), --replicas R (local devices GPU:0..R-1; 1),
 * --reference R (the one-process mirrored strategy over R GPUs), --out DIR,
 * --ckpt FILE --every N (the chief saves after every N steps), --resume
 * (every worker restores FILE and goes on from its step), --kill-at K and
 * --hang-at K (worker 1 kills itself with SIGKILL, or sleeps for a minute,
 * before step K), --exit-at K (worker 1 frees its strategy, shuts vdev down
 * and returns 3 from main before step K: a local error), --exit-in-step K
 * (worker 1 calls exit(4) inside step K's step function), --exit-status S
 * (the status of those two instead of 3 and 4; 0: a clean exit, as a worker
 * that ran fewer steps than the others makes), --fork-at K (worker 1 forks a
 * child before step K that calls exit(3), waits for it and goes on: the
 * child is no rank, so its exit must not end the job), --alloc BYTES,
 * --mismatch B,
 * --cases DIR (no training: for each file of
 * DIR, sorted, starts vdev with VDEV_CLUSTER_CONFIG=that file, or, for a
 * file named *.tfconfig, with TF_CONFIG set to its text and no cluster file
 * (rank r reads line r + 1 of a file of several lines), and when start-up
 * succeeds makes a multi-worker mirrored strategy on the default devices, or
 * for a *.ps.tfconfig a parameter-server strategy; writes OUT/cases.<launch rank> with one line per file:
 * its name and the status and message of start-up, or of the strategy),
 * --make-only (no training: makes a multi-worker mirrored strategy on the
 * default devices, start-up's failure included, and writes OUT/make.<launch
 * rank> with its status and message).
 * Exits 0 when everything it was asked did
 * happen, else prints "<task>: <what>: <message>" on stderr and exits 1.
 * Every exit that runs the exit handlers also checks, after vdev's own
 * handler (which finalises MPI on a clean exit), that vdev's MPI watchdog
 * thread is gone: if not, it prints "<task>: the MPI watchdog thread is
 * still running at exit" and exits 5. */
#define _GNU_SOURCE
#include "../mirrored_model.h"

#include <dirent.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *const names[MM_NV] = {"dense0/w", "dense0/b", "dense1/w", "dense1/b"};

struct opts {
    int steps, replicas, reference, every, resume, kill_at, hang_at, mismatch, make_only;
    int exit_at, exit_in_step, exit_status, fork_at;
    const char *out, *ckpt, *cases;
    uint64_t alloc;
};

static char task_id[32] = "reference";

static int die(const char *what)
{
    fprintf(stderr, "%s: %s: %s\n", task_id, what, vdev_last_error());
    return 1;
}

static FILE *out_file(const struct opts *o, const char *kind)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.%s", o->out, kind, task_id);
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "%s: cannot write %s\n", task_id, path);
        exit(1);
    }
    return f;
}

/* Registered before vdev starts MPI, so it runs after vdev's exit handler. */
static void check_watchdog_gone(void)
{
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return;
    int alive = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.')
            continue;
        char path[300], comm[64] = "";
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (f) {
            if (fgets(comm, sizeof comm, f) && !strcmp(comm, "vdev-mpi-watch\n"))
                alive = 1;
            fclose(f);
        }
    }
    closedir(d);
    if (alive) {
        fprintf(stderr, "%s: the MPI watchdog thread is still running at exit\n", task_id);
        _exit(5);
    }
}

static double wall_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int compare_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* --cases: start-up with each cluster file of the folder. */
static int run_cases(const struct opts *o)
{
    DIR *d = opendir(o->cases);
    if (!d)
        return fprintf(stderr, "cannot open %s\n", o->cases), 1;
    char *files[256];
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) && n < 256;)
        if (e->d_name[0] != '.')
            files[n++] = strdup(e->d_name);
    closedir(d);
    qsort(files, (size_t)n, sizeof *files, compare_names);
    const char *rank = getenv("OMPI_COMM_WORLD_RANK");
    snprintf(task_id, sizeof task_id, "%s", rank ? rank : "0");
    FILE *f = out_file(o, "cases");
    for (int i = 0; i < n; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", o->cases, files[i]);
        size_t len = strlen(files[i]);
        int ps = len > 12 && !strcmp(files[i] + len - 12, ".ps.tfconfig");
        if (len > 9 && !strcmp(files[i] + len - 9, ".tfconfig")) {
            char text[4096] = "";
            FILE *t = fopen(path, "r");
            /* line r + 1 for rank r where there are several, else the one */
            for (int line = 0; t && fgets(text, sizeof text, t); line++)
                if (line == atoi(task_id))
                    break;
            text[strcspn(text, "\n")] = 0;
            if (t)
                fclose(t);
            unsetenv("VDEV_CLUSTER_CONFIG");
            setenv("TF_CONFIG", text, 1);
        } else {
            unsetenv("TF_CONFIG");
            setenv("VDEV_CLUSTER_CONFIG", path, 1);
        }
        enum vdev_status st = vdev_init();
        vdev_strategy_t *s = NULL;
        vdev_ps_strategy_t *p = NULL;
        struct vdev_ps_options po = {.optimizer = VDEV_PS_SGD, .learning_rate = 0.1f};
        if (st == VDEV_OK)
            st = ps ? vdev_ps_strategy_new(&po, &p)
                    : vdev_multi_worker_mirrored_strategy_new(NULL, 0, &s);
        fprintf(f, "%s %s %s\n", files[i], vdev_status_str(st),
                st == VDEV_OK ? "" : vdev_last_error());
        vdev_ps_strategy_free(p);
        vdev_strategy_free(s);
        vdev_shutdown();
        free(files[i]);
    }
    fclose(f);
    return 0;
}

/* mm_step, but worker 1 leaves the process with status 4 inside the step
 * numbered exit_step (--exit-in-step). */
static int step_now = -1, exit_step = -1, worker_index = -1, exit_in_step_status = 4;

static enum vdev_status step_or_exit(vdev_replica_context_t *ctx, void *u)
{
    if (worker_index == 1 && step_now == exit_step)
        exit(exit_in_step_status);
    return mm_step(ctx, u);
}

/* --mismatch: worker 1 returns before vdev_replica_apply_gradients, which
 * the others make. */
static enum vdev_status step_skip_apply(vdev_replica_context_t *ctx, void *u)
{
    struct mm *m = u;
    if (worker_index != 1)
        return mm_step(ctx, u);
    vdev_tensor_t *x = vdev_replica_batch(ctx, m->x), *y = vdev_replica_batch(ctx, m->y);
    return x && y ? VDEV_OK : vdev_last_status();
}

/* --mismatch: an all-reduce of a [3] tensor on worker 1, of a [4] one on the
 * others. */
static enum vdev_status step_other_shape(vdev_replica_context_t *ctx, void *u)
{
    (void)u;
    int64_t shape[1] = {worker_index == 1 ? 3 : 4};
    vdev_tensor_t *t = vdev_tensor_ones(shape, 1, VDEV_F32), *sum = NULL;
    return t ? vdev_replica_all_reduce(ctx, VDEV_REDUCE_SUM, &t, 1, &sum) : vdev_last_status();
}

/* --mismatch: an all-reduce with MEAN on worker 1, SUM on the others. */
static enum vdev_status step_other_op(vdev_replica_context_t *ctx, void *u)
{
    (void)u;
    int64_t shape[1] = {4};
    vdev_tensor_t *t = vdev_tensor_ones(shape, 1, VDEV_F32), *sum = NULL;
    enum vdev_reduce_op op = worker_index == 1 ? VDEV_REDUCE_MEAN : VDEV_REDUCE_SUM;
    return t ? vdev_replica_all_reduce(ctx, op, &t, 1, &sum) : vdev_last_status();
}

/* --mismatch: an all-reduce of an int32 tensor on worker 1, of a float one
 * on the others. */
static enum vdev_status step_other_dtype(vdev_replica_context_t *ctx, void *u)
{
    (void)u;
    int64_t shape[1] = {4};
    vdev_tensor_t *t = vdev_tensor_ones(shape, 1, worker_index == 1 ? VDEV_I32 : VDEV_F32);
    vdev_tensor_t *sum = NULL;
    return t ? vdev_replica_all_reduce(ctx, VDEV_REDUCE_SUM, &t, 1, &sum) : vdev_last_status();
}

/* --mismatch: worker 1's step returns an error code and sets no message. */
static enum vdev_status step_bare_code(vdev_replica_context_t *ctx, void *u)
{
    (void)ctx;
    (void)u;
    return worker_index == 1 ? VDEV_ERR_INVALID_ARG : VDEV_OK;
}

/* --mismatch: vdev_strategy_reduce of ones of shape [2,3] on worker 0 and
 * [3,2] on worker 1 (same element count) with op, or of [2] with SUM on
 * worker 0 and MEAN on worker 1; "status message" into f. */
static void reduce_case(vdev_strategy_t *s, int other_op, FILE *f)
{
    vdev_tensor_t *v[MM_MAX_REPLICAS];
    int local = vdev_strategy_num_local_replicas(s);
    int64_t shape[2] = {worker_index == 1 && !other_op ? 3 : 2, worker_index == 1 ? 2 : 3};
    for (int i = 0; i < local; i++)
        v[i] = vdev_tensor_ones(shape, other_op ? 1 : 2, VDEV_F32);
    enum vdev_reduce_op op = other_op && worker_index == 1 ? VDEV_REDUCE_MEAN : VDEV_REDUCE_SUM;
    vdev_tensor_t *r = vdev_strategy_reduce(s, op, v);
    enum vdev_status st = r ? VDEV_OK : vdev_last_status();
    fprintf(f, "%s %s\n", vdev_status_str(st), r ? "" : vdev_last_error());
    vdev_tensor_free(r);
    for (int i = 0; i < local; i++)
        vdev_tensor_free(v[i]);
}

/* --make-only: no training, no start-up of its own; makes a multi-worker
 * mirrored strategy on the default devices (whether or not start-up
 * succeeds: it starts vdev) and writes OUT/make.<launch rank> with its
 * status and message. */
static int make_only(const struct opts *o)
{
    const char *rank = getenv("OMPI_COMM_WORLD_RANK");
    snprintf(task_id, sizeof task_id, "%s", rank ? rank : "0");
    vdev_strategy_t *s = NULL;
    enum vdev_status st = vdev_multi_worker_mirrored_strategy_new(NULL, 0, &s);
    FILE *f = out_file(o, "make");
    fprintf(f, "%s %s\n", vdev_status_str(st), st == VDEV_OK ? "" : vdev_last_error());
    fclose(f);
    vdev_strategy_free(s);
    vdev_shutdown();
    return 0;
}

/* The sum of the replicas' losses, read on the host. */
static float global_loss(vdev_strategy_t *s, vdev_tensor_t **losses)
{
    vdev_tensor_t *t = vdev_strategy_reduce(s, VDEV_REDUCE_SUM, losses);
    float l = t ? vdev_tensor_item(t) : NAN;
    vdev_tensor_free(t);
    for (int i = 0; i < vdev_strategy_num_local_replicas(s); i++)
        vdev_tensor_free(losses[i]);
    return l;
}

static int train(const struct opts *o)
{
    struct vdev_cluster_task task;
    int chief = 1;
    const char *devs[MM_MAX_REPLICAS] = {"GPU:0", "GPU:1", "GPU:2", "GPU:3",
                                         "GPU:4", "GPU:5", "GPU:6", "GPU:7"};
    vdev_strategy_t *s;
    if (o->reference) {
        if (vdev_mirrored_strategy_new(devs, o->reference, &s) != VDEV_OK)
            return die("making the strategy");
    } else {
        if (vdev_cluster_task(&task) != VDEV_OK)
            return die("reading the cluster");
        snprintf(task_id, sizeof task_id, "%d", task.index);
        chief = task.is_chief;
        worker_index = task.index;
        if (vdev_multi_worker_mirrored_strategy_new(devs, o->replicas, &s) != VDEV_OK)
            return die("making the strategy");
    }
    struct mm m = {.seed = 11, .lr = 0.1f};
    if (vdev_strategy_run(s, mm_build, &m, NULL) != VDEV_OK)
        return die("building the model");
    int first = -1, local = vdev_strategy_num_local_replicas(s);
    for (int r = 0; r < MM_MAX_REPLICAS && first < 0; r++)
        if (m.vars[r][0])
            first = r;
    int start = 0;
    if (o->resume) {
        char buf[32];
        const char *nm[MM_MAX_REPLICAS * MM_NV];
        vdev_tensor_t *t[MM_MAX_REPLICAS * MM_NV];
        for (int r = 0; r < local; r++)
            for (int i = 0; i < MM_NV; i++) {
                nm[r * MM_NV + i] = names[i];
                t[r * MM_NV + i] = m.vars[first + r][i];
            }
        if (vdev_checkpoint_metadata(o->ckpt, "step", buf, sizeof buf) != VDEV_OK ||
            vdev_checkpoint_load(o->ckpt, nm, t, local * MM_NV) != VDEV_OK)
            return die("restoring the checkpoint");
        start = atoi(buf);
    }
    FILE *lf = out_file(o, "losses");
    for (int k = start; k < o->steps; k++) {
        if (!o->reference && task.index == 1 && (k == o->kill_at || k == o->hang_at)) {
            FILE *ef = out_file(o, "event");
            fprintf(ef, "%.3f\n", wall_seconds());
            fclose(ef);
            if (k == o->kill_at)
                raise(SIGKILL);
            sleep(60);
        }
        if (!o->reference && task.index == 1 && k == o->fork_at) {
            fflush(NULL);
            pid_t pid = fork();
            if (pid == 0)
                exit(3); /* the exit handlers run */
            int status = 0;
            if (pid < 0 || waitpid(pid, &status, 0) != pid)
                return die("forking a child");
            fprintf(stderr, "%s: the child forked before step %d exited with status %d\n",
                    task_id, k, WIFEXITED(status) ? WEXITSTATUS(status) : -1);
        }
        if (!o->reference && task.index == 1 && k == o->exit_at) {
            int code = o->exit_status >= 0 ? o->exit_status : 3;
            fprintf(stderr, "%s: leaving before step %d with status %d\n", task_id, k, code);
            mm_free(&m, MM_MAX_REPLICAS);
            vdev_strategy_free(s);
            vdev_shutdown();
            return code;
        }
        step_now = k;
        mm_batch(&m, 48, (uint64_t)k);
        vdev_tensor_t *losses[MM_MAX_REPLICAS];
        if (vdev_strategy_run(s, step_or_exit, &m, losses) != VDEV_OK) {
            char what[32];
            snprintf(what, sizeof what, "step %d", k);
            return die(what);
        }
        float l = global_loss(s, losses);
        if (isnan(l))
            return die("reducing the loss");
        fprintf(lf, "%d %a %.9g\n", k, (double)l, (double)l);
        fflush(lf);
        if (o->ckpt && o->every > 0 && (k + 1) % o->every == 0 && chief) {
            char step[16];
            snprintf(step, sizeof step, "%d", k + 1);
            const char *meta[2] = {"step", step};
            if (vdev_checkpoint_save(o->ckpt, names, m.vars[first], MM_NV, meta, 1) != VDEV_OK)
                return die("saving the checkpoint");
        }
    }
    fclose(lf);
    /* every local replica holds the same bits; write the first one's */
    float p[MM_PARAMS], q[MM_PARAMS];
    mm_read(m.vars[first], p);
    for (int r = 1; r < local; r++) {
        mm_read(m.vars[first + r], q);
        if (memcmp(p, q, sizeof p) != 0)
            return fprintf(stderr, "%s: replica %d differs from replica %d\n", task_id,
                           first + r, first),
                   1;
    }
    FILE *pf = out_file(o, "params");
    for (int i = 0; i < MM_PARAMS; i++)
        fprintf(pf, "%a\n", (double)p[i]);
    fclose(pf);
    if (o->alloc) {
        FILE *af = out_file(o, "alloc");
        int64_t shape[1] = {(int64_t)(o->alloc / 4)};
        vdev_device_push("GPU:0");
        vdev_tensor_t *t = vdev_tensor_zeros(shape, 1, VDEV_F32);
        vdev_device_pop();
        if (t)
            fprintf(af, "ok\n");
        else
            fprintf(af, "%s %s\n", vdev_status_str(vdev_last_status()), vdev_last_error());
        vdev_tensor_free(t);
        fclose(af);
    }
    if (o->mismatch && !o->reference) { /* workers whose global batches differ: every one fails the run */
        FILE *mf = out_file(o, "mismatch");
        vdev_tensor_t *losses[MM_MAX_REPLICAS];
        vdev_replica_fn fns[3] = {mm_step, step_skip_apply, step_other_shape};
        mm_batch(&m, task.index == 1 ? o->mismatch : 48, 99);
        for (int i = 0; i < 3; i++) {
            enum vdev_status st = vdev_strategy_run(s, fns[i], &m, losses);
            fprintf(mf, "%s %s\n", vdev_status_str(st), st == VDEV_OK ? "" : vdev_last_error());
            if (st == VDEV_OK)
                global_loss(s, losses);
            if (i == 0)
                mm_batch(&m, 48, 99);
        }
        /* worker 1 splits the batch 3:1:1:1, the others evenly: its
         * replicas' rows would leave rows 24-31 to no replica */
        double even[4] = {1, 1, 1, 1}, other[4] = {3, 1, 1, 1};
        if (vdev_strategy_set_batch_proportions(s, task.index == 1 ? other : even,
                                                vdev_strategy_num_replicas_in_sync(s)) != VDEV_OK)
            return die("the batch proportions");
        vdev_replica_fn more[4] = {mm_step, step_other_op, step_other_dtype, step_bare_code};
        for (int i = 0; i < 4; i++) {
            enum vdev_status st = vdev_strategy_run(s, more[i], &m, losses);
            fprintf(mf, "%s %s\n", vdev_status_str(st), st == VDEV_OK ? "" : vdev_last_error());
            if (st == VDEV_OK && i == 0)
                global_loss(s, losses);
            if (i == 0 && vdev_strategy_set_batch_proportions(s, NULL, 0) != VDEV_OK)
                return die("the batch proportions");
        }
        reduce_case(s, 0, mf);
        reduce_case(s, 1, mf);
        fclose(mf);
    }
    mm_free(&m, MM_MAX_REPLICAS);
    vdev_strategy_free(s);
    vdev_shutdown();
    return 0;
}

int main(int argc, char **argv)
{
    struct opts o = {.steps = 20, .replicas = 1, .kill_at = -1, .hang_at = -1, .exit_at = -1,
                     .exit_in_step = -1, .exit_status = -1, .fork_at = -1, .out = "."};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int takes = 1;
        if (!strcmp(a, "--steps") && v)
            o.steps = atoi(v);
        else if (!strcmp(a, "--replicas") && v)
            o.replicas = atoi(v);
        else if (!strcmp(a, "--reference") && v)
            o.reference = atoi(v);
        else if (!strcmp(a, "--out") && v)
            o.out = v;
        else if (!strcmp(a, "--ckpt") && v)
            o.ckpt = v;
        else if (!strcmp(a, "--every") && v)
            o.every = atoi(v);
        else if (!strcmp(a, "--kill-at") && v)
            o.kill_at = atoi(v);
        else if (!strcmp(a, "--hang-at") && v)
            o.hang_at = atoi(v);
        else if (!strcmp(a, "--exit-at") && v)
            o.exit_at = atoi(v);
        else if (!strcmp(a, "--exit-in-step") && v)
            o.exit_in_step = atoi(v);
        else if (!strcmp(a, "--fork-at") && v)
            o.fork_at = atoi(v);
        else if (!strcmp(a, "--exit-status") && v)
            o.exit_status = atoi(v);
        else if (!strcmp(a, "--alloc") && v)
            o.alloc = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--mismatch") && v)
            o.mismatch = atoi(v);
        else if (!strcmp(a, "--cases") && v)
            o.cases = v;
        else if (!strcmp(a, "--resume"))
            o.resume = 1, takes = 0;
        else if (!strcmp(a, "--make-only"))
            o.make_only = 1, takes = 0;
        else
            return fprintf(stderr, "mpi_train: bad option %s\n", a), 2;
        i += takes;
    }
    if (atexit(check_watchdog_gone) != 0)
        return fprintf(stderr, "mpi_train: atexit failed\n"), 2;
    exit_step = o.exit_in_step;
    if (o.exit_status >= 0)
        exit_in_step_status = o.exit_status;
    if (o.make_only)
        return make_only(&o);
    return o.cases ? run_cases(&o) : train(&o);
}
