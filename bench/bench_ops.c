/* bench_ops.c — what an op costs, what a training step costs, against what
 * its matrix products alone cost in OpenBLAS (bench_step.h says how).
 *
 *   dispatch   a one-element add, its output tensor included, ns per op, on
 *              the cpu backend and on a simulated GPU (ops are queued on the
 *              GPU's stream; the time includes waiting for the stream);
 *   mlp        a training step of an MLP 1024-4096-4096-10, batch 256 (ReLU,
 *              softmax cross-entropy, Adam) on the cpu backend, against its 8
 *              matrix products;
 *   chain3     three MLPs 256-512-512-256 chained, batch 64, MSE, one Adam
 *              each: ms per step on the cpu backend against its 24 products,
 *              and on three simulated GPUs against the products of one model
 *              (the three streams run side by side, so the step approaches
 *              the largest model's products plus the copies between GPUs).
 *   phases     where chain3's step goes on the cpu backend: the forward pass
 *              and loss, the gradients, and Adam, each timed within the step,
 *              the first two beside their own products alone, Adam beside the
 *              bytes it reads and writes.
 * Usage: bench_ops [--quick] [--md FILE]
 *                  [--only dispatch|mlp|chain3-cpu|chain3-phases|chain3-sim]
 *   --md FILE   writes a markdown table to FILE
 *   --only X    runs one figure (for profiling: callgrind, perf) */
#include "bench_step.h"

#include "bench_args.h"

static int quick;
static const char *only; /* --only NAME: run that figure alone (for profiling) */

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
    return bench_median(t, reps);
}

/* The MLP step on the cpu backend. */
static struct bench_times bench_mlp(void)
{
    const char *dev[1] = {"CPU:0"};
    int d[4] = {1024, 4096, 4096, 10};
    struct bench_chain c;
    bench_chain_init(&c, 1, dev, d, 256, 1);
    struct bench_times t = bench_chain_time(&c, 1, quick ? 3 : 7);
    bench_chain_free(&c);
    return t;
}

/* How many steps a turn of chain3 takes, and how many turns. */
#define CHAIN3_STEPS (quick ? 10 : 20)
#define CHAIN3_TURNS (quick ? 5 : 11)

/* chain3 on three devices (CPU:0 three times, or three simulated GPUs). */
static struct bench_times bench_chain3(const char *const *dev)
{
    struct bench_chain c;
    bench_chain3_init(&c, dev);
    struct bench_times t = bench_chain_time(&c, CHAIN3_STEPS, CHAIN3_TURNS);
    bench_chain_free(&c);
    return t;
}

/* Where chain3's step goes on the cpu backend (bench_chain_phases); *bytes
 * gets what Adam reads and writes per step. */
static struct bench_phases bench_chain3_phases(double *bytes)
{
    const char *cpu3[3] = {"CPU:0", "CPU:0", "CPU:0"};
    struct bench_chain c;
    bench_chain3_init(&c, cpu3);
    struct bench_phases ph = bench_chain_phases(&c, CHAIN3_STEPS, CHAIN3_TURNS);
    *bytes = bench_chain_adam_bytes(&c);
    bench_chain_free(&c);
    return ph;
}

static void print_phases(const struct bench_phases *ph, double bytes)
{
    printf("chain3 phases, cpu: forward and loss %.3f ms (its 9 products %.3f ms), gradients "
           "%.3f ms (its 15 products %.3f ms), Adam %.3f ms (%.1f MB read and written: %.1f GB/s)\n",
           ph->ms[PH_FORWARD], ph->fwd_prod, ph->ms[PH_GRADIENT], ph->grad_prod,
           ph->ms[PH_OPTIMIZER], bytes / 1e6, bytes / 1e6 / ph->ms[PH_OPTIMIZER]);
}

static void print_times(const char *what, const struct bench_times *t, int vs_one)
{
    double p = vs_one ? t->prod1_med : t->prod_med, pm = vs_one ? t->prod1_min : t->prod_min;
    printf("%s: step %.3f ms (min %.3f), %s %.3f ms (min %.3f): %.2fx (min %.2fx); "
           "this thread's CPU: step %.3f ms, products %.3f ms (%.2fx)\n",
           what, t->step_med, t->step_min, vs_one ? "one model's products" : "its products", p,
           pm, t->step_med / p, t->step_min / pm, t->step_cpu, t->prod_cpu,
           t->step_cpu / t->prod_cpu);
}

