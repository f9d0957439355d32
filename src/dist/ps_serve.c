/* ps_serve.c — the parameter servers' and the workers' side of the
 * parameter-server strategy (ps.h): their loops, the pulls, and what a step
 * function calls (push, return).
 *
 * A server waits for messages from anyone (no deadline: a server idles as
 * long as the job lives), and for each: a pull is answered with its shards'
 * values now, or queued until the staleness bound lets it through (the
 * chief's, until the server has counted the steps the chief knows
 * finished); a push is applied with the optimizer to its shards (the
 * gradient pieces become tensors on the server's device, one
 * vdev_optimizer_apply for all its shards, so Adam counts one step per push)
 * and counted, then the queued pulls it lets through are answered; a stop
 * ends the loop once every step the chief scheduled is counted.
 *
 * A worker waits for the chief's next step, pulls every server's values into
 * its copies of the variables, runs the step function on its device inside a
 * scope, and reports to the chief. A step that pushes nothing (it failed, or
 * it only evaluates) still sends every server an empty push, so the servers
 * count the step and no later step waits for it.
 *
 * The variables laid end to end are the servers' values laid end to end
 * (server s holds elements [s E / P, (s + 1) E / P) of them), so a push is a
 * slice of the flattened gradients and a pull fills a slice of the
 * flattened variables. */
#define _GNU_SOURCE
#include "dist/ps.h"

#include <math.h>
#include <string.h>

static struct vdev_handle_table workers =
    VDEV_HANDLE_TABLE("parameter-server worker context", 12, struct vdev_ps_worker *);

/* Elements before server s's values in the flattened variables. */
static uint64_t start_of(const struct vdev_ps *ps, int s)
{
    return ps->total * (uint64_t)s / (uint64_t)ps->n_ps;
}

/* ---- pulls ---- */

enum vdev_status vdev_ps_pull_all(struct vdev_ps *ps, int64_t seq, int64_t need)
{
    struct ps_msg m;
    memset(&m, 0, sizeof m);
    m.seq = seq;
    m.arg = need;
    for (int s = 0; s < ps->n_ps; s++)
        if (vdev_mpi_send(ps->mpi, &m, sizeof m, ps->ps_rank[s], PS_PULL, vdev_mpi_deadline()) !=
            VDEV_OK)
            return vdev_ps_mpi_failed(ps, "asking a server for values");
    enum vdev_status st = VDEV_OK;
    char why[PS_MSG + 100] = "";
    for (int s = 0; s < ps->n_ps; s++) {
        int src, tag;
        uint64_t bytes;
        char what[128];
        snprintf(what, sizeof what, "waiting for the values of %s", ps->task[ps->ps_rank[s]]);
        if (vdev_mpi_probe(ps->mpi, ps->ps_rank[s], PS_VALUES, vdev_mpi_deadline(), &src, &tag,
                           &bytes) != VDEV_OK ||
            vdev_mpi_recv(ps->mpi, ps->buf, vdev_ps_msg_bytes(ps, s)) != VDEV_OK)
            return vdev_ps_mpi_failed(ps, what);
        const struct ps_msg *h = ps->buf;
        if (h->status != VDEV_OK) { /* the server cannot go on; the others answer still */
            if (st == VDEV_OK) {
                st = (enum vdev_status)h->status;
                snprintf(why, sizeof why, "%s: %s", ps->task[ps->ps_rank[s]], h->msg);
            }
            continue;
        }
        if (st == VDEV_OK && vdev_ps_scatter(ps, s, (const float *)(h + 1)) != VDEV_OK) {
            st = vdev_last_status();
            vdev_strlcpy(why, vdev_last_error(), sizeof why);
        }
    }
    return st == VDEV_OK ? VDEV_OK : vdev_error(st, "%s", why);
}

/* ---- the server ---- */

/* Whether the pull of step seq, which needs the first `need` steps
 * counted, may be answered now. */
static int may_answer(const struct vdev_ps *ps, int64_t seq, int64_t need)
{
    if (ps->counted < need)
        return 0;
    return ps->o.max_staleness < 0 || seq < 0 || ps->counted >= seq - ps->o.max_staleness;
}

