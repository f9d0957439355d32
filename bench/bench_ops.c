/* bench_ops.c — what an op costs, what a training step costs, against what
 * its matrix products alone cost in OpenBLAS.
 *
 *   dispatch   a one-element add, its output tensor included, ns per op, on
 *              the cpu backend and on a simulated GPU (ops are queued on the
 *              GPU's stream; the time includes waiting for the stream);
 *   mlp        a training step of an MLP 1024-4096-4096-10, batch 256 (ReLU,
 *              softmax cross-entropy, Adam) on the cpu backend, against its 8
 *              matrix products timed alone with cblas_sgemm;
 *   chain3     three MLPs 256-512-512-256 chained, batch 64, MSE, one Adam
 *              each: ms per step on the cpu backend and on three simulated
 *              GPUs, against its 24 matrix products alone.
 * Each figure is the median of several timed repetitions after a warm-up.
 * Usage: bench_ops [--quick] [--md FILE]  (FILE gets a markdown section) */
#define _POSIX_C_SOURCE 200809L
#include "vdev.h"

#include <cblas.h>
#include <stdlib.h>
#include <string.h>

static int quick;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static void restart(const char *sim)
{
    vdev_shutdown();
    if (sim)
        setenv("VDEV_SIM_GPUS", sim, 1);
    else
        unsetenv("VDEV_SIM_GPUS");
    if (vdev_init() != VDEV_OK) {
        fprintf(stderr, "bench_ops: start-up: %s\n", vdev_last_error());
        exit(1);
    }
}

/* ns per one-element add on `dev`, output tensor made and freed each time. */
static double bench_dispatch(const char *dev)
{
    int64_t one[1] = {1};
    vdev_device_push(dev);
    vdev_tensor_t *a = vdev_tensor_fill(one, 1, VDEV_F32, 1.0), *b = vdev_tensor_fill(one, 1, VDEV_F32, 2.0);
    int n = quick ? 20000 : 200000, reps = 7;
    double t[7];
    for (int r = 0; r < reps; r++) {
        vdev_scope_begin();
        double t0 = vdev_clock_seconds();
        for (int i = 0; i < n; i++)
            vdev_tensor_free(vdev_add(a, b));
        vdev_tensor_t *last = vdev_add(a, b);
        float v = vdev_tensor_item(last); /* waits for the stream */
        t[r] = (vdev_clock_seconds() - t0) / (n + 1) * 1e9;
        vdev_scope_end();
        if (v != 3.0f) {
            fprintf(stderr, "bench_ops: wrong sum %g\n", v);
            exit(1);
        }
    }
    vdev_tensor_free(a);
    vdev_tensor_free(b);
    vdev_device_pop();
    return median(t, reps);
}

struct shape3 {
    int m, n, k, ta, tb;
};

/* The time of the given matrix products alone, in ms. */
static double bench_gemms(const struct shape3 *s, int n_shapes, int reps)
{
    float *a = calloc(4096 * 4096, 4), *b = calloc(4096 * 4096, 4), *c = calloc(4096 * 4096, 4);
    for (int i = 0; i < 4096 * 4096; i++)
        a[i] = b[i] = (float)(i % 7) * 0.01f;
    double t[16];
    for (int r = 0; r < reps + 1; r++) {
        double t0 = vdev_clock_seconds();
        for (int i = 0; i < n_shapes; i++) {
            int lda = s[i].ta ? s[i].m : s[i].k, ldb = s[i].tb ? s[i].k : s[i].n;
            cblas_sgemm(CblasRowMajor, s[i].ta ? CblasTrans : CblasNoTrans,
                        s[i].tb ? CblasTrans : CblasNoTrans, s[i].m, s[i].n, s[i].k, 1.0f, a, lda,
                        b, ldb, 0.0f, c, s[i].n);
        }
        if (r)
            t[r - 1] = (vdev_clock_seconds() - t0) * 1e3;
    }
    free(a);
    free(b);
    free(c);
    return median(t, reps);
}

/* Products of one training step of an MLP with layer sizes d[0..3], batch B:
 * 3 forward, 3 weight gradients, 2 input gradients. */
