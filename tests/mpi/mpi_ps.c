/* mpi_ps.c — the program the parameter-server test runs
 * (tests/mpi/mpi_tests.sh ps), one copy per MPI process: the mirrored test
 * model (tests/mirrored_model.h, an MLP regression with SGD) trained with
 * the parameter-server strategy. The chief schedules one step per batch,
 * joins, and writes into the output folder:
 *   OUT/chief.txt      "first_loss X", "last_loss X" (the means of the
 *                      first and the last five steps' losses), "balance X"
 *                      (vdev_ps_balance), "bytes B0 B1 ..." (each server's)
 *   OUT/params.chief   the servers' values after the last step (vdev_ps_pull),
 *                      one hex float a line
 * With --reference, one process trains the same model on the same batches
 * on GPU:0 (no MPI) and writes OUT/params.reference, which staleness 0 must
 * equal bit for bit.
 *
 * With --errors, every process also checks the calls' errors (exact codes
 * and messages): options one process gets wrong fail vdev_ps_strategy_new on
 * every process, naming that process; variables that differ on one process
 * fail add_variables with one text on every process; a worker cannot
 * schedule; a step cannot push twice; a step that fails is reported by join
 * (or by a later schedule, which then schedules nothing) and by fetch,
 * naming the step and the worker, and the join or schedule that reported it
 * clears it, as in TensorFlow; the chief cannot serve; unknown steps and
 * servers; a worker context used outside its step; a child the chief forks
 * gets the fork error from every call, and its free and exit leave the job
 * alone.
 *
 * Options: --out DIR, --steps N (20), --staleness K (-1: unbounded),
 * --reference, --errors. Exits 0 when everything went, else prints
 * "<task>: <what>: <message>" on stderr and exits 1. */
#define _GNU_SOURCE
#include "../mirrored_model.h"

#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#define ROWS 48

static char task_id[64] = "reference";
static int check_errors;

static int die(const char *what)
{
    fprintf(stderr, "%s: %s: %s\n", task_id, what, vdev_last_error());
    return 1;
}

static FILE *out_file(const char *out, const char *name)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", out, name);
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "%s: cannot write %s\n", task_id, path);
        exit(1);
    }
    return f;
}

static void write_params(const char *out, const char *name, vdev_tensor_t *const *vars)
{
    float p[MM_PARAMS];
    mm_read(vars, p);
    FILE *f = out_file(out, name);
    for (int i = 0; i < MM_PARAMS; i++)
        fprintf(f, "%a\n", (double)p[i]);
    fclose(f);
}

/* A worker's model: its copies of the variables, which pulls fill. */
struct worker {
    struct mm m;
    vdev_mlp_t *mlp;
    vdev_tensor_t *vars[MM_NV];
};

/* The step function: the gradients of the mean loss over batch `step`. */
static enum vdev_status step_fn(vdev_ps_worker_t *w, int64_t step, void *user)
{
    struct worker *k = user;
    if (step < 0) /* a step that fails, pushing nothing: a device it lacks */
        return vdev_device_push("GPU:7");
    mm_batch(&k->m, ROWS, (uint64_t)step);
    vdev_tensor_t *x = vdev_identity(k->m.x), *y = vdev_identity(k->m.y);
    vdev_tape_t *tape = vdev_tape_begin();
    vdev_tensor_t *loss =
        vdev_div(vdev_sum_all(mm_per_example(k->mlp, x, y)),
                 vdev_tensor_fill(NULL, 0, VDEV_F32, (double)ROWS));
    vdev_tensor_t *grads[MM_NV];
    enum vdev_status st = loss ? vdev_tape_gradient(tape, loss, k->vars, MM_NV, grads)
                               : vdev_last_status();
    vdev_tape_end(tape);
    if (st == VDEV_OK && check_errors && step == 0) {
        /* as many elements, another shape: refused, nothing pushed */
        vdev_tensor_t *flat[MM_NV];
        memcpy(flat, grads, sizeof flat);
        int64_t n0[1] = {vdev_tensor_numel(grads[0])};
        flat[0] = vdev_reshape(grads[0], n0, 1);
        CHECK_STATUS(vdev_ps_worker_push(w, flat, MM_NV), VDEV_ERR_SHAPE);
        CHECK_MSG("vdev_ps_worker_push: gradient #0 has shape [");
        CHECK_MSG("]; its variable has shape [");
    }
    if (st == VDEV_OK)
        st = vdev_ps_worker_push(w, grads, MM_NV);
    if (st == VDEV_OK && check_errors && step == 0)
        CHECK_ERR(vdev_ps_worker_push(w, grads, MM_NV), VDEV_ERR_INVALID_ARG,
                  "vdev_ps_worker_push: this step pushed its gradients already");
    if (st == VDEV_OK)
        st = vdev_ps_worker_return(w, vdev_tensor_item(loss));
    vdev_tensor_free(k->m.x); /* made inside the step's scope: free them here */
    vdev_tensor_free(k->m.y);
    k->m.x = k->m.y = NULL;
    return st;
}

