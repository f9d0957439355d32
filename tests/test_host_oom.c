/* test_host_oom.c — the host refusing memory, at every allocation in turn.
 *
 * Every host allocation of the core library goes through one door (src/base/host_mem.c),
 * which a test can tell to refuse the n-th allocation of its thread. Each scenario
 * below runs once for each n from 1 up, the n-th refused, until a run makes fewer
 * than n, then once with nothing refused (host_oom.h). In every run: a call
 * that fails must fail with VDEV_ERR_OOM, and only a call in which the refusal came;
 * the same call made again (nothing refused now) must succeed, and the run then goes
 * on to the end, where it must give what the run without a refusal gave, to the bit.
 * So a refusal anywhere is reported, loses nothing and leaves nothing half done; what
 * is left unfreed on any path the sanitizer build's leak check reports at exit.
 *
 * The scenarios: the allocator over a fake device (placements against the policy's
 * model while long bins get trees, records, regions, stream-ordered frees and a trace
 * file), and a training run on a simulated GPU from start-up to shutdown (an MLP,
 * tapes, Adam), whose device memory must all be back at the end. */
#define _GNU_SOURCE
#include "alloc_fake.h"

#include "alloc/alloc_impl.h" /* the tree bits: the scenario must make a tree */
#include "host_oom.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* ---- the allocator ------------------------------------------------------- */

static vdev_alloc_t *make_alloc(struct fake_source *s, enum vdev_memory_policy policy,
                                uint64_t limit, vdev_alloc_trace_t *trace)
{
    struct vdev_alloc_config cfg = {
        .name = "/device:GPU:1",
        .limit_bytes = limit,
        .policy = policy,
        .trace = trace,
        .source = {.reserve = fake_reserve, .release = fake_release, .event_done = ev_done,
                   .event_wait = ev_wait, .event_drop = ev_drop, .sync = fake_sync, .ctx = s},
    };
    vdev_alloc_t *a = NULL;
    RETRY_OK(vdev_alloc_new(&cfg, &a));
    return a;
}

/* Long bins (so trees are made, grown with the records and dropped), every placement
 * against ref_place: a tree the host could not hold must leave the bin a list that
 * places the same. The digest is the placements. */
static uint64_t alloc_placements(void)
{
    struct fake_source s;
    fake_init(&s);
    vdev_alloc_t *a = make_alloc(&s, VDEV_POLICY_PREALLOCATE, 16ull << 20, NULL);
    if (!a)
        return 0;
    uint64_t base = s.reg[0].base, end = base + s.reg[0].bytes, h = 0, rng = 99;
    struct model m = {0};
    int trees = 0;
    for (int step = 0; step < 3000; step++) {
        uint64_t units = step < 1200 ? 4 + rng_next(&rng) % 4 : 1 + rng_next(&rng) % 12;
        if (step == 1200) /* every other block freed: a bin of 600 holes */
            for (int i = m.n - 1; i >= 0; i -= 2)
                vdev_alloc_free(a, model_take(&m, i).handle);
        if (step >= 1200 && m.n && rng_unit(&rng) < 0.45) {
            vdev_alloc_free(a, model_take(&m, (int)(rng_next(&rng) % (uint64_t)m.n)).handle);
            continue;
        }
        uint64_t sz = units * 256, want = ref_place(&m, base, end, sz);
        struct vdev_block b;
        RETRY_OK(vdev_alloc_malloc(a, sz, &b));
        CHECK_EQ_U64((uintptr_t)b.ptr, want);
        model_add(&m, (struct mblock){(uintptr_t)b.ptr, sz, b.handle});
        h = mix(h, (uintptr_t)b.ptr - base);
        trees += a->tmap != 0;
    }
    if (run_n == 0)
        CHECK(trees > 500); /* the run exercises the trees */
    CHECK_OK(vdev_alloc_check(a));
    while (m.n)
        vdev_alloc_free(a, model_take(&m, m.n - 1).handle);
    CHECK_OK(vdev_alloc_check(a));
    free(m.b);
    vdev_alloc_destroy(a);
    return h;
}

