/* ps.c — tf.distribute.ParameterServerStrategy and its ClusterCoordinator
 * (vdev/multiworker.h): making the strategy across the job's processes,
 * partitioning the variables over the servers, and the chief's calls
 * (schedule, join, fetch, pull). The servers' and workers' loops are in
 * ps_serve.c; ps.h says how the processes talk.
 *
 * Collective calls (making the strategy, add_variables) end with an
 * exchange of one record per process through the MPI plugin, polled against
 * VDEV_MPI_TIMEOUT: a process's own failure (a bad option, a device it
 * lacks, variables of other shapes) fails the call on every process, named
 * by its task, and a process that never comes is named in the timeout.
 *
 * The chief hands each step to an idle worker (the lowest index first) and
 * keeps one record per step: which worker runs it, and how it went. A step
 * that fails on its worker fails nothing else: join reports it (the first
 * failed step's message) once every step has ended. */
#define _GNU_SOURCE
#include "dist/ps.h"

#include <math.h>
#include <string.h>

static struct vdev_handle_table strategies =
    VDEV_HANDLE_TABLE("parameter-server strategy", 11, struct vdev_ps *);

struct ps_rec {                 /* one process's part of an exchange */
    int32_t job, index, status, pad;
    int32_t n_tasks[VDEV_JOB_COUNT], pad2; /* making one: the cluster as this process reads it */
    int64_t n, total;           /* add_variables: variables, elements */
    uint64_t digest;            /* add_variables: their shapes */
    char task[64];
    char why[PS_MSG];
};

struct vdev_ps *vdev_ps_of(const vdev_ps_strategy_t *h, const char *fn)
{
    struct vdev_ps **p = vdev_handle_get(&strategies, h);
    if (!p) {
        vdev_error(VDEV_ERR_INVALID_ARG, h ? "%s: not a live parameter-server strategy (freed "
                                             "already, or not one)"
                                           : "%s: strategy is NULL",
                   fn);
        return NULL;
    }
    if (vdev_runtime_refuse_forked(fn)) /* the parent's: its threads and MPI stayed there */
        return NULL;
    if ((*p)->rgen != vdev_runtime_generation() || !vdev_is_initialized()) {
        vdev_error(VDEV_ERR_INVALID_ARG, "%s: the strategy belongs to a runtime that was shut "
                                         "down (made before vdev_shutdown)",
                   fn);
        return NULL;
    }
    return *p;
}

enum vdev_status vdev_ps_mpi_failed(struct vdev_ps *ps, const char *what)
{
    char msg[PS_MSG + 200];
    snprintf(msg, sizeof msg, "%s (%s): %s", what, ps->task[ps->me], vdev_last_error());
    ps->spent = 1;
    vdev_mpi_world_fail(msg);
    return vdev_error(VDEV_ERR_BACKEND, "%s", msg);
}

/* Every process's record; on success every record is in all[]. A failed
 * record (the lowest rank's first) is every process's error. */
static enum vdev_status agree(struct vdev_ps *ps, int tag, struct ps_rec *mine,
                              struct ps_rec *all, const char *what)
{
    unsigned char *arrived = vdev_calloc((size_t)ps->n_procs, 1);
    if (!arrived)
        return vdev_error(VDEV_ERR_OOM, "%s: out of host memory", what);
    uint64_t t = vdev_mpi_timeout_ns();
    enum vdev_status st = vdev_mpi_exchange(ps->mpi, tag, mine, all, sizeof *mine,
                                            vdev_now_ns() + t, arrived);
    if (st != VDEV_OK) {
        char who[256] = "", gone[256] = "";
        size_t k = 0, kg = 0;
        for (int p = 0; p < ps->n_procs; p++) {
            const char *name = ps->task[p][0] ? ps->task[p] : "?";
            if (arrived[p] == 2 && kg < sizeof gone - 1)
                kg += (size_t)snprintf(gone + kg, sizeof gone - kg, "%s%s", kg ? ", " : "", name);
            else if (!arrived[p] && k < sizeof who - 1)
                k += (size_t)snprintf(who + k, sizeof who - k, "%s%s", k ? ", " : "", name);
        }
        free(arrived);
        ps->spent = 1;
        char msg[600];
        if (gone[0])
            snprintf(msg, sizeof msg, "%s on %s waits for %s, which ended its process cleanly "
                                      "(exit status 0) without making this call",
                     what, mine->task, gone);
        else
            snprintf(msg, sizeof msg, "%s on %s waited %g s (VDEV_MPI_TIMEOUT) for %s, which "
                                      "did not make this call",
                     what, mine->task, (double)t / 1e9, who[0] ? who : "a process");
        vdev_mpi_world_fail(msg);
        return vdev_error(VDEV_ERR_BACKEND, "%s", msg);
    }
    free(arrived);
    for (int p = 0; p < ps->n_procs; p++)
        if (all[p].status != VDEV_OK)
            return vdev_error((enum vdev_status)all[p].status, "%s: %s", all[p].task, all[p].why);
    return VDEV_OK;
}