/* A child the chief forks has none of the strategy's threads and no MPI: its
 * calls are the fork error (naming the call), freeing the strategy there only
 * drops the handle, and its exit leaves the job alone. Returns the child's
 * exit status (0: as it should be), -1 when it died of a signal. */
static int forked_child_refuses(vdev_ps_strategy_t *s)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        alarm(30); /* a hang is a failure, not a stuck job */
        static const char *const fns[2] = {"vdev_ps_schedule", "vdev_ps_join"};
        int64_t id;
        for (int i = 0; i < 2; i++) {
            enum vdev_status st = i ? vdev_ps_join(s) : vdev_ps_schedule(s, 0, &id);
            char want[96];
            snprintf(want, sizeof want, "%s: vdev was started in process %ld, from which", fns[i],
                     (long)getppid());
            if (st != VDEV_ERR_UNSUPPORTED || strncmp(vdev_last_error(), want, strlen(want))) {
                printf("%s: forked child: %s gave %s \"%s\"\n", task_id, fns[i],
                       vdev_status_str(st), vdev_last_error());
                exit(3);
            }
        }
        vdev_ps_strategy_free(s);
        exit(0);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid)
        return -1;
    return check_child_status(status);
}

static int reference(const char *out, int steps)
{
    struct mm m = {.seed = 11, .lr = 0.1f};
    vdev_mlp_t *mlp = NULL;
    vdev_optimizer_t *opt = NULL;
    vdev_tensor_t *vars[MM_NV];
    for (int k = 0; k < steps; k++) {
        mm_batch(&m, ROWS, (uint64_t)k);
        mm_single_step("GPU:0", &m, &mlp, &opt, vars);
    }
    write_params(out, "params.reference", vars);
    vdev_mlp_free(mlp);
    vdev_optimizer_free(opt);
    mm_free(&m, 0);
    vdev_shutdown();
    return 0;
}