/* Sends this server's values (or its failure) to process dst. */
static enum vdev_status answer(struct vdev_ps *ps, int dst)
{
    struct ps_msg *h = ps->buf;
    float *vals = (float *)(h + 1);
    memset(h, 0, sizeof *h);
    h->status = (int32_t)ps->failed;
    vdev_strlcpy(h->msg, ps->fail_msg, sizeof h->msg);
    int s = ps->index;
    for (int i = 0; ps->failed == VDEV_OK && i < ps->n_shards_of[s]; i++) {
        const struct ps_shard *sh = &ps->shards[ps->first_shard[s] + i];
        if (vdev_tensor_to_host(ps->shard_vars[i], vals + sh->at, sh->count * sizeof *vals) !=
            VDEV_OK) {
            ps->failed = vdev_last_status();
            snprintf(ps->fail_msg, sizeof ps->fail_msg, "reading its shards: %s",
                     vdev_last_error());
            h->status = (int32_t)ps->failed;
            vdev_strlcpy(h->msg, ps->fail_msg, sizeof h->msg);
        }
    }
    if (vdev_mpi_send(ps->mpi, ps->buf, vdev_ps_msg_bytes(ps, s), dst, PS_VALUES,
                      vdev_mpi_deadline()) != VDEV_OK)
        return vdev_ps_mpi_failed(ps, "sending values");
    return VDEV_OK;
}

/* Applies the gradients in ps->buf to the shards. */
static void apply(struct vdev_ps *ps)
{
    int s = ps->index, n = ps->n_shards_of[s];
    const float *g = (const float *)((const struct ps_msg *)ps->buf + 1);
    vdev_tensor_t *grads_s[16], **grads = n <= 16 ? grads_s : vdev_malloc((size_t)n * sizeof *grads);
    enum vdev_status st = grads ? vdev_scope_begin() : VDEV_ERR_OOM;
    if (!grads)
        vdev_error(VDEV_ERR_OOM, "out of host memory for %d gradients", n);
    if (st == VDEV_OK && (st = vdev_device_push(ps->server_dev)) == VDEV_OK) {
        for (int i = 0; i < n && st == VDEV_OK; i++) {
            const struct ps_shard *sh = &ps->shards[ps->first_shard[s] + i];
            int64_t shape[1] = {(int64_t)sh->count};
            grads[i] = vdev_tensor_from_host(g + sh->at, shape, 1, VDEV_F32);
            if (!grads[i])
                st = vdev_last_status();
        }
        if (st == VDEV_OK)
            st = vdev_optimizer_apply(ps->opt, ps->shard_vars, grads, n);
        vdev_device_pop();
    }
    if (grads)
        vdev_scope_end();
    if (grads != grads_s)
        free(grads);
    if (st == VDEV_OK) {
        ps->updates++;
    } else if (ps->failed == VDEV_OK) {
        ps->failed = st;
        snprintf(ps->fail_msg, sizeof ps->fail_msg, "applying the optimizer: %s",
                 vdev_last_error());
    }
}

/* Counts step seq done (its push came). */
static enum vdev_status count(struct vdev_ps *ps, int64_t seq)
{
    if (seq < ps->counted)
        return VDEV_OK;
    if (seq >= ps->done_cap) {
        int64_t cap = ps->done_cap ? ps->done_cap : 1024;
        while (cap <= seq)
            cap *= 2;
        unsigned char *d = vdev_realloc(ps->done_above, (size_t)cap);
        if (!d)
            return vdev_error(VDEV_ERR_OOM, "out of host memory counting %lld steps",
                              (long long)cap);
        memset(d + ps->done_cap, 0, (size_t)(cap - ps->done_cap));
        ps->done_above = d;
        ps->done_cap = cap;
    }
    ps->done_above[seq] = 1;
    while (ps->counted < ps->done_cap && ps->done_above[ps->counted])
        ps->counted++;
    return VDEV_OK;
}

static enum vdev_status queue_pull(struct vdev_ps *ps, int src, int64_t seq, int64_t need)
{
    if (ps->n_wait == ps->wait_cap) {
        int cap = ps->wait_cap ? 2 * ps->wait_cap : 16;
        int *s = vdev_realloc(ps->wait_src, (size_t)cap * sizeof *s);
        if (s)
            ps->wait_src = s;
        int64_t *q = vdev_realloc(ps->wait_seq, (size_t)cap * sizeof *q);
        if (q)
            ps->wait_seq = q;
        int64_t *nd = vdev_realloc(ps->wait_need, (size_t)cap * sizeof *nd);
        if (nd)
            ps->wait_need = nd;
        if (!s || !q || !nd)
            return vdev_error(VDEV_ERR_OOM, "out of host memory for waiting pulls");
        ps->wait_cap = cap;
    }
    ps->wait_src[ps->n_wait] = src;
    ps->wait_need[ps->n_wait] = need;
    ps->wait_seq[ps->n_wait++] = seq;
    return VDEV_OK;
}