static enum vdev_status join_steps(struct vdev_ps *ps, const char *fn);

/* ---- making and freeing ---- */

static void ps_destroy(struct vdev_ps *ps)
{
    if (!ps)
        return;
    for (int i = 0; ps->shard_vars && i < ps->n_shards_of[ps->index]; i++)
        vdev_tensor_free(ps->shard_vars[i]);
    vdev_optimizer_free(ps->opt);
    vdev_mpi_comm_free(ps->mpi, ps->spent);
    free(ps->shard_vars);
    free(ps->worker_rank);
    free(ps->ps_rank);
    free(ps->task);
    free(ps->vars);
    free(ps->numel);
    free(ps->shards);
    free(ps->first_shard);
    free(ps->n_shards_of);
    free(ps->elems_of);
    free(ps->buf);
    free(ps->done_above);
    free(ps->wait_src);
    free(ps->wait_seq);
    free(ps->wait_need);
    free(ps->steps);
    free(ps->busy);
    free(ps);
}

/* This process's own problem with the options (VDEV_OK: none). */
static enum vdev_status check_options(const struct vdev_ps_options *o, const char *fn)
{
    if (!o)
        return vdev_error(VDEV_ERR_INVALID_ARG, "%s: opts is NULL", fn);
    if ((unsigned)o->optimizer >= VDEV_PS_OPTIMIZER_COUNT)
        return vdev_error(VDEV_ERR_INVALID_ARG, "%s: unknown optimizer %d", fn, (int)o->optimizer);
    if (!(o->learning_rate >= 0) || !isfinite(o->learning_rate)) /* 0: as vdev_sgd_new */
        return vdev_error(VDEV_ERR_INVALID_ARG, "%s: learning_rate %g (expected >= 0)", fn,
                          (double)o->learning_rate);
    if (!(o->momentum >= 0 && o->momentum <= 1))
        return vdev_error(VDEV_ERR_INVALID_ARG,
                          "%s: momentum %g (expected 0 <= momentum <= 1, as vdev_sgd_new)", fn,
                          (double)o->momentum);
    if (o->max_staleness < -1)
        return vdev_error(VDEV_ERR_INVALID_ARG, "%s: max_staleness %d (expected -1 or >= 0)", fn,
                          o->max_staleness);
    return VDEV_OK;
}