int main(int argc, char **argv)
{
    struct bench_args args;
    if (bench_args_parse(argc, argv, "bench_ops", 1, &args))
        return 2;
    quick = args.quick;
    only = args.only;
    const char *md = args.md;
    char env[160];
    bench_blas_env(env, sizeof env);
    const char *cpu3[3] = {"CPU:0", "CPU:0", "CPU:0"}, *gpu3[3] = {"GPU:0", "GPU:1", "GPU:2"};
    if (only) {
        int sim = !strcmp(only, "chain3-sim");
        bench_restart(sim ? "3x4GiB" : NULL);
        struct bench_times t;
        if (!strcmp(only, "chain3-phases")) {
            double bytes;
            struct bench_phases ph = bench_chain3_phases(&bytes);
            print_phases(&ph, bytes);
        } else if (!strcmp(only, "chain3-cpu") || sim) {
            t = bench_chain3(sim ? gpu3 : cpu3);
            print_times(only, &t, sim);
        } else if (!strcmp(only, "mlp")) {
            t = bench_mlp();
            print_times(only, &t, 0);
        } else if (!strcmp(only, "dispatch")) {
            printf("dispatch: %.0f ns/op\n", bench_dispatch("CPU:0"));
        } else {
            fprintf(stderr, "bench_ops: --only dispatch, mlp, chain3-cpu, chain3-phases or chain3-sim\n");
            return 2;
        }
        vdev_shutdown();
        return 0;
    }
    bench_restart("1x1GiB");
    double d_cpu = bench_dispatch("CPU:0"), d_sim = bench_dispatch("GPU:0");
    printf("dispatch: 1-element add  cpu %.0f ns/op  simulated GPU %.0f ns/op\n", d_cpu, d_sim);
    bench_restart(NULL);
    struct bench_times t_mlp = bench_mlp();
    print_times("mlp 1024-4096-4096-10 batch 256, cpu", &t_mlp, 0);
    vdev_config_set_deterministic(true);
    struct bench_times t_det = bench_mlp();
    vdev_config_set_deterministic(false);
    print_times("the same under the determinism switch", &t_det, 0);
    struct bench_times c_cpu = bench_chain3(cpu3);
    print_times("chain3 256-512-512-256 x3 batch 64, cpu", &c_cpu, 0);
    double adam_bytes;
    struct bench_phases ph = bench_chain3_phases(&adam_bytes);
    print_phases(&ph, adam_bytes);
    bench_restart("3x4GiB");
    struct bench_times c_sim = bench_chain3(gpu3);
    print_times("chain3 on 3 simulated GPUs", &c_sim, 1);
    vdev_shutdown();
    /* For bench/run: the figures PyTorch's are compared with. */
    printf("vdev_mlp_ms=%.3f %.3f\nvdev_chain3_ms=%.3f %.3f\nvdev_chain3_sim_ms=%.3f %.3f\n",
           t_mlp.step_med, t_mlp.step_min, c_cpu.step_med, c_cpu.step_min, c_sim.step_med,
           c_sim.step_min);

    if (md) {
        FILE *f = fopen(md, "w");
        if (!f) {
            perror(md);
            return 1;
        }
        fprintf(f, "| figure | vdev: median (min) | reference: median (min) | ratio: median (min) |\n"
                   "|---|---:|---:|---:|\n");
        fprintf(f, "| op dispatch, 1-element add, cpu backend | %.0f ns/op | PyTorch eager add ~940 ns | |\n", d_cpu);
        fprintf(f, "| op dispatch, 1-element add, simulated GPU | %.0f ns/op | target < 2000 ns | |\n", d_sim);
        const struct {
            const char *name, *ref;
            const struct bench_times *t;
            int one;
        } rows[3] = {
            {"MLP 1024-4096-4096-10 train step, batch 256, cpu backend", "its 8 products", &t_mlp, 0},
            {"chain3 step, cpu backend", "its 24 products", &c_cpu, 0},
            {"chain3 step, 3 simulated GPUs", "one model's 8 products", &c_sim, 1},
        };
        for (int i = 0; i < 3; i++) {
            const struct bench_times *t = rows[i].t;
            double p = rows[i].one ? t->prod1_med : t->prod_med;
            double pm = rows[i].one ? t->prod1_min : t->prod_min;
            fprintf(f, "| %s | %.2f ms (%.2f) | %s: %.2f ms (%.2f) | %.2fx (%.2fx) |\n", rows[i].name,
                    t->step_med, t->step_min, rows[i].ref, p, pm, t->step_med / p, t->step_min / pm);
        }
        fprintf(f, "| the MLP step under the determinism switch (blocks fixed by shape) | %.2f ms (%.2f) | the MLP step without it: %.2f ms (%.2f) | %.2fx (%.2fx) |\n",
                t_det.step_med, t_det.step_min, t_mlp.step_med, t_mlp.step_min,
                t_det.step_med / t_mlp.step_med, t_det.step_min / t_mlp.step_min);
        fprintf(f, "\nWhere chain3's step goes on the cpu backend (`--only chain3-phases`): each "
                   "phase timed inside the step (the backend runs ops as they are called), in turns "
                   "with the same phase's products alone; ms per step, medians.\n\n"
                   "| phase | vdev | its products alone | ratio |\n|---|---:|---:|---:|\n");
        fprintf(f, "| forward pass and loss (3 models) | %.3f | 9 products: %.3f | %.2fx |\n",
                ph.ms[PH_FORWARD], ph.fwd_prod, ph.ms[PH_FORWARD] / ph.fwd_prod);
        fprintf(f, "| gradients, tape (3 models) | %.3f | 15 products: %.3f | %.2fx |\n",
                ph.ms[PH_GRADIENT], ph.grad_prod, ph.ms[PH_GRADIENT] / ph.grad_prod);
        fprintf(f, "| Adam (18 variables, %.2f M elements) | %.3f | no products: %.1f MB read and "
                   "written, %.1f GB/s | |\n",
                adam_bytes / 28.0 / 1e6, ph.ms[PH_OPTIMIZER], adam_bytes / 1e6,
                adam_bytes / 1e6 / ph.ms[PH_OPTIMIZER]);
        fprintf(f, "\nEnvironment: %s%s.\n", env, quick ? " (quick mode: fewer repetitions)" : "");
        fclose(f);
    }
    return 0;
}