/* Growth (regions come and go), stream-ordered frees (the pending queue grows) and a
 * trace (its ids grow with the records), the full state checked after every step. The
 * digest is the trace file's bytes: a refusal must not lose or repeat a line. */
static uint64_t alloc_growth(void)
{
    char path[64];
    snprintf(path, sizeof path, "/tmp/vdev-host-oom-%d.trace", (int)getpid());
    vdev_alloc_trace_t *t = NULL;
    RETRY_OK(vdev_alloc_trace_open(path, &t));
    struct fake_source s;
    fake_init(&s);
    const uint64_t limit = 1ull << 30;
    vdev_alloc_t *a = make_alloc(&s, VDEV_POLICY_GROW, limit, t);
    struct model m = {0};
    static struct fake_event ev[400];
    memset(ev, 0, sizeof ev);
    uint64_t rng = 7;
    for (int step = 0; a && step < 800; step++) {
        if (m.n == 0 || rng_unit(&rng) < 0.55) {
            uint64_t bytes = 1 + rng_next(&rng) % (4u << 20);
            struct vdev_block b;
            RETRY_OK(vdev_alloc_malloc(a, bytes, &b));
            model_add(&m, (struct mblock){(uintptr_t)b.ptr, (bytes + 255) / 256 * 256, b.handle});
        } else {
            struct mblock x = model_take(&m, (int)(rng_next(&rng) % (uint64_t)m.n));
            if (step < 400) {
                ev[step].done = step % 3 == 0; /* the rest pass when malloc waits on them */
                vdev_alloc_free_after(a, x.handle, &ev[step]);
            } else {
                vdev_alloc_free(a, x.handle);
            }
        }
        if (step == 400) {
            vdev_alloc_flush_pending(a);
            for (int i = 0; i < 400; i++)
                ev[i].done = 1;
            vdev_alloc_flush_pending(a);
        }
        if (check_state(a, &s, &m, limit))
            break;
    }
    while (a && m.n)
        vdev_alloc_free(a, model_take(&m, m.n - 1).handle);
    vdev_alloc_destroy(a);
    vdev_alloc_trace_close(t);
    free(m.b);
    CHECK_EQ_U64(fake_reserved(&s), 0);
    uint64_t h = 0;
    FILE *f = fopen(path, "r");
    CHECK(f != NULL);
    char line[256];
    while (f && fgets(line, sizeof line, f))
        if (line[0] != '#') /* a failed allocation's comment, "# oom BYTES" */
            for (const char *c = line; *c; c++)
                h = mix(h, (uint64_t)(unsigned char)*c);
    if (f)
        fclose(f);
    unlink(path);
    return h;
}

/* ---- a training run ------------------------------------------------------ */

/* Start-up, an MLP, three Adam steps under tapes, the losses and the variables read
 * back, everything freed (every byte of the device back), shutdown. The digest is
 * the bits of the losses and variables. */
static uint64_t training(void)
{
    check_fresh("1x64MiB");
    RETRY_OK(vdev_init());
    const int64_t sizes[3] = {12, 16, 3};
    vdev_mlp_t *m;
    RETRY_PTR(m, vdev_mlp_new(sizes, 3, VDEV_ACT_TANH, VDEV_ACT_NONE, 11));
    vdev_optimizer_t *o;
    RETRY_PTR(o, vdev_adam_new(0.01f, 0.9f, 0.999f, 1e-7f));
    vdev_tensor_t *vars[8];
    int nv = vdev_mlp_variables(m, vars, 8);
    CHECK(nv == 4);
    uint64_t h = 0;
    for (int step = 0; step < 3; step++)
        h = train(h, m, o, sizes, 3, step);
    h = tensors_digest(h, vars, nv);
    vdev_optimizer_free(o);
    vdev_mlp_free(m);
    struct vdev_memory_info mi;
    RETRY_OK(vdev_memory_info("GPU:0", &mi));
    CHECK_EQ_U64(mi.bytes_in_use, 0);
    vdev_shutdown();
    return h;
}

int main(void)
{
    sweep("allocator, long bins", alloc_placements);
    sweep("allocator, growth, pending frees, trace", alloc_growth);
    sweep("training on a simulated GPU", training);
    return check_done();
}