VDEV_API enum vdev_status vdev_ps_strategy_new(const struct vdev_ps_options *opts,
                                               vdev_ps_strategy_t **out)
{
    const char *fn = "vdev_ps_strategy_new";
    if (!out)
        return vdev_error(VDEV_ERR_INVALID_ARG, "%s: out is NULL", fn);
    *out = NULL;
    struct vdev_ps *ps = vdev_calloc(1, sizeof *ps);
    if (!ps)
        return vdev_error(VDEV_ERR_OOM, "%s: out of host memory", fn);
    ps->first_error = -1;
    struct ps_rec mine;
    memset(&mine, 0, sizeof mine);
    enum vdev_status st = check_options(opts, fn);
    if (st == VDEV_OK)
        st = vdev_init();
    struct vdev_cluster_view cv;
    vdev_cluster_get(&cv);
    vdev_strlcpy(mine.task, cv.name, sizeof mine.task);
    if (st == VDEV_OK) {
        ps->o = *opts;
        ps->job = cv.job;
        ps->index = cv.index;
        if (cv.job < 0 || cv.n[VDEV_JOB_CHIEF] != 1 || cv.n[VDEV_JOB_WORKER] < 1 ||
            cv.n[VDEV_JOB_PS] < 1)
            st = vdev_error(VDEV_ERR_CONFIG,
                            "%s: a parameter-server cluster has one chief, workers and ps tasks "
                            "(this one: %d chief, %d worker, %d ps; VDEV_CLUSTER_CONFIG or "
                            "TF_CONFIG gives the cluster)",
                            fn, cv.n[VDEV_JOB_CHIEF], cv.n[VDEV_JOB_WORKER], cv.n[VDEV_JOB_PS]);
    }
    if (st == VDEV_OK) { /* the devices this task uses */
        struct vdev_ldev *d;
        const char *w = opts->worker_device, *s = opts->server_device ? opts->server_device
                                                                      : "CPU:0";
        if (!w)
            w = vdev_runtime_lookup(VDEV_DEVICE_GPU, 0) ? "GPU:0" : "CPU:0";
        vdev_strlcpy(ps->worker_dev, w, sizeof ps->worker_dev);
        vdev_strlcpy(ps->server_dev, s, sizeof ps->server_dev);
        if (cv.job == VDEV_JOB_WORKER)
            st = vdev_runtime_find(w, &d);
        else if (cv.job == VDEV_JOB_PS)
            st = vdev_runtime_find(s, &d);
    }
    mine.job = cv.job;
    mine.index = cv.index;
    for (int j = 0; j < VDEV_JOB_COUNT; j++)
        mine.n_tasks[j] = cv.n[j];
    mine.status = (int32_t)st;
    if (st != VDEV_OK)
        vdev_strlcpy(mine.why, vdev_last_error(), sizeof mine.why);
    /* every process's task and status */
    st = vdev_mpi_comm_new(&ps->mpi);
    if (st != VDEV_OK) {
        ps_destroy(ps);
        return st;
    }
    ps->me = vdev_mpi_world_rank();
    ps->n_procs = vdev_mpi_world_size();
    size_t P = (size_t)ps->n_procs;
    struct ps_rec *all = vdev_calloc(P, sizeof *all);
    ps->task = vdev_calloc(P, sizeof *ps->task);
    ps->worker_rank = vdev_calloc(P, sizeof *ps->worker_rank);
    ps->ps_rank = vdev_calloc(P, sizeof *ps->ps_rank);
    if (!all || !ps->task || !ps->worker_rank || !ps->ps_rank) {
        free(all);
        ps_destroy(ps);
        return vdev_error(VDEV_ERR_OOM, "%s: out of host memory", fn);
    }
    vdev_strlcpy(ps->task[ps->me], mine.task, sizeof ps->task[0]);
    st = agree(ps, PS_TAG_MAKE, &mine, all, "vdev_ps_strategy_new");
    for (size_t p = 0; st == VDEV_OK && p < P; p++)
        vdev_strlcpy(ps->task[p], all[p].task, sizeof ps->task[0]);
    /* Every process must read the same cluster: one told of two servers
     * where the others know one would serve shards nobody pushes to. */
    for (size_t p = 1; st == VDEV_OK && p < P; p++)
        if (memcmp(all[p].n_tasks, all[0].n_tasks, sizeof all[0].n_tasks) != 0)
            st = vdev_error(VDEV_ERR_CONFIG,
                            "%s: %s (process %zu) reads a cluster of %d chief, %d worker and %d ps "
                            "tasks but %s (process 0) one of %d chief, %d worker and %d ps tasks; "
                            "give every process the same cluster (TF_CONFIG's \"cluster\", or "
                            "VDEV_CLUSTER_CONFIG)",
                            fn, all[p].task, p, all[p].n_tasks[0], all[p].n_tasks[1],
                            all[p].n_tasks[2], all[0].task, all[0].n_tasks[0], all[0].n_tasks[1],
                            all[0].n_tasks[2]);
    /* One process for each task of the cluster: the count first, as the
     * roles below index arrays of one slot per process with task indices. */
    ps->n_workers = cv.n[VDEV_JOB_WORKER];
    ps->n_ps = cv.n[VDEV_JOB_PS];
    if (st == VDEV_OK && (int)P != 1 + ps->n_workers + ps->n_ps)
        st = vdev_error(VDEV_ERR_CONFIG, "%s: the job has %zu process%s, the cluster %d tasks; "
                                         "launch one process per task",
                        fn, P, P == 1 ? "" : "es", 1 + ps->n_workers + ps->n_ps);
    int chief = -1;
    for (int w = 0; w < (int)P; w++)
        ps->worker_rank[w] = ps->ps_rank[w] = -1;
    for (size_t p = 0; st == VDEV_OK && p < P; p++) {
        int j = all[p].job, i = all[p].index;
        int *slot = j == VDEV_JOB_WORKER ? &ps->worker_rank[i]
                    : j == VDEV_JOB_PS   ? &ps->ps_rank[i]
                    : j == VDEV_JOB_CHIEF ? &chief
                                          : NULL;
        if (slot && *slot >= 0)
            st = vdev_error(VDEV_ERR_CONFIG, "%s: two processes are %s (ranks %d and %zu)", fn,
                            all[p].task, *slot, p);
        else if (slot)
            *slot = (int)p;
    }
    ps->chief = chief;
    free(all);
    if (st == VDEV_OK && ps->me == ps->chief) {
        ps->busy = vdev_malloc((size_t)ps->n_workers * sizeof *ps->busy);
        if (!ps->busy)
            st = vdev_error(VDEV_ERR_OOM, "%s: out of host memory", fn);
        for (int w = 0; ps->busy && w < ps->n_workers; w++)
            ps->busy[w] = -1;
    }
    uint64_t h;
    struct vdev_ps **slot = st == VDEV_OK ? vdev_handle_alloc(&strategies, &h) : NULL;
    if (st == VDEV_OK && !slot)
        st = VDEV_ERR_OOM;
    if (st != VDEV_OK) {
        ps_destroy(ps);
        return st;
    }
    ps->rgen = vdev_runtime_generation();
    *slot = ps;
    *out = (vdev_ps_strategy_t *)(uintptr_t)h;
    if (ps->me == ps->chief && ps->o.max_staleness != 0 && vdev_config_get_deterministic())
        vdev_log_warning("%s: the determinism switch is on, but with max_staleness %d the "
                         "servers apply pushes in the order they arrive, so training differs "
                         "run to run; max_staleness 0 makes it the same",
                         fn, ps->o.max_staleness);
    return VDEV_OK;
}

