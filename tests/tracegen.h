/* tracegen.h — generators of allocation traces (the format of DESIGN.md,
 * "Memory": "a ID BYTES", "f ID"), for the allocator's tests and benchmark:
 * families of traces drawn from a seed, so a policy is judged on many traces
 * of a kind, never tuned to one.
 *
 *  - tracegen_inference: the pattern of a convolutional network's inference
 *    (ResNet-50's layer shapes): weights live for the whole trace; each batch
 *    runs the network layer by layer, each op allocating its output and
 *    freeing its inputs when their last reader is done, so activations of
 *    about seven sizes come and go; a residual block keeps its input alive
 *    over its three convolutions, so large blocks are freed in another order
 *    than they were allocated; convolutions take short-lived workspaces of
 *    random sizes; and a few blocks made during a batch live on for one to
 *    three batches (results kept, caches), between the short-lived ones.
 *    What the seed chooses: the batch size (1 to 64), whether batch norm and
 *    ReLU are fused into the convolution or each make a tensor of their own,
 *    the workspaces' sizes, and where the long-lived blocks fall.
 *  - tracegen_random: sizes log-uniform between two bounds (rounded to 256
 *    bytes), a live set that walks at random between 0 and a cap, frees in
 *    random order (the kind of ../shared/traces/synthetic.trace.gz).
 *
 * Both write to a FILE (tests write a temporary file and load it with
 * vdev_trace_load; bench/bench_tracegen.c writes trace files). Everything is
 * static: each user includes what it needs. The random numbers are the
 * generator's own (xorshift64*), so a seed gives the same trace everywhere. */
#ifndef VDEV_TRACEGEN_H
#define VDEV_TRACEGEN_H

#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct tg_rng {
    uint64_t s;
};

static uint64_t tg_next(struct tg_rng *r)
{
    uint64_t x = r->s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    r->s = x;
    return x * 0x2545F4914F6CDD1Dull;
}

/* Uniform in [0, 1). */
static double tg_unit(struct tg_rng *r) { return (double)(tg_next(r) >> 11) / 9007199254740992.0; }

/* Uniform integer in [lo, hi]. */
static uint64_t tg_range(struct tg_rng *r, uint64_t lo, uint64_t hi)
{
    return lo + tg_next(r) % (hi - lo + 1);
}

/* ---- the writer: ids and events ---- */

struct tg_out {
    FILE *f;
    uint64_t next_id;
    uint64_t n_events;
};

static uint64_t tg_alloc(struct tg_out *o, uint64_t bytes)
{
    uint64_t id = o->next_id++;
    fprintf(o->f, "a %" PRIu64 " %" PRIu64 "\n", id, bytes ? bytes : 1);
    o->n_events++;
    return id;
}

static void tg_free(struct tg_out *o, uint64_t id)
{
    fprintf(o->f, "f %" PRIu64 "\n", id);
    o->n_events++;
}

/* ---- convolutional inference ---- */

struct tg_inference {
    uint64_t seed;
    int batches;      /* inference batches (default 4) */
    int batch;        /* images per batch; 0: the seed chooses 1 to 64 */
};

/* Blocks kept past their batch. */
struct tg_kept {
    uint64_t id;
    int until; /* freed at the start of this batch */
};

struct tg_net {
    struct tg_out *o;
    struct tg_rng *r;
    int fused;            /* batch norm and ReLU fused into the convolution */
    double p_keep;        /* chance that an op's output also leaves a long-lived block */
    struct tg_kept kept[256];
    int n_kept, batch_index;
};

/* A convolution's workspace: random size up to about the output's, freed
 * right after (cuDNN's scratch memory). */
static void tg_workspace(struct tg_net *n, uint64_t out_bytes)
{
    double u = tg_unit(n->r);
    if (u < 0.3)
        return; /* an algorithm without workspace */
    uint64_t ws = (uint64_t)((double)out_bytes * tg_unit(n->r) * 1.5) + 1024;
    tg_free(n->o, tg_alloc(n->o, ws));
}

