/* test_alloc_tracegen.c — the allocator on generated traces (tracegen.h):
 * the convolutional-inference family (weights throughout, activations of
 * about seven sizes, residual inputs freed out of order, workspaces, a few
 * blocks kept across batches) and the random family.
 *
 * For each trace: it loads and replays (vdev_replay_run, no timing) with a
 * capacity ratio of at least 1 and at most a bound that guards against a
 * policy that packs worse (inference 1.30, random 1.50; the policy of
 * src/alloc/alloc.c needs at most 1.22 and 1.43 on these seeds); then it is
 * replayed event by event in a one-region allocator of exactly its minimum
 * capacity and in a growing one, with the invariant walk (vdev_alloc_check)
 * every 64 events and at the end, and the bytes in use equal to the trace's
 * own count after every event. Also: a seed gives the same trace twice,
 * another seed another trace. */
#define _GNU_SOURCE
#include "alloc/replay.h"
#include "check.h"
#include "tracegen.h"

#include <sys/stat.h>
#include <unistd.h>

static char dir[256];

/* Writes the trace of `kind` and `seed` to a file; returns its path. */
static const char *write_trace(const char *kind, uint64_t seed, char *path, size_t cap)
{
    snprintf(path, cap, "%s/%s-%llu.trace", dir, kind, (unsigned long long)seed);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f)
        return path;
    uint64_t n;
    if (!strcmp(kind, "inference")) {
        struct tg_inference o = {.seed = seed};
        n = tg_inference_trace(f, &o);
    } else {
        struct tg_random o = {.seed = seed, .events = 20000, .cap_bytes = 512ull << 20};
        n = tg_random_trace(f, &o);
    }
    CHECK(n > 0);
    CHECK(fclose(f) == 0);
    return path;
}

static uint64_t next_base = 1ull << 40;
static enum vdev_status src_reserve(void *ctx, uint64_t bytes, void **base)
{
    *base = (void *)(uintptr_t)next_base;
    next_base += bytes + (1u << 20);
    return VDEV_OK;
}
static void src_release(void *ctx, void *base, uint64_t bytes) {}

/* Replays t event by event, checking as it goes; 1 if every allocation fit. */
static int replay_checked(const struct vdev_trace *t, enum vdev_memory_policy policy, uint64_t limit)
{
    struct vdev_alloc_config cfg = {.name = "tracegen",
                                    .limit_bytes = limit,
                                    .policy = policy,
                                    .source = {.reserve = src_reserve, .release = src_release}};
    vdev_alloc_t *a;
    CHECK_OK(vdev_alloc_new(&cfg, &a));
    uint32_t *h = calloc(t->n_slots ? t->n_slots : 1, sizeof *h);
    uint64_t *sz = calloc(t->n_slots ? t->n_slots : 1, sizeof *sz);
    CHECK(h && sz);
    int fits = 1, checks_ok = 1, in_use_ok = 1;
    uint64_t live = 0;
    for (uint64_t i = 0; i < t->n_events && fits && h && sz; i++) {
        const struct vdev_trace_event *e = &t->events[i];
        if (e->bytes) {
            struct vdev_block b;
            if (vdev_alloc_malloc(a, e->bytes, &b) != VDEV_OK) {
                fits = 0;
                break;
            }
            h[e->slot] = b.handle;
            sz[e->slot] = (e->bytes + 255) & ~(uint64_t)255;
            live += sz[e->slot];
        } else {
            vdev_alloc_free(a, h[e->slot]);
            live -= sz[e->slot];
        }
        uint64_t in_use, reserved;
        vdev_alloc_usage(a, &in_use, &reserved);
        in_use_ok &= in_use == live;
        if (i % 64 == 63)
            checks_ok &= vdev_alloc_check(a) == VDEV_OK;
    }
    checks_ok &= vdev_alloc_check(a) == VDEV_OK;
    if (!checks_ok)
        printf("  %s: %s\n", t->path, vdev_last_error());
    CHECK(checks_ok);
    CHECK(in_use_ok);
    free(h);
    free(sz);
    vdev_alloc_destroy(a);
    return fits;
}

static double one(const char *kind, uint64_t seed, double bound)
{
    char path[512];
    write_trace(kind, seed, path, sizeof path);
    struct vdev_trace *t = NULL;
    CHECK_OK(vdev_trace_load(path, &t));
    if (!t)
        return 1.0;
    struct vdev_replay_options o = {.repeats = -1, .precision = 1e-4};
    struct vdev_replay_result r;
    CHECK_OK(vdev_replay_run(t, &o, &r));
    CHECK(r.capacity_ratio >= 1.0);
    if (r.capacity_ratio > bound)
        printf("  %s-%llu: capacity ratio %.4f above %.2f\n", kind, (unsigned long long)seed,
               r.capacity_ratio, bound);
    CHECK(r.capacity_ratio <= bound);
    CHECK(replay_checked(t, VDEV_POLICY_PREALLOCATE, r.min_capacity_bytes));
    CHECK(replay_checked(t, VDEV_POLICY_GROW, UINT64_MAX));
    vdev_trace_free(t);
    unlink(path);
    return r.capacity_ratio;
}

/* The bytes of a file (NULL on error); *n its length. */
static char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    if (f && fseek(f, 0, SEEK_END) == 0) {
        long len = ftell(f);
        if (len >= 0 && fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)len + 1)) &&
            fread(buf, 1, (size_t)len, f) != (size_t)len) {
            free(buf);
            buf = NULL;
        }
        *n = len >= 0 ? (size_t)len : 0;
    }
    if (f)
        fclose(f);
    return buf;
}

static void same_seed_same_trace(void)
{
    char p1[512], p2[512];
    write_trace("inference", 5, p1, sizeof p1);
    size_t n1 = 0, n2 = 0;
    char *a = slurp(p1, &n1);
    write_trace("inference", 5, p2, sizeof p2);
    char *b = slurp(p2, &n2);
    CHECK(a && b && n1 == n2 && memcmp(a, b, n1) == 0);
    free(b);
    write_trace("inference", 6, p2, sizeof p2);
    b = slurp(p2, &n2);
    CHECK(a && b && (n1 != n2 || memcmp(a, b, n1) != 0));
    free(a);
    free(b);
    unlink(p1);
    unlink(p2);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/vdev_test_tracegen_%d", (int)getpid());
    CHECK(mkdir(dir, 0755) == 0);
    same_seed_same_trace();
    double lg = 0, worst = 0;
    for (uint64_t s = 1; s <= 12; s++) {
        double r = one("inference", s, 1.30);
        lg += log(r);
        worst = r > worst ? r : worst;
    }
    printf("inference family, 12 seeds: capacity ratio geomean %.4f, worst %.4f\n", exp(lg / 12),
           worst);
    for (uint64_t s = 1; s <= 3; s++)
        printf("random-%llu: capacity ratio %.4f\n", (unsigned long long)s, one("random", s, 1.50));
    CHECK(rmdir(dir) == 0);
    return check_done();
}
