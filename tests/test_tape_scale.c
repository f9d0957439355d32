/* test_tape_scale.c — the tape's bookkeeping grows linearly with what it
 * holds: watching N variables, recording ops that read them and asking for
 * the N gradients compare a number of tape entries proportional to N (the
 * tape's own count, vdev_tape_lookup_steps, not a clock), where searches by
 * scan once made each of the three quadratic; and the gradients are right. */
#define _GNU_SOURCE
#include "check.h"
#include "ops/ops.h"

#include <stdlib.h>

#define N 3000
/* steps per variable, generously: some 25 lookups of about one probe each
 * (a search by scan took N steps for each, some 6000 per variable here) */
#define STEPS_PER_ITEM 100

static const int64_t SHAPE[1] = {1};

/* sum_i v_i * v_i, recorded as N products and N - 1 sums; the gradient of
 * v_i is 2 v_i. */
static void check_n_variables(unsigned flags)
{
    vdev_tensor_t **v = malloc(N * sizeof *v), **g = malloc(N * sizeof *g);
    CHECK(v && g);
    for (int i = 0; i < N; i++)
        v[i] = vdev_variable(vdev_tensor_fill(SHAPE, 1, VDEV_F32, (double)(i % 7)));
    CHECK_OK(vdev_scope_begin());
    vdev_tape_t *t = vdev_tape_begin_ex(flags);
    CHECK(t != NULL);
    vdev_tape_lookup_steps = 0;
    if (flags & VDEV_TAPE_WATCH_EXPLICIT)
        for (int i = 0; i < N; i++)
            CHECK_OK(vdev_tape_watch(t, v[i]));
    CHECK_OK(vdev_tape_watch(t, v[0])); /* again: a no-op */
    vdev_tensor_t *acc = vdev_mul(v[0], v[0]);
    for (int i = 1; i < N; i++)
        acc = vdev_add(acc, vdev_mul(v[i], v[i]));
    CHECK(vdev_tape_watched_variables(t, NULL, 0) == N);
    CHECK_OK(vdev_tape_gradient(t, acc, v, N, g));
    uint64_t steps = vdev_tape_lookup_steps;
    if (steps > (uint64_t)STEPS_PER_ITEM * N)
        check_fail(__FILE__, __LINE__, "%llu lookup steps for %d variables (flags %u)",
                   (unsigned long long)steps, N, flags);
    for (int i = 0; i < N; i++)
        CHECK(vdev_tensor_item(g[i]) == 2.0f * (float)(i % 7));
    vdev_tape_end(t);
    vdev_scope_end();
    for (int i = 0; i < N; i++)
        vdev_tensor_free(v[i]);
    free(v);
    free(g);
}

int main(void)
{
    check_fresh(NULL);
    check_n_variables(0);
    check_n_variables(VDEV_TAPE_WATCH_EXPLICIT);
    return check_done();
}