int main(int argc, char **argv)
{
    const char *out = ".";
    int steps = 20, staleness = -1, ref = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--out") && v)
            out = argv[++i];
        else if (!strcmp(a, "--steps") && v)
            steps = atoi(argv[++i]);
        else if (!strcmp(a, "--staleness") && v)
            staleness = atoi(argv[++i]);
        else if (!strcmp(a, "--reference"))
            ref = 1;
        else if (!strcmp(a, "--errors"))
            check_errors = 1;
        else
            return fprintf(stderr, "mpi_ps: bad option %s\n", a), 2;
    }
    if (ref)
        return reference(out, steps);

    struct vdev_cluster_task task;
    if (vdev_cluster_task(&task) != VDEV_OK)
        return die("reading the cluster");
    snprintf(task_id, sizeof task_id, "%s", task.name);
    struct vdev_ps_options o = {.optimizer = VDEV_PS_SGD, .learning_rate = 0.1f,
                                .max_staleness = staleness};
    vdev_ps_strategy_t *s;
    if (check_errors) { /* worker 1 alone passes a bad learning rate */
        struct vdev_ps_options bad = o;
        if (!strcmp(task.type, "worker") && task.index == 1)
            bad.learning_rate = -0.5f; /* 0 is taken, as vdev_sgd_new takes it */
        CHECK_ERR(vdev_ps_strategy_new(&bad, &s), VDEV_ERR_INVALID_ARG,
                  "/job:worker/replica:0/task:1: vdev_ps_strategy_new: learning_rate -0.5 "
                  "(expected >= 0)");
        CHECK(s == NULL);
        bad = o; /* momentum 1 is SGD's limit (Keras's and vdev_sgd_new's); above it, not */
        if (!strcmp(task.type, "worker") && task.index == 1)
            bad.momentum = 1.5f;
        CHECK_ERR(vdev_ps_strategy_new(&bad, &s), VDEV_ERR_INVALID_ARG,
                  "/job:worker/replica:0/task:1: vdev_ps_strategy_new: momentum 1.5 (expected 0 "
                  "<= momentum <= 1, as vdev_sgd_new)");
        CHECK(s == NULL);
    }
    if (vdev_ps_strategy_new(&o, &s) != VDEV_OK)
        return die("making the strategy");
    struct worker k = {.m = {.seed = 11, .lr = 0.1f}};
    /* every process builds the model on its default device: the chief's
     * values are the initial ones, a worker's copies receive the pulls */
    k.mlp = vdev_mlp_new(mm_sizes, 3, VDEV_ACT_RELU, VDEV_ACT_NONE, k.m.seed);
    if (!k.mlp)
        return die("building the model");
    vdev_mlp_variables(k.mlp, k.vars, MM_NV);
    if (check_errors) { /* worker 1 alone passes 3 of the 4: every process says the same */
        int n = !strcmp(task.type, "worker") && task.index == 1 ? MM_NV - 1 : MM_NV;
        CHECK_ERR(vdev_ps_strategy_add_variables(s, k.vars, n), VDEV_ERR_INVALID_ARG,
                  "vdev_ps_strategy_add_variables: /job:worker/replica:0/task:1 passed 3 "
                  "variables of 208 elements, /job:chief/replica:0/task:0 4 of 212, or of other "
                  "shapes; every process passes the same variables");
    }
    if (vdev_ps_strategy_add_variables(s, k.vars, MM_NV) != VDEV_OK)
        return die("adding the variables");
    int rc = 0;
    if (!strcmp(task.type, "chief")) {
        int64_t *ids = malloc((size_t)steps * sizeof *ids);
        if (!ids)
            return fprintf(stderr, "out of memory\n"), 1;
        for (int i = 0; i < steps && rc == 0; i++)
            if (vdev_ps_schedule(s, i, &ids[i]) != VDEV_OK)
                rc = die("scheduling");
        if (rc == 0 && vdev_ps_join(s) != VDEV_OK)
            rc = die("joining");
        double first = 0, last = 0;
        for (int i = 0; i < steps && rc == 0; i++) {
            float l;
            if (vdev_ps_fetch(s, ids[i], &l) != VDEV_OK)
                rc = die("fetching a loss");
            first += i < 5 ? l / 5.0 : 0;
            last += i >= steps - 5 ? l / 5.0 : 0;
        }
        free(ids);
        if (rc == 0 && vdev_ps_pull(s) != VDEV_OK)
            rc = die("pulling the values");
        if (rc == 0) {
            FILE *f = out_file(out, "chief.txt");
            fprintf(f, "first_loss %.9g\nlast_loss %.9g\nbalance %.6f\nbytes", first, last,
                    vdev_ps_balance(s));
            for (int i = 0; i < task.num_ps; i++) {
                struct vdev_ps_shard_info info;
                if (vdev_ps_shard_info(s, i, &info) != VDEV_OK)
                    rc = die("reading a server's share");
                fprintf(f, " %llu", (unsigned long long)info.bytes);
            }
            fprintf(f, "\n");
            fclose(f);
            write_params(out, "params.chief", k.vars);
        }
        if (rc == 0 && check_errors) {
            float l;
            int64_t id;
            CHECK_ERR(vdev_ps_fetch(s, 9999, &l), VDEV_ERR_NOT_FOUND,
                      "vdev_ps_fetch: step 9999 is not scheduled");
            CHECK_ERR(vdev_ps_strategy_serve(s, step_fn, &k), VDEV_ERR_INVALID_ARG,
                      "vdev_ps_strategy_serve: the chief schedules steps; workers and ps tasks "
                      "serve");
            struct vdev_ps_shard_info info;
            CHECK_ERR(vdev_ps_shard_info(s, task.num_ps, &info), VDEV_ERR_INVALID_ARG,
                      "vdev_ps_shard_info: no such server");
            CHECK_ERR(vdev_ps_worker_push(NULL, k.vars, MM_NV), VDEV_ERR_INVALID_ARG,
                      "vdev_ps_worker_push: the worker context is NULL");
            /* a failing step: every worker is idle, so worker 0 runs it */
            CHECK_OK(vdev_ps_schedule(s, -1, &id));
            CHECK_EQ_U64(id, steps);
            char want[256];
            snprintf(want, sizeof want, "step %d (argument -1) on /job:worker/replica:0/task:0: "
                                        "/job:worker/replica:0/task:0/device:GPU:7 unknown device "
                                        "(there is 1 logical GPU)", steps);
            CHECK_ERR(vdev_ps_join(s), VDEV_ERR_NOT_FOUND, want);
            CHECK_ERR(vdev_ps_fetch(s, id, &l), VDEV_ERR_NOT_FOUND, want);
            /* the servers counted it: the next step runs, and the join that
             * raised the error cleared it (TensorFlow's join) */
            CHECK_OK(vdev_ps_schedule(s, 0, &id));
            CHECK_OK(vdev_ps_join(s));
            CHECK_OK(vdev_ps_fetch(s, id, &l));
            CHECK(l > 0);
            /* a schedule raises a failed step's error too, schedules nothing,
             * and clears it: once every worker is busy, each schedule waits for
             * a step to end, so the failed one's report comes within a few */
            int64_t bad;
            CHECK_OK(vdev_ps_schedule(s, -1, &bad));
            enum vdev_status st = VDEV_OK;
            for (int i = 1; i <= 8 && st == VDEV_OK; i++)
                st = vdev_ps_schedule(s, i, &id);
            snprintf(want, sizeof want, "step %lld (argument -1) on /job:worker/replica:0/task:0: "
                                        "/job:worker/replica:0/task:0/device:GPU:7 unknown device "
                                        "(there is 1 logical GPU)", (long long)bad);
            CHECK_ERR(st, VDEV_ERR_NOT_FOUND, want);
            CHECK_EQ_U64(id, (uint64_t)-1);
            CHECK_OK(vdev_ps_join(s));
            CHECK(forked_child_refuses(s) == 0);
        }
    } else {
        if (check_errors) {
            int64_t id;
            char want[160];
            snprintf(want, sizeof want, "vdev_ps_schedule: only the chief schedules steps (this is "
                                        "%s)", task.name);
            CHECK_ERR(vdev_ps_schedule(s, 0, &id), VDEV_ERR_INVALID_ARG, want);
        }
        if (vdev_ps_strategy_serve(s, step_fn, &k) != VDEV_OK)
            rc = die("serving");
    }
    vdev_ps_strategy_free(s);
    vdev_mlp_free(k.mlp);
    mm_free(&k.m, 0);
    vdev_shutdown();
    if (check_errors && check_failed)
        fprintf(stderr, "%s: %d checks of errors failed\n", task_id, check_failed);
    return rc || check_failed;
}
