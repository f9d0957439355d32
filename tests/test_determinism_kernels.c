/* test_determinism_kernels.c — under the determinism switch every host
 * kernel gives the same bits whatever the thread counts.
 *
 * A child process (this program with the argument "child") runs every op of
 * the public API on inputs large enough for the pool to split elementwise
 * kernels (600,000 elements) and for OpenBLAS to use its threads (products
 * of 333x777x555, all four transposes; batched products of two such
 * entries and of 64 small ones), the convolution and its gradient ops
 * (the fast kernels' products), pools, slices, joins and gathers with the
 * gather's gradient, gradients through the tape, the
 * SGD and Adam updates, and training steps: an MLP on the cpu backend, and
 * three chained MLPs on three simulated GPUs (streams running side by side).
 * It prints one line per result: its name and a hash of its bytes (FNV-1a).
 * The parent runs the child with VDEV_DETERMINISTIC=1 under four thread
 * settings (OPENBLAS_NUM_THREADS 1, 2 and 3 or unset; OMP_NUM_THREADS 1, 2
 * or unset, which size vdev's pool) and wants every line equal. OpenBLAS's
 * sgemm itself gives other bits with another thread count (0.3.21, Zen 4:
 * 333x777x555 differs in 80% of its elements between 1 and 2 threads), so
 * without the switch the products differ; the parent reports whether they
 * did (information, not a check: it depends on the machine's kernels). */
#define _GNU_SOURCE
#include "check.h"

#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#define BIG 600000 /* elements: above twice the pool's part size */

/* ---- the child ---- */