VDEV_API void vdev_ps_strategy_free(vdev_ps_strategy_t *h)
{
    if (!h)
        return;
    struct vdev_ps **p = vdev_handle_get(&strategies, h);
    if (!p) {
        vdev_error(VDEV_ERR_INVALID_ARG, "vdev_ps_strategy_free: not a live parameter-server "
                                         "strategy (freed already, or not one)");
        return;
    }
    struct vdev_ps *ps = *p;
    if (!vdev_handle_kill(&strategies, p, (uint64_t)(uintptr_t)h))
        return;
    vdev_handle_release(&strategies, p);
    if (vdev_runtime_forked_from())
        return; /* a forked child: its threads, MPI and buffers are the parent's; the handle goes */
    if (ps->me == ps->chief && !ps->spent && vdev_is_initialized()) {
        /* every step ends, then every other process stops serving */
        if (ps->outstanding > 0)
            join_steps(ps, "vdev_ps_strategy_free");
        struct ps_msg m;
        memset(&m, 0, sizeof m);
        m.id = -1;
        m.arg = ps->n_steps;
        for (int r = 0; r < ps->n_procs && !ps->spent; r++)
            if (r != ps->me &&
                vdev_mpi_send(ps->mpi, &m, sizeof m, r, PS_STOP, vdev_mpi_deadline()) != VDEV_OK)
                vdev_ps_mpi_failed(ps, "vdev_ps_strategy_free: telling the others to stop");
    }
    ps_destroy(ps);
}

/* ---- the variables ---- */

/* The partition (ps.h) of the variables' elements over the servers. */
static enum vdev_status partition(struct vdev_ps *ps)
{
    int P = ps->n_ps;
    ps->first_shard = vdev_calloc((size_t)P, sizeof *ps->first_shard);
    ps->n_shards_of = vdev_calloc((size_t)P, sizeof *ps->n_shards_of);
    ps->elems_of = vdev_calloc((size_t)P, sizeof *ps->elems_of);
    ps->shards = vdev_calloc((size_t)(ps->n_vars + P), sizeof *ps->shards);
    if (!ps->first_shard || !ps->n_shards_of || !ps->elems_of || !ps->shards)
        return vdev_error(VDEV_ERR_OOM, "out of host memory partitioning the variables");
    int k = 0;
    uint64_t most = 0;
    for (int s = 0; s < P; s++) {
        uint64_t lo = ps->total * (uint64_t)s / (uint64_t)P;
        uint64_t hi = ps->total * (uint64_t)(s + 1) / (uint64_t)P;
        ps->first_shard[s] = k;
        ps->elems_of[s] = hi - lo;
        most = hi - lo > most ? hi - lo : most;
        uint64_t start = 0;
        for (int v = 0; v < ps->n_vars; v++) {
            uint64_t end = start + (uint64_t)ps->numel[v];
            uint64_t a = lo > start ? lo : start, b = hi < end ? hi : end;
            if (a < b) {
                ps->shards[k] = (struct ps_shard){v, a - start, b - a, a - lo};
                k++;
            }
            start = end;
        }
        ps->n_shards_of[s] = k - ps->first_shard[s];
    }
    ps->buf = vdev_malloc(sizeof(struct ps_msg) + most * sizeof(float));
    if (!ps->buf)
        return vdev_error(VDEV_ERR_OOM, "out of host memory for messages of %llu floats",
                          (unsigned long long)most);
    return VDEV_OK;
}