/* Answers the queued pulls the staleness bound now lets through. */
static enum vdev_status answer_queued(struct vdev_ps *ps)
{
    for (int i = 0; i < ps->n_wait;) {
        if (!may_answer(ps, ps->wait_seq[i], ps->wait_need[i])) {
            i++;
            continue;
        }
        enum vdev_status st = answer(ps, ps->wait_src[i]);
        if (st != VDEV_OK)
            return st;
        ps->wait_src[i] = ps->wait_src[ps->n_wait - 1];
        ps->wait_seq[i] = ps->wait_seq[ps->n_wait - 1];
        ps->wait_need[i] = ps->wait_need[ps->n_wait - 1];
        ps->n_wait--;
    }
    return VDEV_OK;
}

enum vdev_status vdev_ps_serve_server(struct vdev_ps *ps)
{
    uint64_t cap = vdev_ps_msg_bytes(ps, ps->index);
    ps->stop_at = -1;
    for (;;) {
        int src, tag;
        uint64_t bytes;
        if (vdev_mpi_probe(ps->mpi, -1, -1, VDEV_MPI_NO_DEADLINE, &src, &tag, &bytes) != VDEV_OK ||
            vdev_mpi_recv(ps->mpi, ps->buf, cap) != VDEV_OK)
            return vdev_ps_mpi_failed(ps, "a server waiting for messages");
        const struct ps_msg *m = ps->buf;
        enum vdev_status st = VDEV_OK;
        switch (tag) {
        case PS_STOP: /* once every scheduled step's push is counted */
            if (ps->counted >= m->arg)
                return VDEV_OK;
            ps->stop_at = m->arg;
            break;
        case PS_PULL:
            st = may_answer(ps, m->seq, m->arg) ? answer(ps, src)
                                                : queue_pull(ps, src, m->seq, m->arg);
            break;
        case PS_PUSH: {
            int64_t seq = m->seq;
            if (!m->flag && ps->failed == VDEV_OK) {
                if (bytes != cap)
                    ps->failed = vdev_error(VDEV_ERR_INTERNAL, "a push of %llu bytes; %llu "
                                                               "expected",
                                            (unsigned long long)bytes, (unsigned long long)cap);
                else
                    apply(ps);
            }
            if ((st = count(ps, seq)) == VDEV_OK)
                st = answer_queued(ps);
            if (st == VDEV_OK && ps->stop_at >= 0 && ps->counted >= ps->stop_at)
                return VDEV_OK;
            break;
        }
        default:
            st = vdev_error(VDEV_ERR_INTERNAL, "%s: a message with tag %d from %s",
                            ps->task[ps->me], tag, ps->task[src]);
        }
        if (st != VDEV_OK)
            return st;
    }
}

/* ---- the worker ---- */

static struct vdev_ps_worker *worker_of(const vdev_ps_worker_t *h, const char *fn)
{
    struct vdev_ps_worker **p = vdev_handle_get(&workers, h);
    if (!p) {
        vdev_error(VDEV_ERR_INVALID_ARG, h ? "%s: not a live worker context" : "%s: the worker "
                                                                               "context is NULL",
                   fn);
        return NULL;
    }
    if (vdev_runtime_refuse_forked(fn)) /* a step of the parent's: its MPI stayed there */
        return NULL;
    if (!(*p)->active || (*p)->thread != vdev_thread_id()) {
        vdev_error(VDEV_ERR_INVALID_ARG, "%s: a worker context is used only inside its step "
                                         "function",
                   fn);
        return NULL;
    }
    return *p;
}

/* Sends each server its slice of the flattened gradients g (NULL: an empty
 * push, skip). */