/* Now and then a block made during the batch lives on for 1 to 3 batches. */
static void tg_maybe_keep(struct tg_net *n, uint64_t bytes)
{
    if (n->n_kept < 256 && tg_unit(n->r) < n->p_keep) {
        uint64_t b = bytes / tg_range(n->r, 1, 8) + 256;
        n->kept[n->n_kept].id = tg_alloc(n->o, b);
        n->kept[n->n_kept].until = n->batch_index + (int)tg_range(n->r, 1, 3);
        n->n_kept++;
    }
}

/* conv (+ batch norm + ReLU): input id `in` of in_bytes, output out_bytes;
 * frees the input if `free_in`. Returns the output's id. */
static uint64_t tg_conv(struct tg_net *n, uint64_t in, int free_in, uint64_t out_bytes, int relu)
{
    uint64_t y = tg_alloc(n->o, out_bytes);
    tg_workspace(n, out_bytes);
    if (free_in)
        tg_free(n->o, in);
    if (!n->fused) {
        uint64_t bn = tg_alloc(n->o, out_bytes); /* batch norm's output */
        tg_free(n->o, y);
        y = bn;
        if (relu) {
            uint64_t rl = tg_alloc(n->o, out_bytes);
            tg_free(n->o, y);
            y = rl;
        }
    }
    tg_maybe_keep(n, out_bytes);
    return y;
}

static uint64_t tg_inference_trace(FILE *f, const struct tg_inference *opt)
{
    struct tg_rng r = {opt->seed * 0x9E3779B97F4A7C15ull + 0x1234567ull};
    tg_next(&r);
    struct tg_out o = {f, 0, 0};
    static const uint64_t pick[7] = {1, 2, 4, 8, 16, 32, 64};
    uint64_t N = opt->batch > 0 ? (uint64_t)opt->batch : pick[tg_range(&r, 0, 6)];
    int batches = opt->batches > 0 ? opt->batches : 4;
    struct tg_net n = {.o = &o, .r = &r};
    n.fused = tg_unit(&r) < 0.5;
    n.p_keep = 0.01 + 0.04 * tg_unit(&r);
    fprintf(f,
            "# trace v1 model=resnet50-inference-like generator=tracegen_inference seed=%" PRIu64
            " batch=%" PRIu64 " batches=%d fused=%d p_keep=%.3f note=weights live throughout; "
            "per batch the layers of ResNet-50 (bottlenecks 3,4,6,3), outputs allocated and "
            "inputs freed after their last reader, residual inputs alive over their block, "
            "workspaces, a few blocks kept for 1-3 batches\n",
            opt->seed, N, batches, n.fused, n.p_keep);
    /* Weights: every convolution's kernel and its batch norm's four vectors. */
    static const int blocks[4] = {3, 4, 6, 3}, mid[4] = {64, 128, 256, 512};
    static const int side[4] = {56, 28, 14, 7};
    tg_alloc(&o, 7 * 7 * 3 * 64 * 4);
    for (int k = 0; k < 4; k++)
        tg_alloc(&o, 64 * 4);
    int cin = 64;
    for (int s = 0; s < 4; s++)
        for (int b = 0; b < blocks[s]; b++) {
            int m = mid[s], cout = 4 * m;
            uint64_t w[4] = {(uint64_t)cin * m * 4, (uint64_t)9 * m * m * 4,
                             (uint64_t)m * cout * 4, b == 0 ? (uint64_t)cin * cout * 4 : 0};
            int ch[4] = {m, m, cout, cout};
            for (int i = 0; i < 4; i++) {
                if (!w[i])
                    continue;
                tg_alloc(&o, w[i]);
                for (int k = 0; k < 4; k++)
                    tg_alloc(&o, (uint64_t)ch[i] * 4);
            }
            cin = cout;
        }
    tg_alloc(&o, 2048 * 1000 * 4);
    tg_alloc(&o, 1000 * 4);
    for (int bi = 0; bi < batches; bi++) {
        n.batch_index = bi;
        for (int k = 0; k < n.n_kept;) /* blocks whose time has come */
            if (n.kept[k].until <= bi) {
                tg_free(&o, n.kept[k].id);
                n.kept[k] = n.kept[--n.n_kept];
            } else {
                k++;
            }
        uint64_t x = tg_alloc(&o, N * 224 * 224 * 3 * 4);
        uint64_t h = tg_conv(&n, x, 1, N * 112 * 112 * 64 * 4, 1);
        uint64_t p = tg_alloc(&o, N * 56 * 56 * 64 * 4); /* max pool */
        tg_free(&o, h);
        h = p;
        for (int s = 0; s < 4; s++)
            for (int b = 0; b < blocks[s]; b++) {
                uint64_t hw = (uint64_t)side[s] * side[s], m = (uint64_t)mid[s];
                uint64_t in = h;
                uint64_t a = tg_conv(&n, in, 0, N * hw * m * 4, 1);
                uint64_t c = tg_conv(&n, a, 1, N * hw * m * 4, 1);
                uint64_t d = tg_conv(&n, c, 1, N * hw * 4 * m * 4, 0);
                uint64_t sc = in;
                if (b == 0) /* projection shortcut */
                    sc = tg_conv(&n, in, 0, N * hw * 4 * m * 4, 0);
                uint64_t y = tg_alloc(&o, N * hw * 4 * m * 4); /* the residual add */
                tg_free(&o, d);
                if (sc != in)
                    tg_free(&o, sc);
                tg_free(&o, in);
                if (!n.fused) {
                    uint64_t rl = tg_alloc(&o, N * hw * 4 * m * 4);
                    tg_free(&o, y);
                    y = rl;
                }
                h = y;
            }
        uint64_t pooled = tg_alloc(&o, N * 2048 * 4);
        tg_free(&o, h);
        uint64_t logits = tg_alloc(&o, N * 1000 * 4);
        tg_free(&o, pooled);
        uint64_t prob = tg_alloc(&o, N * 1000 * 4);
        tg_free(&o, logits);
        tg_maybe_keep(&n, N * 1000 * 4);
        tg_free(&o, prob);
    }
    return o.n_events;
}