static int mlp_gemms(const int *d, int B, struct shape3 *s)
{
    int n = 0;
    for (int l = 0; l < 3; l++)
        s[n++] = (struct shape3){B, d[l + 1], d[l], 0, 0};          /* x W */
    for (int l = 0; l < 3; l++)
        s[n++] = (struct shape3){d[l], d[l + 1], B, 1, 0};          /* x^T dy */
    for (int l = 1; l < 3; l++)
        s[n++] = (struct shape3){B, d[l], d[l + 1], 0, 1};          /* dy W^T */
    return n;
}

struct model {
    vdev_mlp_t *mlp;
    vdev_optimizer_t *opt;
    vdev_tensor_t *vars[6];
};

static void model_init(struct model *m, const char *dev, const int64_t *sizes, uint64_t seed)
{
    vdev_device_push(dev);
    m->mlp = vdev_mlp_new(sizes, 4, VDEV_ACT_RELU, VDEV_ACT_NONE, seed);
    vdev_device_pop();
    m->opt = vdev_adam_new(0.001f, 0.9f, 0.999f, 1e-7f);
    vdev_mlp_variables(m->mlp, m->vars, 6);
}

static void model_free(struct model *m)
{
    vdev_mlp_free(m->mlp);
    vdev_optimizer_free(m->opt);
}

/* One step: forward, loss, gradients, Adam. Returns the loss tensor. */
static vdev_tensor_t *train_step(struct model *m, const char *dev, const vdev_tensor_t *x,
                                 const vdev_tensor_t *target, int ce)
{
    vdev_device_push(dev);
    vdev_tape_t *tape = vdev_tape_begin();
    vdev_tensor_t *y = vdev_mlp_forward(m->mlp, x);
    vdev_tensor_t *loss = ce ? vdev_softmax_cross_entropy(y, target) : vdev_mse(y, target);
    vdev_tensor_t *g[6];
    if (vdev_tape_gradient(tape, loss, m->vars, 6, g) != VDEV_OK ||
        vdev_optimizer_apply(m->opt, m->vars, g, 6) != VDEV_OK) {
        fprintf(stderr, "bench_ops: step failed: %s\n", vdev_last_error());
        exit(1);
    }
    vdev_tape_end(tape);
    vdev_device_pop();
    return y;
}

static double bench_mlp(void)
{
    int64_t sizes[4] = {1024, 4096, 4096, 10};
    struct model m;
    model_init(&m, "CPU:0", sizes, 1);
    int64_t xs[2] = {256, 1024}, ls[1] = {256};
    int32_t labels[256];
    for (int i = 0; i < 256; i++)
        labels[i] = i % 10;
    vdev_device_push("CPU:0");
    vdev_tensor_t *x = vdev_tensor_uniform(xs, 2, -1, 1, 3);
    vdev_tensor_t *y = vdev_tensor_from_host(labels, ls, 1, VDEV_I32);
    vdev_device_pop();
    int reps = quick ? 3 : 7;
    double t[8];
    for (int r = 0; r < reps + 1; r++) {
        vdev_scope_begin();
        double t0 = vdev_clock_seconds();
        train_step(&m, "CPU:0", x, y, 1);
        if (r)
            t[r - 1] = (vdev_clock_seconds() - t0) * 1e3;
        vdev_scope_end();
    }
    vdev_tensor_free(x);
    vdev_tensor_free(y);
    model_free(&m);
    return median(t, reps);
}