uint64_t vdev_ps_msg_bytes(const struct vdev_ps *ps, int s)
{
    return sizeof(struct ps_msg) + ps->elems_of[s] * sizeof(float);
}

enum vdev_status vdev_ps_scatter(struct vdev_ps *ps, int s, const float *vals)
{
    for (int i = 0; i < ps->n_shards_of[s]; i++) {
        const struct ps_shard *sh = &ps->shards[ps->first_shard[s] + i];
        struct vdev_tens *t = vdev_tens_peek(ps->vars[sh->var]);
        if (!t)
            return vdev_error(VDEV_ERR_INVALID_ARG, "variable #%d was freed while the "
                                                    "parameter-server strategy uses it",
                              sh->var);
        struct vdev_backend *b = t->dev->backend;
        /* a write in place, as any: a tape that read the variable keeps the
         * value it read, and a stream still reading it (a lazy copy) goes first */
        vdev_tens_write_begin(t, t->dev);
        enum vdev_status st = b->ops->copy_h2d(b->ctx, t->dev->bdev,
                                               (char *)t->data + sh->off * sizeof(float),
                                               vals + sh->at, sh->count * sizeof(float));
        vdev_tens_write_end(t);
        if (st != VDEV_OK)
            return st;
        t->host_written = 0; /* partly written: not the host's contents alone */
    }
    return VDEV_OK;
}

/* A server's shards as variables on its device, from the chief's values. */
static enum vdev_status make_shards(struct vdev_ps *ps, const float *vals)
{
    int s = ps->index, n = ps->n_shards_of[s];
    ps->shard_vars = vdev_calloc((size_t)(n ? n : 1), sizeof *ps->shard_vars);
    if (!ps->shard_vars)
        return vdev_error(VDEV_ERR_OOM, "out of host memory for %d shards", n);
    enum vdev_status st = vdev_device_push(ps->server_dev);
    if (st != VDEV_OK)
        return st;
    for (int i = 0; i < n && st == VDEV_OK; i++) {
        const struct ps_shard *sh = &ps->shards[ps->first_shard[s] + i];
        int64_t shape[1] = {(int64_t)sh->count};
        vdev_tensor_t *t = vdev_tensor_from_host(vals + sh->at, shape, 1, VDEV_F32);
        ps->shard_vars[i] = t ? vdev_variable(t) : NULL;
        if (!ps->shard_vars[i])
            st = vdev_last_status();
    }
    vdev_device_pop();
    if (st != VDEV_OK)
        return st;
    const struct vdev_ps_options *o = &ps->o;
    int defaults = o->beta1 == 0 && o->beta2 == 0 && o->epsilon == 0;
    ps->opt = o->optimizer == VDEV_PS_ADAM
                  ? vdev_adam_new(o->learning_rate, defaults ? 0.9f : o->beta1,
                                  defaults ? 0.999f : o->beta2, defaults ? 1e-7f : o->epsilon)
                  : vdev_sgd_new(o->learning_rate, o->momentum);
    return ps->opt ? VDEV_OK : vdev_last_status();
}