static uint64_t fnv(const void *p, size_t n)
{
    const unsigned char *b = p;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

/* Prints "name hash" for tensor t (or "name NULL: error"). */
static void emit(const char *name, const vdev_tensor_t *t)
{
    int64_t n = t ? vdev_tensor_numel(t) : -1;
    void *buf = n >= 0 ? malloc((size_t)(n ? n : 1) * 4) : NULL;
    if (!t || !buf || vdev_tensor_to_host(t, buf, (size_t)n * 4) != VDEV_OK) {
        printf("%s NULL: %s\n", name, vdev_last_error());
        free(buf);
        return;
    }
    printf("%s %016llx\n", name, (unsigned long long)fnv(buf, (size_t)n * 4));
    free(buf);
}

/* Every op on device dev; names are prefixed with tag. */
static void ops_on(const char *dev, const char *tag)
{
    char name[96];
#define EMIT(what, t) (snprintf(name, sizeof name, "%s.%s", tag, what), emit(name, t))
    vdev_device_push(dev);
    vdev_scope_begin();
    int64_t big[2] = {1000, 600}, row[1] = {600}, one[1] = {1};
    vdev_tensor_t *a = vdev_tensor_uniform(big, 2, -2, 2, 1);
    vdev_tensor_t *b = vdev_tensor_uniform(big, 2, 0.5, 3, 2);
    vdev_tensor_t *r = vdev_tensor_uniform(row, 1, 0.5, 3, 3);
    vdev_tensor_t *s = vdev_tensor_uniform(one, 1, 0.5, 3, 4);
    const vdev_tensor_t *rhs[3] = {b, r, s};
    const char *mode[3] = {"same", "row", "one"};
    for (int m = 0; m < 3; m++) {
        char w[32];
        snprintf(w, sizeof w, "add.%s", mode[m]);
        EMIT(w, vdev_add(a, rhs[m]));
        snprintf(w, sizeof w, "sub.%s", mode[m]);
        EMIT(w, vdev_sub(a, rhs[m]));
        snprintf(w, sizeof w, "mul.%s", mode[m]);
        EMIT(w, vdev_mul(a, rhs[m]));
        snprintf(w, sizeof w, "div.%s", mode[m]);
        EMIT(w, vdev_div(a, rhs[m]));
    }
    EMIT("add_scalar", vdev_add_scalar(a, 0.25f));
    EMIT("mul_scalar", vdev_mul_scalar(a, -1.5f));
    EMIT("pow_scalar", vdev_pow_scalar(b, 1.7f));
    EMIT("relu", vdev_relu(a));
    EMIT("tanh", vdev_tanh(a));
    EMIT("sigmoid", vdev_sigmoid(a));
    EMIT("exp", vdev_exp(a));
    EMIT("log", vdev_log(b));
    EMIT("softmax", vdev_softmax(a));
    EMIT("log_softmax", vdev_log_softmax(a));
    EMIT("sum0", vdev_sum(a, 0, false));
    EMIT("sum1", vdev_sum(a, 1, true));
    EMIT("mean0", vdev_mean(a, 0, true));
    EMIT("mean1", vdev_mean(a, -1, false));
    EMIT("sum_all", vdev_sum_all(a));
    EMIT("mean_all", vdev_mean_all(a));
    int64_t rs[2] = {600, -1};
    EMIT("reshape", vdev_reshape(a, rs, 2));
    EMIT("transpose", vdev_transpose(a));
    EMIT("mse", vdev_mse(a, b));
    EMIT("argmax", vdev_argmax(a));
    int32_t labels[1000];
    for (int i = 0; i < 1000; i++)
        labels[i] = (int32_t)((i * 37) % 600);
    int64_t ls[1] = {1000};
    vdev_tensor_t *lab = vdev_tensor_from_host(labels, ls, 1, VDEV_I32);
    EMIT("softmax_ce", vdev_softmax_cross_entropy(a, lab));

    /* Products where OpenBLAS uses its threads. */
    int64_t ka[2] = {333, 555}, kb[2] = {555, 777}, ta_[2] = {555, 333}, tb_[2] = {777, 555};
    vdev_tensor_t *A = vdev_tensor_uniform(ka, 2, -1, 1, 5), *B = vdev_tensor_uniform(kb, 2, -1, 1, 6);
    vdev_tensor_t *At = vdev_tensor_uniform(ta_, 2, -1, 1, 7), *Bt = vdev_tensor_uniform(tb_, 2, -1, 1, 8);
    EMIT("matmul.nn", vdev_matmul(A, B, false, false));
    EMIT("matmul.nt", vdev_matmul(A, Bt, false, true));
    EMIT("matmul.tn", vdev_matmul(At, B, true, false));
    EMIT("matmul.tt", vdev_matmul(At, Bt, true, true));
    /* batched products: entries large enough to be split each, and many
     * small ones spread over the threads */
    int64_t b3a[3] = {2, 333, 555}, b3b[3] = {2, 555, 777}, s3a[3] = {64, 24, 40},
            s3b[3] = {64, 40, 24};
    EMIT("batch_matmul.large", vdev_batch_matmul(vdev_tensor_uniform(b3a, 3, -1, 1, 9),
                                                 vdev_tensor_uniform(b3b, 3, -1, 1, 10), 0, 0));
    EMIT("batch_matmul.small", vdev_batch_matmul(vdev_tensor_uniform(s3a, 3, -1, 1, 11),
                                                 vdev_tensor_uniform(s3b, 3, -1, 1, 12), 0, 0));

    /* The convolution (its fast kernels' products) and its two gradient ops
     * through the tape; the copies of slices, joins, transposes, gathers and
     * the gather's gradient (a sum in index order). */
    int64_t xs[4] = {8, 20, 20, 16}, fs[4] = {3, 3, 16, 32}, ids[1] = {2000};
    vdev_tensor_t *cx = vdev_variable(vdev_tensor_uniform(xs, 4, -1, 1, 21));
    vdev_tensor_t *cf = vdev_variable(vdev_tensor_uniform(fs, 4, -1, 1, 22));
    int32_t idv[2000];
    for (int i = 0; i < 2000; i++)
        idv[i] = (int32_t)((i * 7919) % 1000);
    vdev_tensor_t *idx = vdev_tensor_from_host(idv, ids, 1, VDEV_I32);
    vdev_tensor_t *emb = vdev_variable(vdev_tensor_uniform(big, 2, -1, 1, 23));
    vdev_tape_t *ct = vdev_tape_begin();
    vdev_tensor_t *cy = vdev_conv2d(cx, cf, 1, 1, "SAME");
    vdev_tensor_t *rows = vdev_gather(emb, idx);
    vdev_tensor_t *closs = vdev_add(vdev_sum_all(vdev_mul(cy, cy)), vdev_sum_all(vdev_tanh(rows)));
    vdev_tensor_t *cv[3] = {cx, cf, emb}, *cg[3] = {NULL, NULL, NULL};
    if (vdev_tape_gradient(ct, closs, cv, 3, cg) != VDEV_OK)
        printf("%s.conv_gradient NULL: %s\n", tag, vdev_last_error());
    vdev_tape_end(ct);
    EMIT("conv2d", cy);
    EMIT("conv2d.grad.input", cg[0]);
    EMIT("conv2d.grad.filter", cg[1]);
    EMIT("max_pool", vdev_max_pool2d(cx, 3, 3, 2, 2, "SAME"));
    EMIT("avg_pool", vdev_avg_pool2d(cx, 3, 3, 2, 2, "VALID"));
    EMIT("gather", rows);
    EMIT("gather.grad", cg[2]);
    int64_t sb[2] = {999, 0}, se[2] = {0, 600}, ss[2] = {-3, 2};
    EMIT("strided_slice", vdev_strided_slice(a, 2, sb, se, ss, 0, 0, 0, 0, 0));
    const vdev_tensor_t *pair[2] = {a, b};
    EMIT("concat", vdev_concat(pair, 2, 1));
    EMIT("stack", vdev_stack(pair, 2, 1));
    int perm[4] = {2, 0, 3, 1};
    EMIT("transpose_perm", vdev_transpose_perm(cx, perm, 4));

    /* Gradients of every differentiable op, through the tape. */
    vdev_tensor_t *va = vdev_variable(vdev_tensor_uniform(big, 2, -2, 2, 9));
    vdev_tensor_t *vb = vdev_variable(vdev_tensor_uniform(row, 1, 0.5, 3, 10));
    vdev_tape_t *tape = vdev_tape_begin();
    vdev_tensor_t *y = vdev_add(vdev_mul(vdev_tanh(va), vb), vdev_sigmoid(vdev_div(va, vb)));
    y = vdev_sub(vdev_relu(y), vdev_mul_scalar(vdev_exp(vdev_mul_scalar(va, 0.1f)), 0.5f));
    y = vdev_add(y, vdev_log(vdev_add_scalar(vdev_pow_scalar(vdev_add_scalar(va, 3.0f), 2.0f), 1.0f)));
    vdev_tensor_t *loss = vdev_add(vdev_add(vdev_mse(y, b), vdev_softmax_cross_entropy(y, lab)),
                                   vdev_add(vdev_mean_all(vdev_softmax(y)),
                                            vdev_sum_all(vdev_log_softmax(vdev_transpose(y)))));
    vdev_tensor_t *vars[2] = {va, vb}, *g[2] = {NULL, NULL};
    if (vdev_tape_gradient(tape, loss, vars, 2, g) != VDEV_OK)
        printf("%s.gradient NULL: %s\n", tag, vdev_last_error());
    vdev_tape_end(tape);
    EMIT("loss", loss);
    EMIT("grad.a", g[0]);
    EMIT("grad.b", g[1]);

    /* The optimizers' updates (the pool splits them). */
    vdev_optimizer_t *sgd = vdev_sgd_new(0.01f, 0.9f), *adam = vdev_adam_new(0.001f, 0.9f, 0.999f, 1e-7f);
    for (int i = 0; i < 2; i++) {
        vdev_optimizer_apply(sgd, &va, &g[0], 1);
        vdev_optimizer_apply(adam, &vb, &g[1], 1);
        vdev_optimizer_apply(adam, &va, &g[0], 1);
    }
    EMIT("updated.a", va);
    EMIT("updated.b", vb);
    vdev_optimizer_free(sgd);
    vdev_optimizer_free(adam);
    vdev_scope_end();
    vdev_tensor_free(va);
    vdev_tensor_free(vb);
    vdev_device_pop();
#undef EMIT
}

/* n chained MLPs on dev[0..n), each with Adam, `steps` training steps. */
static void train(const char *const *dev, int n, const char *tag)
{
    int64_t sizes[4] = {96, 700, 500, 96}, xs[2] = {300, 96};
    vdev_mlp_t *m[3];
    vdev_optimizer_t *o[3];
    vdev_tensor_t *v[3][6], *x, *t[3];
    for (int k = 0; k < n; k++) {
        vdev_device_push(dev[k]);
        m[k] = vdev_mlp_new(sizes, 4, VDEV_ACT_RELU, VDEV_ACT_NONE, 40 + (uint64_t)k);
        t[k] = vdev_tensor_uniform(xs, 2, -1, 1, 50 + (uint64_t)k);
        vdev_device_pop();
        o[k] = vdev_adam_new(0.001f, 0.9f, 0.999f, 1e-7f);
        vdev_mlp_variables(m[k], v[k], 6);
    }
    vdev_device_push(dev[0]);
    x = vdev_tensor_uniform(xs, 2, -1, 1, 60);
    vdev_device_pop();
    for (int s = 0; s < 4; s++) {
        vdev_scope_begin();
        const vdev_tensor_t *in = x;
        for (int k = 0; k < n; k++) {
            vdev_device_push(dev[k]);
            vdev_tape_t *tape = vdev_tape_begin();
            vdev_tensor_t *y = vdev_mlp_forward(m[k], in), *g[6];
            if (vdev_tape_gradient(tape, vdev_mse(y, t[k]), v[k], 6, g) != VDEV_OK ||
                vdev_optimizer_apply(o[k], v[k], g, 6) != VDEV_OK)
                printf("%s.step NULL: %s\n", tag, vdev_last_error());
            vdev_tape_end(tape);
            vdev_device_pop();
            in = y;
        }
        vdev_scope_end();
    }
    for (int k = 0; k < n; k++)
        for (int i = 0; i < 6; i++) {
            char name[64];
            snprintf(name, sizeof name, "%s.model%d.var%d", tag, k, i);
            emit(name, v[k][i]);
        }
    for (int k = 0; k < n; k++) {
        vdev_mlp_free(m[k]);
        vdev_optimizer_free(o[k]);
        vdev_tensor_free(t[k]);
    }
    vdev_tensor_free(x);
}

/* sim: with three simulated GPUs (else the cpu backend alone, where
 * products would get every OpenBLAS thread of the budget). */
static int child(int sim)
{
    if (vdev_init() != VDEV_OK) {
        printf("init NULL: %s\n", vdev_last_error());
        return 1;
    }
    printf("deterministic %d\n", vdev_config_get_deterministic());
    const char *cpu[1] = {"CPU:0"}, *gpus[3] = {"GPU:0", "GPU:1", "GPU:2"};
    if (sim) {
        ops_on("GPU:1", "sim");
        train(gpus, 3, "train.sim3");
    } else {
        ops_on("CPU:0", "cpu");
        train(cpu, 1, "train.cpu");
    }
    printf("end\n");
    vdev_shutdown();
    return 0;
}

/* ---- the parent ---- */

#define MAX_OUT (64 * 1024)

/* Runs the child under `env` (assignments for env(1)), with three simulated
 * GPUs or none; its output into out. */
static int run_child(const char *self, const char *env, int sim, char *out)
{
    char cmd[PATH_MAX + 512];
    snprintf(cmd, sizeof cmd,
             "env -u OPENBLAS_NUM_THREADS -u OMP_NUM_THREADS -u VDEV_SIM_GPUS "
             "-u VDEV_DETERMINISTIC %s %s '%s' %s",
             sim ? "VDEV_SIM_GPUS=3x2GiB" : "", env, self, sim ? "child-sim" : "child-cpu");
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    size_t n = fread(out, 1, MAX_OUT - 1, p);
    out[n] = '\0';
    return pclose(p);
}

/* Lines of a and b that differ, named on stdout (at most 5); their count. */
static int diff_lines(const char *a, const char *b, const char *what)
{
    int diffs = 0, shown = 0;
    while (*a || *b) {
        size_t la = strcspn(a, "\n"), lb = strcspn(b, "\n");
        if (la != lb || memcmp(a, b, la) != 0) {
            diffs++;
            if (shown++ < 5)
                printf("  %s: \"%.*s\" vs \"%.*s\"\n", what, (int)la, a, (int)lb, b);
        }
        a += la + (a[la] == '\n');
        b += lb + (b[lb] == '\n');
    }
    return diffs;
}

int main(int argc, char **argv)
{
    if (argc == 2 && !strcmp(argv[1], "child-cpu"))
        return child(0);
    if (argc == 2 && !strcmp(argv[1], "child-sim"))
        return child(1);
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    CHECK(n > 0);
    if (n <= 0)
        return check_done();
    self[n] = '\0';
    static const char *settings[4] = {
        "OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1",
        "OPENBLAS_NUM_THREADS=2 OMP_NUM_THREADS=2",
        "OPENBLAS_NUM_THREADS=3",
        "",
    };
    static char first[MAX_OUT], other[MAX_OUT];
    for (int sim = 0; sim < 2; sim++) {
        char env[256];
        snprintf(env, sizeof env, "VDEV_DETERMINISTIC=1 %s", settings[0]);
        CHECK(run_child(self, env, sim, first) == 0);
        CHECK(strstr(first, "deterministic 1\n") != NULL);
        CHECK(strstr(first, "NULL") == NULL);
        CHECK(strstr(first, "\nend\n") != NULL); /* the child ran to its end */
        for (int i = 1; i < 4; i++) {
            snprintf(env, sizeof env, "VDEV_DETERMINISTIC=1 %s", settings[i]);
            CHECK(run_child(self, env, sim, other) == 0);
            char what[300];
            snprintf(what, sizeof what, "%s, [%s] vs [%s]", sim ? "3 simulated GPUs" : "cpu",
                     settings[0], settings[i]);
            CHECK(diff_lines(first, other, what) == 0);
        }
    }
    /* Information: without the switch, do OpenBLAS's thread counts show? */
    static char off1[MAX_OUT], off2[MAX_OUT];
    if (run_child(self, settings[0], 0, off1) == 0 && run_child(self, settings[1], 0, off2) == 0) {
        int d = 0;
        for (const char *l = off1; (l = strstr(l, "cpu.matmul.")); l++) {
            char line[128];
            size_t len = strcspn(l, "\n");
            snprintf(line, sizeof line, "%.*s", (int)(len < 127 ? len : 127), l);
            d += strstr(off2, line) == NULL;
        }
        printf("without the switch, %d of the 4 products on the cpu backend differ between 1 "
               "and 2 OpenBLAS threads (information: it depends on the machine's kernels)\n",
               d);
    }
    return check_done();
}