static double bench_chain3(const char *const *dev)
{
    int64_t sizes[4] = {256, 512, 512, 256};
    struct model m[3];
    for (int k = 0; k < 3; k++)
        model_init(&m[k], dev[k], sizes, 10 + (uint64_t)k);
    int64_t xs[2] = {64, 256};
    vdev_tensor_t *x[3], *tgt[3];
    for (int k = 0; k < 3; k++) {
        vdev_device_push(dev[k]);
        x[k] = vdev_tensor_uniform(xs, 2, -1, 1, 20 + (uint64_t)k);
        tgt[k] = vdev_tensor_uniform(xs, 2, -1, 1, 30 + (uint64_t)k);
        vdev_device_pop();
    }
    int steps = quick ? 10 : 50, reps = 5;
    double t[5];
    for (int r = 0; r < reps + 1; r++) {
        double t0 = vdev_clock_seconds();
        for (int s = 0; s < steps; s++) {
            vdev_scope_begin();
            const vdev_tensor_t *in = x[0];
            for (int k = 0; k < 3; k++)
                in = train_step(&m[k], dev[k], in, tgt[k], 0);
            vdev_scope_end();
        }
        vdev_scope_begin();
        for (int k = 0; k < 3; k++)
            vdev_tensor_item(vdev_sum_all(m[k].vars[0])); /* waits for each stream */
        vdev_scope_end();
        if (r)
            t[r - 1] = (vdev_clock_seconds() - t0) * 1e3 / steps;
    }
    for (int k = 0; k < 3; k++) {
        vdev_tensor_free(x[k]);
        vdev_tensor_free(tgt[k]);
        model_free(&m[k]);
    }
    return median(t, reps);
}

int main(int argc, char **argv)
{
    const char *md = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick"))
            quick = 1;
        else if (!strcmp(argv[i], "--md") && i + 1 < argc)
            md = argv[++i];
        else {
            fprintf(stderr, "usage: bench_ops [--quick] [--md FILE]\n");
            return 2;
        }
    }
    const char *env_threads = getenv("OPENBLAS_NUM_THREADS");
    restart("1x1GiB");
    double d_cpu = bench_dispatch("CPU:0"), d_sim = bench_dispatch("GPU:0");
    printf("dispatch: 1-element add  cpu %.0f ns/op  simulated GPU %.0f ns/op\n", d_cpu, d_sim);

    struct shape3 s[24];
    int d_mlp[4] = {1024, 4096, 4096, 10};
    int n = mlp_gemms(d_mlp, 256, s);
    double g_mlp = bench_gemms(s, n, quick ? 3 : 7);
    double t_mlp = bench_mlp();
    printf("mlp 1024-4096-4096-10 batch 256: step %.1f ms, its 8 products %.1f ms (%.2fx)\n",
           t_mlp, g_mlp, t_mlp / g_mlp);

    int d_c[4] = {256, 512, 512, 256};
    n = 0;
    for (int k = 0; k < 3; k++)
        n += mlp_gemms(d_c, 64, s + n);
    double g_c = bench_gemms(s, n, 7);
    const char *cpu3[3] = {"CPU:0", "CPU:0", "CPU:0"}, *gpu3[3] = {"GPU:0", "GPU:1", "GPU:2"};
    double c_cpu = bench_chain3(cpu3);
    restart("3x4GiB");
    double c_sim = bench_chain3(gpu3);
    printf("chain3 256-512-512-256 x3 batch 64: cpu %.2f ms/step, 3 simulated GPUs %.2f ms/step, "
           "its 24 products %.2f ms\n", c_cpu, c_sim, g_c);
    vdev_shutdown();

    if (md) {
        FILE *f = fopen(md, "w");
        if (!f) {
            perror(md);
            return 1;
        }
        fprintf(f, "| figure | vdev | reference |\n|---|---|---|\n");
        fprintf(f, "| op dispatch, 1-element add, cpu backend | %.0f ns/op | PyTorch eager add ~940 ns |\n", d_cpu);
        fprintf(f, "| op dispatch, 1-element add, simulated GPU | %.0f ns/op | target < 2000 ns |\n", d_sim);
        fprintf(f, "| MLP 1024-4096-4096-10 train step, batch 256, cpu | %.1f ms (%.2fx its products) | its 8 products alone in OpenBLAS: %.1f ms |\n", t_mlp, t_mlp / g_mlp, g_mlp);
        fprintf(f, "| chain3 step, cpu backend | %.2f ms | its 24 products alone: %.2f ms |\n", c_cpu, g_c);
        fprintf(f, "| chain3 step, 3 simulated GPUs | %.2f ms | |\n", c_sim);
        fprintf(f, "\nOPENBLAS_NUM_THREADS=%s%s\n", env_threads ? env_threads : "(unset)",
                quick ? " (quick mode: fewer repetitions)" : "");
        fclose(f);
    }
    return 0;
}