VDEV_API enum vdev_status vdev_ps_strategy_add_variables(vdev_ps_strategy_t *h,
                                                         vdev_tensor_t *const *vars, int n)
{
    const char *fn = "vdev_ps_strategy_add_variables";
    struct vdev_ps *ps = vdev_ps_of(h, fn);
    if (!ps)
        return vdev_last_status(); /* invalid, or a forked child */
    struct ps_rec mine;
    memset(&mine, 0, sizeof mine);
    vdev_strlcpy(mine.task, ps->task[ps->me], sizeof mine.task);
    enum vdev_status st = VDEV_OK;
    uint64_t digest = VDEV_FNV1A_START, total = 0;
    if (ps->vars)
        st = vdev_error(VDEV_ERR_INVALID_ARG, "%s: the strategy has its variables already", fn);
    else if (n < 1 || !vars)
        st = vdev_error(VDEV_ERR_INVALID_ARG, "%s: vars is %s and n %d (at least one variable)",
                        fn, vars ? "set" : "NULL", n);
    for (int i = 0; st == VDEV_OK && i < n; i++) {
        const struct vdev_tens *t = vdev_tens_use(vars[i], fn);
        if (!t) {
            st = vdev_last_status();
        } else if (t->dtype != VDEV_F32) {
            st = vdev_error(VDEV_ERR_INVALID_ARG, "%s: variable #%d is %s; variables are float", fn,
                            i, vdev_dtype_name(t->dtype));
        } else {
            digest = vdev_fnv1a(digest, &t->ndim, sizeof t->ndim);
            digest = vdev_fnv1a(digest, t->shape, sizeof t->shape[0] * (size_t)t->ndim);
            total += (uint64_t)t->numel;
        }
    }
    mine.status = (int32_t)st;
    mine.n = n;
    mine.total = (int64_t)total;
    mine.digest = digest;
    if (st != VDEV_OK)
        vdev_strlcpy(mine.why, vdev_last_error(), sizeof mine.why);
    struct ps_rec *all = vdev_calloc((size_t)ps->n_procs, sizeof *all);
    if (!all)
        return vdev_error(VDEV_ERR_OOM, "%s: out of host memory", fn);
    st = agree(ps, PS_TAG_VARS, &mine, all, fn);
    /* every process compares the same records, the first differing one with
     * rank 0's, so every process reports the same text */
    for (int p = 1; st == VDEV_OK && p < ps->n_procs; p++)
        if (all[p].n != all[0].n || all[p].digest != all[0].digest)
            st = vdev_error(VDEV_ERR_INVALID_ARG,
                            "%s: %s passed %lld variables of %lld elements, %s %lld of %lld, or of "
                            "other shapes; every process passes the same variables",
                            fn, all[p].task, (long long)all[p].n, (long long)all[p].total,
                            all[0].task, (long long)all[0].n, (long long)all[0].total);
    free(all);
    if (st != VDEV_OK)
        return st;
    ps->n_vars = n;
    ps->total = total;
    ps->vars = vdev_malloc((size_t)n * sizeof *ps->vars);
    ps->numel = vdev_malloc((size_t)n * sizeof *ps->numel);
    if (!ps->vars || !ps->numel)
        return vdev_error(VDEV_ERR_OOM, "%s: out of host memory", fn);
    for (int i = 0; i < n; i++) {
        ps->vars[i] = vars[i];
        ps->numel[i] = vdev_tens_peek(vars[i])->numel;
    }
    if ((st = partition(ps)) != VDEV_OK)
        return st;
    /* the chief's values to each server; a server makes its shards of them */
    struct ps_msg *hdr = ps->buf;
    float *vals = (float *)(hdr + 1);
    if (ps->me == ps->chief) {
        for (int s = 0; s < ps->n_ps; s++) {
            memset(hdr, 0, sizeof *hdr);
            for (int i = 0; i < ps->n_shards_of[s] && st == VDEV_OK; i++) {
                const struct ps_shard *sh = &ps->shards[ps->first_shard[s] + i];
                float *whole = vdev_malloc((size_t)ps->numel[sh->var] * sizeof *whole);
                if (!whole)
                    return vdev_error(VDEV_ERR_OOM, "%s: out of host memory", fn);
                st = vdev_tensor_to_host(ps->vars[sh->var], whole,
                                         (size_t)ps->numel[sh->var] * sizeof *whole);
                if (st == VDEV_OK)
                    memcpy(vals + sh->at, whole + sh->off, sh->count * sizeof *whole);
                free(whole);
            }
            if (st != VDEV_OK)
                hdr->status = (int32_t)st;
            if (vdev_mpi_send(ps->mpi, ps->buf, vdev_ps_msg_bytes(ps, s), ps->ps_rank[s], PS_INIT,
                              vdev_mpi_deadline()) != VDEV_OK)
                return vdev_ps_mpi_failed(ps, "sending the initial values");
        }
        return st;
    }
    if (ps->job == VDEV_JOB_PS) {
        int src, tag;
        uint64_t bytes;
        if (vdev_mpi_probe(ps->mpi, ps->chief, PS_INIT, vdev_mpi_deadline(), &src, &tag,
                           &bytes) != VDEV_OK ||
            vdev_mpi_recv(ps->mpi, ps->buf, vdev_ps_msg_bytes(ps, ps->index)) != VDEV_OK)
            return vdev_ps_mpi_failed(ps, "receiving the initial values");
        if (hdr->status != VDEV_OK)
            return vdev_error((enum vdev_status)hdr->status, "%s: the chief could not read its "
                                                             "variables",
                              fn);
        return make_shards(ps, vals);
    }
    return VDEV_OK;
}