static enum vdev_status push_slices(struct vdev_ps *ps, int64_t seq, const float *g)
{
    for (int s = 0; s < ps->n_ps; s++) {
        struct ps_msg *h = ps->buf;
        memset(h, 0, sizeof *h);
        h->seq = seq;
        h->flag = g == NULL;
        uint64_t bytes = sizeof *h;
        if (g) {
            memcpy(h + 1, g + start_of(ps, s), ps->elems_of[s] * sizeof *g);
            bytes = vdev_ps_msg_bytes(ps, s);
        }
        if (vdev_mpi_send(ps->mpi, ps->buf, bytes, ps->ps_rank[s], PS_PUSH, vdev_mpi_deadline()) !=
            VDEV_OK)
            return vdev_ps_mpi_failed(ps, "pushing gradients");
    }
    return VDEV_OK;
}

VDEV_API enum vdev_status vdev_ps_worker_push(vdev_ps_worker_t *h, vdev_tensor_t *const *grads,
                                              int n)
{
    const char *fn = "vdev_ps_worker_push";
    struct vdev_ps_worker *w = worker_of(h, fn);
    if (!w)
        return vdev_last_status(); /* invalid, or a forked child */
    struct vdev_ps *ps = w->ps;
    if (w->pushed)
        return vdev_error(VDEV_ERR_INVALID_ARG, "%s: this step pushed its gradients already", fn);
    if (!grads || n != ps->n_vars)
        return vdev_error(VDEV_ERR_INVALID_ARG, "%s: %d gradients for %d variables", fn,
                          grads ? n : 0, ps->n_vars);
    for (int i = 0; i < n; i++) {
        const struct vdev_tens *t = vdev_tens_use(grads[i], fn);
        if (!t)
            return vdev_last_status();
        if (t->dtype != VDEV_F32 || t->numel != ps->numel[i])
            return vdev_error(VDEV_ERR_SHAPE, "%s: gradient #%d is %s of %lld elements; its "
                                              "variable has %lld floats",
                              fn, i, vdev_dtype_name(t->dtype), (long long)t->numel,
                              (long long)ps->numel[i]);
        /* the same shape, not only as many elements (a [1,5] gradient for a
         * [5] variable is a mistake TensorFlow refuses too) */
        const struct vdev_tens *v = vdev_tens_peek(ps->vars[i]);
        char s1[96], s2[96];
        if (v && (v->ndim != t->ndim || memcmp(v->shape, t->shape, sizeof v->shape)))
            return vdev_error(VDEV_ERR_SHAPE, "%s: gradient #%d has shape %s; its variable has "
                                              "shape %s",
                              fn, i, vdev_shape_str(t->shape, t->ndim, s1, sizeof s1),
                              vdev_shape_str(v->shape, v->ndim, s2, sizeof s2));
    }
    float *g = vdev_malloc(ps->total * sizeof *g + 1);
    if (!g)
        return vdev_error(VDEV_ERR_OOM, "%s: out of host memory for %llu floats", fn,
                          (unsigned long long)ps->total);
    uint64_t at = 0;
    for (int i = 0; i < n; i++) {
        enum vdev_status st =
            vdev_tensor_to_host(grads[i], g + at, (size_t)ps->numel[i] * sizeof *g);
        if (st != VDEV_OK) {
            free(g);
            return st;
        }
        at += (uint64_t)ps->numel[i];
    }
    enum vdev_status st = push_slices(ps, w->seq, g);
    free(g);
    if (st == VDEV_OK)
        w->pushed = 1;
    return st;
}

VDEV_API enum vdev_status vdev_ps_worker_return(vdev_ps_worker_t *h, float value)
{
    struct vdev_ps_worker *w = worker_of(h, "vdev_ps_worker_return");
    if (!w)
        return vdev_last_status(); /* invalid, or a forked child */
    w->value = value;
    w->has_value = 1;
    return VDEV_OK;
}

VDEV_API int vdev_ps_worker_index(const vdev_ps_worker_t *h)
{
    struct vdev_ps_worker *w = worker_of(h, "vdev_ps_worker_index");
    return w ? w->ps->index : -1;
}