/* ---- random sizes, random-order frees ---- */

struct tg_random {
    uint64_t seed;
    uint64_t events;              /* default 200,000 */
    uint64_t min_bytes, max_bytes; /* default 256 B .. 64 MiB */
    uint64_t cap_bytes;           /* most live bytes; default 2 GiB */
};

static uint64_t tg_random_trace(FILE *f, const struct tg_random *opt)
{
    struct tg_rng r = {opt->seed * 0x9E3779B97F4A7C15ull + 0x7654321ull};
    tg_next(&r);
    uint64_t events = opt->events ? opt->events : 200000;
    uint64_t lo = opt->min_bytes ? opt->min_bytes : 256, hi = opt->max_bytes ? opt->max_bytes : 64ull << 20;
    uint64_t cap = opt->cap_bytes ? opt->cap_bytes : 2ull << 30;
    fprintf(f,
            "# trace v1 model=random generator=tracegen_random seed=%" PRIu64 " events=%" PRIu64
            " note=sizes log-uniform %" PRIu64 "..%" PRIu64 " B rounded to 256 B, live set random "
            "walk 0..%" PRIu64 " B, random-order frees\n",
            opt->seed, events, lo, hi, cap);
    struct tg_out o = {f, 0, 0};
    uint64_t *ids = malloc(sizeof *ids * (size_t)events), *sz = malloc(sizeof *sz * (size_t)events);
    if (!ids || !sz) {
        free(ids);
        free(sz);
        return 0;
    }
    uint64_t n_live = 0, live = 0;
    double llo = log((double)lo), lhi = log((double)hi);
    while (o.n_events < events) {
        uint64_t b = ((uint64_t)exp(llo + (lhi - llo) * tg_unit(&r)) + 255) & ~(uint64_t)255;
        /* Allocate with even odds while there is room, else free. */
        if (n_live == 0 || (tg_unit(&r) < 0.5 && live + b <= cap)) {
            ids[n_live] = tg_alloc(&o, b);
            sz[n_live++] = b;
            live += b;
        } else {
            uint64_t k = tg_range(&r, 0, n_live - 1);
            tg_free(&o, ids[k]);
            live -= sz[k];
            ids[k] = ids[--n_live];
            sz[k] = sz[n_live];
        }
    }
    free(ids);
    free(sz);
    return o.n_events;
}

#endif