VDEV_API enum vdev_status vdev_ps_shard_info(const vdev_ps_strategy_t *h, int server,
                                             struct vdev_ps_shard_info *out)
{
    struct vdev_ps *ps = vdev_ps_of(h, "vdev_ps_shard_info");
    if (!ps)
        return vdev_last_status(); /* invalid, or a forked child */
    if (!out || !ps->vars || server < 0 || server >= ps->n_ps)
        return vdev_error(VDEV_ERR_INVALID_ARG, "vdev_ps_shard_info: %s", !out ? "out is NULL"
                                                : !ps->vars ? "no variables yet (add_variables)"
                                                            : "no such server");
    out->bytes = ps->elems_of[server] * sizeof(float);
    out->n_shards = ps->n_shards_of[server];
    out->updates = ps->me == ps->chief                                  ? ps->pushes
                   : ps->job == VDEV_JOB_PS && ps->index == server ? ps->updates
                                                                        : 0;
    return VDEV_OK;
}

VDEV_API double vdev_ps_balance(const vdev_ps_strategy_t *h)
{
    struct vdev_ps *ps = vdev_ps_of(h, "vdev_ps_balance");
    if (!ps)
        return -1.0;
    if (!ps->vars) {
        vdev_error(VDEV_ERR_INVALID_ARG, "vdev_ps_balance: no variables yet (add_variables)");
        return -1.0;
    }
    uint64_t lo = UINT64_MAX, hi = 0;
    for (int s = 0; s < ps->n_ps; s++) {
        lo = ps->elems_of[s] < lo ? ps->elems_of[s] : lo;
        hi = ps->elems_of[s] > hi ? ps->elems_of[s] : hi;
    }
    return lo ? (double)hi / (double)lo : INFINITY;
}

/* ---- the chief ---- */

/* The chief's own checks for `fn`. */
static struct vdev_ps *chief_of(vdev_ps_strategy_t *h, const char *fn)
{
    struct vdev_ps *ps = vdev_ps_of(h, fn);
    if (!ps)
        return NULL;
    if (ps->me != ps->chief) {
        vdev_error(VDEV_ERR_INVALID_ARG, "%s: only the chief schedules steps (this is %s)", fn,
                   ps->task[ps->me]);
        return NULL;
    }
    if (!ps->vars) {
        vdev_error(VDEV_ERR_INVALID_ARG, "%s: no variables yet (add_variables)", fn);
        return NULL;
    }
    if (ps->spent) {
        vdev_error(VDEV_ERR_BACKEND, "%s: an earlier failure across processes ended the job's "
                                     "use of MPI",
                   fn);
        return NULL;
    }
    return ps;
}

/* Waits for one step to finish and records it. */
static enum vdev_status wait_done(struct vdev_ps *ps, const char *fn)
{
    int src, tag;
    uint64_t bytes;
    struct ps_msg m;
    if (vdev_mpi_probe(ps->mpi, -1, PS_DONE, vdev_mpi_deadline(), &src, &tag, &bytes) != VDEV_OK) {
        char what[256];
        size_t k = (size_t)snprintf(what, sizeof what, "%s: waiting for the workers (busy:", fn);
        for (int w = 0; w < ps->n_workers && k < sizeof what - 40; w++)
            if (ps->busy[w] >= 0)
                k += (size_t)snprintf(what + k, sizeof what - k, " %s with step %lld",
                                      ps->task[ps->worker_rank[w]], (long long)ps->busy[w]);
        snprintf(what + k, sizeof what - k, ")");
        return vdev_ps_mpi_failed(ps, what);
    }
    if (vdev_mpi_recv(ps->mpi, &m, sizeof m) != VDEV_OK)
        return vdev_ps_mpi_failed(ps, fn);
    if (m.id < 0 || m.id >= ps->n_steps)
        return vdev_error(VDEV_ERR_INTERNAL, "%s: a report of step %lld, which was never "
                                             "scheduled",
                          fn, (long long)m.id);
    struct ps_step *s = &ps->steps[m.id];
    s->done = 1;
    s->status = (enum vdev_status)m.status;
    s->pushed = m.flag;
    s->has_value = m.has_value;
    s->value = m.value;
    vdev_strlcpy(s->msg, m.msg, sizeof s->msg);
    if (s->status != VDEV_OK && ps->first_error < 0)
        ps->first_error = m.id;
    ps->busy[s->worker] = -1;
    ps->outstanding--;
    ps->pushes += (uint64_t)s->pushed;
    while (ps->done_prefix < ps->n_steps && ps->steps[ps->done_prefix].done)
        ps->done_prefix++;
    return VDEV_OK;
}

/* As TensorFlow's ClusterCoordinator: once steps have failed, the next
 * join or schedule returns the first one's error and clears the errors
 * collected so far (a later join fails only for steps that fail after it).
 * VDEV_OK when none failed. */