/* One step on this worker: pull, the step function, report. */
static enum vdev_status run_step(struct vdev_ps *ps, struct vdev_ps_worker *w,
                                 vdev_ps_worker_t *h, const struct ps_msg *m, vdev_ps_step_fn fn,
                                 void *user)
{
    w->pushed = w->has_value = 0;
    w->value = NAN;
    w->seq = m->seq;
    enum vdev_status st = vdev_ps_pull_all(ps, m->seq, 0);
    if (ps->spent)
        return st;
    int scoped = st == VDEV_OK; /* a begin, even a failed one, gets its end */
    if (scoped && (st = vdev_scope_begin()) == VDEV_OK) {
        if ((st = vdev_device_push(ps->worker_dev)) == VDEV_OK) {
            w->thread = vdev_thread_id();
            w->active = 1;
            st = fn(h, m->arg, user);
            w->active = 0;
            if (st != VDEV_OK && (unsigned)st >= VDEV_STATUS_COUNT)
                st = vdev_error(VDEV_ERR_INVALID_ARG, "the step function returned %d, not a vdev "
                                                      "status",
                                (int)st);
            vdev_device_pop();
        }
    }
    struct ps_msg d;
    memset(&d, 0, sizeof d);
    if (st != VDEV_OK)
        vdev_strlcpy(d.msg, vdev_last_status() == st && vdev_last_error()[0]
                                ? vdev_last_error()
                                : vdev_status_str(st),
                     sizeof d.msg);
    if (scoped)
        vdev_scope_end();
    if (ps->spent)
        return vdev_error(st, "%s", d.msg);
    if (!w->pushed && push_slices(ps, m->seq, NULL) != VDEV_OK)
        return vdev_last_status();
    d.id = m->id;
    d.status = (int32_t)st;
    d.flag = w->pushed;
    d.has_value = w->has_value;
    d.value = w->value;
    if (vdev_mpi_send(ps->mpi, &d, sizeof d, ps->chief, PS_DONE, vdev_mpi_deadline()) != VDEV_OK)
        return vdev_ps_mpi_failed(ps, "reporting a step to the chief");
    return VDEV_OK;
}

enum vdev_status vdev_ps_serve_worker(struct vdev_ps *ps, vdev_ps_step_fn fn, void *user)
{
    struct vdev_ps_worker w = {.ps = ps};
    uint64_t hv;
    struct vdev_ps_worker **slot = vdev_handle_alloc(&workers, &hv);
    if (!slot)
        return VDEV_ERR_OOM;
    *slot = &w;
    vdev_ps_worker_t *h = (vdev_ps_worker_t *)(uintptr_t)hv;
    enum vdev_status st = VDEV_OK;
    for (;;) {
        int src, tag;
        uint64_t bytes;
        struct ps_msg m;
        if (vdev_mpi_probe(ps->mpi, ps->chief, -1, VDEV_MPI_NO_DEADLINE, &src, &tag, &bytes) !=
                VDEV_OK ||
            vdev_mpi_recv(ps->mpi, &m, sizeof m) != VDEV_OK) {
            st = vdev_ps_mpi_failed(ps, "a worker waiting for the chief");
            break;
        }
        if (tag == PS_STOP)
            break;
        if (tag != PS_RUN) {
            st = vdev_error(VDEV_ERR_INTERNAL, "%s: a message with tag %d from the chief",
                            ps->task[ps->me], tag);
            break;
        }
        if ((st = run_step(ps, &w, h, &m, fn, user)) != VDEV_OK)
            break;
    }
    vdev_handle_kill(&workers, slot, hv);
    vdev_handle_release(&workers, slot);
    return st;
}

VDEV_API enum vdev_status vdev_ps_strategy_serve(vdev_ps_strategy_t *h, vdev_ps_step_fn fn,
                                                 void *user)
{
    const char *fn_name = "vdev_ps_strategy_serve";
    struct vdev_ps *ps = vdev_ps_of(h, fn_name);
    if (!ps)
        return vdev_last_status(); /* invalid, or a forked child */
    if (ps->me == ps->chief)
        return vdev_error(VDEV_ERR_INVALID_ARG, "%s: the chief schedules steps; workers and ps "
                                                "tasks serve",
                          fn_name);
    if (!ps->vars)
        return vdev_error(VDEV_ERR_INVALID_ARG, "%s: no variables yet (add_variables)", fn_name);
    if (ps->spent)
        return vdev_error(VDEV_ERR_BACKEND, "%s: an earlier failure across processes ended the "
                                            "job's use of MPI",
                          fn_name);
    if (ps->job == VDEV_JOB_PS)
        return vdev_ps_serve_server(ps);
    if (!fn)
        return vdev_error(VDEV_ERR_INVALID_ARG, "%s: fn is NULL on a worker", fn_name);
    return vdev_ps_serve_worker(ps, fn, user);
}
