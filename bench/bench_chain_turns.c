/* bench_chain_turns.c — how much chain3's step varies from turn to turn, on
 * the cpu backend and on three simulated GPUs, and what Adam costs when its
 * state comes from memory. Not run by bench/run: the figures it gives are
 * for telling the development machine's states apart (BENCHMARKS.md, "Two
 * speeds of the development machine").
 *  - turns: after 5 untimed steps, `turns` turns of `steps` steps each per
 *    backend, alternating; ms per step, fastest and median turn;
 *  - Adam twice: on the cpu backend, each model's step with its Adam update
 *    applied twice to the same gradients (a changed training, for this
 *    figure only): the first application reads m and v as the step left
 *    them, the second right after; ms per step of each, averaged over 250
 *    steps after 50 untimed.
 * Usage: bench_chain_turns [--quick] */
#include "bench_step.h"

#include "bench_args.h"

static void turns_of(int gpu, int turns, int steps, double *out)
{
    const char *cpu3[3] = {"CPU:0", "CPU:0", "CPU:0"}, *gpu3[3] = {"GPU:0", "GPU:1", "GPU:2"};
    bench_restart(gpu ? "3x4GiB" : NULL);
    struct bench_chain c;
    bench_chain3_init(&c, gpu ? gpu3 : cpu3);
    bench_chain_steps(&c, 5);
    for (int r = 0; r < turns; r++) {
        double t0 = vdev_clock_seconds();
        bench_chain_steps(&c, steps);
        out[r] = (vdev_clock_seconds() - t0) * 1e3 / steps;
    }
    bench_chain_free(&c);
}

static double fastest(const double *v, int n)
{
    double m = v[0];
    for (int i = 1; i < n; i++)
        m = v[i] < m ? v[i] : m;
    return m;
}

static void adam_twice(int warm, int steps)
{
    const char *cpu3[3] = {"CPU:0", "CPU:0", "CPU:0"};
    bench_restart(NULL);
    struct bench_chain c;
    bench_chain3_init(&c, cpu3);
    double first = 0, second = 0;
    for (int s = 0; s < warm + steps; s++) {
        vdev_scope_begin();
        const vdev_tensor_t *in = c.x;
        for (int k = 0; k < c.n; k++) {
            struct bench_model *m = &c.m[k];
            vdev_device_push(m->dev);
            vdev_tape_t *tape = vdev_tape_begin();
            vdev_tensor_t *y = vdev_mlp_forward(m->mlp, in);
            vdev_tensor_t *g[6];
            if (vdev_tape_gradient(tape, vdev_mse(y, m->target), m->vars, 6, g) != VDEV_OK)
                bench_die("a training step's gradients");
            vdev_tape_end(tape);
            double t0 = vdev_clock_seconds();
            if (vdev_optimizer_apply(m->opt, m->vars, g, 6) != VDEV_OK)
                bench_die("the first update");
            double t1 = vdev_clock_seconds();
            if (vdev_optimizer_apply(m->opt, m->vars, g, 6) != VDEV_OK)
                bench_die("the second update");
            double t2 = vdev_clock_seconds();
            vdev_device_pop();
            if (s >= warm) {
                first += t1 - t0;
                second += t2 - t1;
            }
            in = y;
        }
        vdev_scope_end();
    }
    printf("Adam of chain3's 3 models, cpu backend: first application %.3f ms per step, the "
           "second on the same gradients %.3f ms\n",
           first * 1e3 / steps, second * 1e3 / steps);
    bench_chain_free(&c);
}

int main(int argc, char **argv)
{
    struct bench_args args;
    if (bench_args_parse(argc, argv, "bench_chain_turns", 0, &args))
        return 2;
    enum { MAX_TURNS = 10 };
    int turns = args.quick ? 3 : MAX_TURNS, steps = args.quick ? 10 : 40;
    double cpu[MAX_TURNS], gpu[MAX_TURNS];
    turns_of(0, 1, 2, cpu); /* untimed: the process's first pages */
    for (int r = 0; r < turns; r++) {
        turns_of(0, 1, steps, cpu + r);
        turns_of(1, 1, steps, gpu + r);
    }
    printf("chain3, %d turns of %d steps: cpu backend fastest %.3f ms, median %.3f ms; "
           "3 simulated GPUs fastest %.3f ms, median %.3f ms\n",
           turns, steps, fastest(cpu, turns), bench_median(cpu, turns), fastest(gpu, turns),
           bench_median(gpu, turns));
    adam_twice(50, args.quick ? 50 : 250);
    vdev_shutdown();
    return 0;
}