static enum vdev_status raise_collected(struct vdev_ps *ps)
{
    if (ps->first_error < 0)
        return VDEV_OK;
    const struct ps_step *s = &ps->steps[ps->first_error];
    ps->first_error = -1;
    return vdev_error(s->status, "step %lld (argument %lld) on %s: %s",
                      (long long)(s - ps->steps), (long long)s->arg,
                      ps->task[ps->worker_rank[s->worker]], s->msg);
}

VDEV_API enum vdev_status vdev_ps_schedule(vdev_ps_strategy_t *h, int64_t step, int64_t *id)
{
    const char *fn = "vdev_ps_schedule";
    struct vdev_ps *ps = chief_of(h, fn);
    if (!ps)
        return vdev_last_status(); /* invalid, or a forked child */
    if (!id)
        return vdev_error(VDEV_ERR_INVALID_ARG, "%s: id is NULL", fn);
    *id = -1;
    if (ps->n_steps == ps->steps_cap) {
        int64_t cap = ps->steps_cap ? 2 * ps->steps_cap : 64;
        struct ps_step *s = vdev_realloc(ps->steps, (size_t)cap * sizeof *s);
        if (!s)
            return vdev_error(VDEV_ERR_OOM, "%s: out of host memory for %lld steps", fn,
                              (long long)cap);
        ps->steps = s;
        ps->steps_cap = cap;
    }
    int w = -1;
    for (;;) {
        for (int k = 0; k < ps->n_workers && w < 0; k++)
            if (ps->busy[k] < 0)
                w = k;
        if (w >= 0)
            break;
        enum vdev_status st = wait_done(ps, fn);
        if (st != VDEV_OK)
            return st;
    }
    /* a step that failed since the last join: its error, and nothing scheduled */
    enum vdev_status failed = raise_collected(ps);
    if (failed != VDEV_OK)
        return failed;
    int64_t k = ps->n_steps;
    struct ps_msg m;
    memset(&m, 0, sizeof m);
    m.id = k;
    m.arg = step;
    m.seq = k;
    if (vdev_mpi_send(ps->mpi, &m, sizeof m, ps->worker_rank[w], PS_RUN, vdev_mpi_deadline()) !=
        VDEV_OK)
        return vdev_ps_mpi_failed(ps, fn);
    memset(&ps->steps[k], 0, sizeof ps->steps[k]);
    ps->steps[k].arg = step;
    ps->steps[k].worker = w;
    ps->n_steps++;
    ps->busy[w] = k;
    ps->outstanding++;
    *id = k;
    return VDEV_OK;
}

/* Waits for every step; then the first error collected since a join or
 * schedule last returned one (raise_collected), and clears them. */
static enum vdev_status join_steps(struct vdev_ps *ps, const char *fn)
{
    while (ps->outstanding > 0) {
        enum vdev_status st = wait_done(ps, fn);
        if (st != VDEV_OK)
            return st;
    }
    return raise_collected(ps);
}

VDEV_API enum vdev_status vdev_ps_join(vdev_ps_strategy_t *h)
{
    struct vdev_ps *ps = chief_of(h, "vdev_ps_join");
    return ps ? join_steps(ps, "vdev_ps_join") : vdev_last_status();
}

VDEV_API enum vdev_status vdev_ps_fetch(vdev_ps_strategy_t *h, int64_t id, float *value)
{
    const char *fn = "vdev_ps_fetch";
    struct vdev_ps *ps = chief_of(h, fn);
    if (!ps)
        return vdev_last_status(); /* invalid, or a forked child */
    if (!value)
        return vdev_error(VDEV_ERR_INVALID_ARG, "%s: value is NULL", fn);
    if (id < 0 || id >= ps->n_steps || !ps->steps[id].done)
        return vdev_error(VDEV_ERR_NOT_FOUND, "%s: step %lld is %s", fn, (long long)id,
                          id < 0 || id >= ps->n_steps ? "not scheduled" : "not finished (join)");
    const struct ps_step *s = &ps->steps[id];
    if (s->status != VDEV_OK)
        return vdev_error(s->status, "step %lld (argument %lld) on %s: %s", (long long)id,
                          (long long)s->arg, ps->task[ps->worker_rank[s->worker]], s->msg);
    *value = s->has_value ? s->value : NAN;
    return VDEV_OK;
}

VDEV_API enum vdev_status vdev_ps_pull(vdev_ps_strategy_t *h)
{
    struct vdev_ps *ps = chief_of(h, "vdev_ps_pull");
    return ps ? vdev_ps_pull_all(ps, -1, ps->done_prefix) : vdev_last_status();
}
