/* test_optimizer_freed_vars.c — an optimizer that outlives variables it
 * updated. The slots of a freed variable (Adam's m and v, SGD's velocity,
 * the clipping's scratch; handed out by vdev_optimizer_slots or not,
 * pending from a prepare or committed) are freed at the optimizer's next
 * call, whichever it is (an update of other variables, a slot look-up, a
 * release, a setter), and their handles die: the bytes in use on the
 * device come back exactly to what they were before the variable was made,
 * also over many models made and freed beside one optimizer, and while
 * another thread updates with the same optimizer. A variable whose handle
 * reuses the freed one's place in the handle table starts with new slots,
 * zeros, never the old ones. A freed variable's weight decay exclusion
 * goes at the same call: over 10,000 variables made, excluded and freed the
 * exclusion list holds only the live ones and the one freed since the last
 * call, and a variable made in a freed one's place is decayed.
 * vdev_optimizer_slots, vdev_optimizer_apply and vdev_optimizer_prepare
 * refuse one of the optimizer's own slots as a variable, with the exact
 * message naming its index, and nothing changed: no slot made (for the
 * call's other variables either), none handed out (a velocity given back
 * stays given back, and switching momentum off frees it), no variable
 * updated, the iteration count as it was. */
#include "check.h"
#include "nn/nn.h"
#include "vdev/nn.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define ROWS 64
#define COLS 48
#define NUMEL (ROWS * COLS)
#define BYTES ((uint64_t)NUMEL * 4) /* 12 KiB: a multiple of 256, no rounding */

static const int64_t shape[2] = {ROWS, COLS};

static uint64_t in_use(void)
{
    struct vdev_memory_info mi;
    if (vdev_memory_info("GPU:0", &mi) != VDEV_OK)
        return UINT64_MAX;
    return mi.bytes_in_use;
}

static vdev_tensor_t *var_of(float v)
{
    return vdev_variable(vdev_tensor_fill(shape, 2, VDEV_F32, v));
}

static vdev_tensor_t *grad_of(float v)
{
    return vdev_tensor_fill(shape, 2, VDEV_F32, v);
}

/* Whether every element of t is 0. */
static int all_zero(vdev_tensor_t *t)
{
    static float h[NUMEL];
    if (vdev_tensor_to_host(t, h, sizeof h) != VDEV_OK)
        return 0;
    for (int i = 0; i < NUMEL; i++)
        if (h[i] != 0)
            return 0;
    return 1;
}

/* The handle is dead (its owner freed it). */
static int dead(vdev_tensor_t *t)
{
    return vdev_tensor_numel(t) == -1 && vdev_last_status() == VDEV_ERR_INVALID_ARG;
}

/* The optimizer's calls that free a freed variable's slots. */
enum next_call { NEXT_APPLY, NEXT_SLOTS, NEXT_RELEASE, NEXT_SET, NEXT_COUNT };

static void next_call(vdev_optimizer_t *o, int adam, enum next_call c, vdev_tensor_t *w,
                      vdev_tensor_t *gw)
{
    vdev_tensor_t *sl[3];
    switch (c) {
    case NEXT_APPLY:
        CHECK_OK(vdev_optimizer_apply(o, &w, &gw, 1));
        break;
    case NEXT_SLOTS:
        CHECK(vdev_optimizer_slots(o, w, sl, NULL, 3) == (adam ? 2 : 1));
        break;
    case NEXT_RELEASE:
        CHECK_OK(vdev_optimizer_slots_release(o, NULL));
        break;
    default:
        CHECK_OK(adam ? vdev_adam_set(o, 0.01f, 0.9f, 0.999f, 1e-7f) : vdev_sgd_set(o, 0.1f, 0.9f));
        break;
    }
}

/* A variable updated, its slots handed out, then freed: its slots stay
 * until the optimizer's next call (each kind of call in turn), which frees
 * them, every byte, and kills the handles handed out. Another variable w,
 * updated before, keeps its slots. */
static void freed_then_next_call(int adam)
{
    check_fresh("1x1GiB");
    int n = adam ? 2 : 1;
    vdev_optimizer_t *o =
        adam ? vdev_adam_new(0.01f, 0.9f, 0.999f, 1e-7f) : vdev_sgd_new(0.1f, 0.9f);
    vdev_tensor_t *w = var_of(1), *gw = grad_of(0.5f);
    CHECK(o && w && gw);
    CHECK_OK(vdev_optimizer_apply(o, &w, &gw, 1));
    vdev_tensor_t *wslots[3] = {NULL, NULL, NULL};
    CHECK(vdev_optimizer_slots(o, w, wslots, NULL, 3) == n);
    for (int c = 0; c < NEXT_COUNT; c++) {
        uint64_t base = in_use();
        vdev_tensor_t *v = var_of(2), *g = grad_of(0.25f);
        CHECK(v && g);
        CHECK_OK(vdev_optimizer_apply(o, &v, &g, 1));
        vdev_tensor_t *sl[3] = {NULL, NULL, NULL};
        CHECK(vdev_optimizer_slots(o, v, sl, NULL, 3) == n);
        CHECK_EQ_U64(in_use(), base + (uint64_t)(2 + n) * BYTES);
        vdev_tensor_free(g);
        vdev_tensor_free(v);
        /* the optimizer has not run since: the slots are still there */
        CHECK_EQ_U64(in_use(), base + (uint64_t)n * BYTES);
        next_call(o, adam, (enum next_call)c, w, gw);
        CHECK_EQ_U64(in_use(), base);
        for (int k = 0; k < n; k++)
            CHECK(dead(sl[k]));
        /* w's stay, the same ones */
        vdev_tensor_t *again[3] = {NULL, NULL, NULL};
        CHECK(vdev_optimizer_slots(o, w, again, NULL, 3) == n);
        for (int k = 0; k < n; k++)
            CHECK(again[k] == wslots[k] && vdev_tensor_numel(again[k]) == NUMEL);
    }
    vdev_optimizer_free(o);
    vdev_tensor_free(w);
    vdev_tensor_free(gw);
    CHECK_NO_LEAK("GPU:0");
}

/* Slots made by a prepare (pending, not yet kept by an update) of a
 * variable then freed go too, at the next update of another variable. */
static void pending_freed(void)
{
    check_fresh("1x1GiB");
    vdev_optimizer_t *o = vdev_adam_new(0.01f, 0.9f, 0.999f, 1e-7f);
    vdev_tensor_t *w = var_of(1), *gw = grad_of(0.5f);
    CHECK(o && w && gw);
    CHECK_OK(vdev_optimizer_apply(o, &w, &gw, 1));
    uint64_t base = in_use();
    vdev_tensor_t *v = var_of(2);
    CHECK(v != NULL);
    CHECK_OK(vdev_optimizer_prepare(o, &v, 1));
    CHECK_EQ_U64(in_use(), base + 3 * BYTES);
    vdev_tensor_free(v);
    CHECK_OK(vdev_optimizer_apply(o, &w, &gw, 1));
    CHECK_EQ_U64(in_use(), base);
    vdev_optimizer_free(o);
    vdev_tensor_free(w);
    vdev_tensor_free(gw);
    CHECK_NO_LEAK("GPU:0");
}

/* A new variable that takes the freed one's place in the handle table (same
 * index, the next generation) gets new slots, zeros, and the clipping's
 * scratch anew: exactly the bytes the first variable took with its slots,
 * no more. */
static void reused_handle(void)
{
    check_fresh("1x1GiB");
    vdev_optimizer_t *o = vdev_adam_new(0.01f, 0.9f, 0.999f, 1e-7f);
    CHECK(o != NULL);
    CHECK_OK(vdev_optimizer_set_clipping(o, 1.0f, 0, 0));
    uint64_t base = in_use();
    vdev_tensor_t *v = var_of(1), *g = grad_of(0.5f);
    CHECK(v && g);
    vdev_tensor_t *old[2] = {NULL, NULL};
    CHECK(vdev_optimizer_slots(o, v, old, NULL, 2) == 2);
    uint64_t with_slots = in_use(); /* v, g, m, v, the clipping's buffer and norm */
    CHECK_OK(vdev_optimizer_apply(o, &v, &g, 1));
    CHECK(!all_zero(old[0]) && !all_zero(old[1]));
    uint64_t hv = (uint64_t)(uintptr_t)v;
    vdev_tensor_free(g);
    vdev_tensor_free(v); /* last: its table slot is the next one taken */
    vdev_tensor_t *c = var_of(3), *gc = grad_of(0.5f);
    CHECK(c && gc);
    uint64_t hc = (uint64_t)(uintptr_t)c;
    CHECK_EQ_U64(hc & 0xffffffffu, hv & 0xffffffffu); /* v's place in the table */
    CHECK(hc != hv);                                  /* at another generation */
    vdev_tensor_t *fresh[2] = {NULL, NULL};
    CHECK(vdev_optimizer_slots(o, c, fresh, NULL, 2) == 2);
    CHECK(fresh[0] && fresh[1] && fresh[0] != old[0] && fresh[1] != old[1]);
    CHECK(all_zero(fresh[0]) && all_zero(fresh[1]));
    CHECK(dead(old[0]) && dead(old[1]));
    CHECK_EQ_U64(in_use(), with_slots);
    vdev_optimizer_free(o);
    vdev_tensor_free(c);
    vdev_tensor_free(gc);
    CHECK_EQ_U64(in_use(), base);
    CHECK_NO_LEAK("GPU:0");
}

/* A long-running program: one optimizer, many models made, trained a step
 * and freed. After each model's free the optimizer's next call brings the
 * bytes in use back to what they were before the model. */
static void many_models(void)
{
    check_fresh("1x1GiB");
    vdev_optimizer_t *o = vdev_adam_new(0.01f, 0.9f, 0.999f, 1e-7f);
    CHECK(o != NULL);
    uint64_t base = in_use();
    int64_t sizes[3] = {32, 64, 8};
    for (int round = 0; round < 40; round++) {
        vdev_mlp_t *m = vdev_mlp_new(sizes, 3, VDEV_ACT_RELU, VDEV_ACT_NONE, (uint64_t)round);
        vdev_tensor_t *vars[4] = {NULL, NULL, NULL, NULL}, *grads[4] = {NULL, NULL, NULL, NULL};
        CHECK(m && vdev_mlp_variables(m, vars, 4) == 4);
        for (int i = 0; i < 4; i++) {
            int nd = vdev_tensor_ndim(vars[i]);
            int64_t s[2] = {vdev_tensor_dim(vars[i], 0), nd > 1 ? vdev_tensor_dim(vars[i], 1) : 1};
            grads[i] = vdev_tensor_fill(s, nd, VDEV_F32, 0.125f);
        }
        CHECK_OK(vdev_optimizer_apply(o, vars, grads, 4));
        for (int i = 0; i < 4; i++)
            vdev_tensor_free(grads[i]);
        vdev_mlp_free(m);
        CHECK_OK(vdev_optimizer_slots_release(o, NULL));
        CHECK_EQ_U64(in_use(), base);
    }
    vdev_optimizer_free(o);
    CHECK_NO_LEAK("GPU:0");
}

/* One thread updates w over and over while another makes variables, has
 * the same optimizer update them and hand their slots out, and frees them:
 * afterwards only w's slots are left. */
static vdev_optimizer_t *th_opt;
static vdev_tensor_t *th_w, *th_gw;
static atomic_int th_fail;

static void *th_body(void *arg)
{
    int id = (int)(intptr_t)arg;
    for (int i = 0; i < 200; i++) {
        if (id == 0) {
            if (vdev_optimizer_apply(th_opt, &th_w, &th_gw, 1) != VDEV_OK)
                atomic_fetch_add(&th_fail, 1);
            continue;
        }
        vdev_tensor_t *v = var_of(1), *g = grad_of(0.5f), *sl[2];
        if (!v || !g || vdev_optimizer_apply(th_opt, &v, &g, 1) != VDEV_OK ||
            vdev_optimizer_slots(th_opt, v, sl, NULL, 2) != 2)
            atomic_fetch_add(&th_fail, 1);
        vdev_tensor_free(g);
        vdev_tensor_free(v);
    }
    return NULL;
}

static void two_threads(void)
{
    check_fresh("1x1GiB");
    th_opt = vdev_adam_new(0.01f, 0.9f, 0.999f, 1e-7f);
    th_w = var_of(1);
    th_gw = grad_of(0.5f);
    CHECK(th_opt && th_w && th_gw);
    CHECK_OK(vdev_optimizer_apply(th_opt, &th_w, &th_gw, 1));
    uint64_t base = in_use();
    atomic_store(&th_fail, 0);
    CHECK(check_run_threads(2, th_body) == 2);
    CHECK_EQ_U64(atomic_load(&th_fail), 0);
    CHECK_OK(vdev_optimizer_slots_release(th_opt, NULL));
    CHECK_EQ_U64(in_use(), base);
    vdev_optimizer_free(th_opt);
    vdev_tensor_free(th_w);
    vdev_tensor_free(th_gw);
    CHECK_NO_LEAK("GPU:0");
}

/* fn, the index of the variable, the slot's name */
static const char *const OWN_SLOT =
    "%s: tensor %d is one of the optimizer's own slots (\"%s\"), not a variable it updates";

/* vdev_optimizer_slots(opt, s) of opt's own slot s is refused with exactly
 * OWN_SLOT naming it, -1, and nothing made (the bytes in use as before). */
static void refused(vdev_optimizer_t *o, vdev_tensor_t *s, const char *name)
{
    char want[256];
    snprintf(want, sizeof want, OWN_SLOT, "vdev_optimizer_slots", 0, name);
    uint64_t before = in_use();
    vdev_tensor_t *out[3] = {NULL, NULL, NULL};
    const char *names[3] = {NULL, NULL, NULL};
    vdev_clear_error();
    CHECK(vdev_optimizer_slots(o, s, out, names, 3) == -1);
    CHECK_EQ_U64(vdev_last_status(), VDEV_ERR_INVALID_ARG);
    CHECK_STR(vdev_last_error(), want);
    CHECK(!out[0] && !out[1] && !out[2] && !names[0]);
    CHECK_EQ_U64(in_use(), before);
}

/* Adam's m, v and vhat as the variable: refused, and the optimizer goes on
 * as before (the same slots for v, the same count). */
static void own_slot_adam(void)
{
    check_fresh("1x1GiB");
    vdev_optimizer_t *o = vdev_adam_new(0.01f, 0.9f, 0.999f, 1e-7f);
    vdev_tensor_t *v = var_of(1), *g = grad_of(0.5f);
    CHECK(o && v && g);
    CHECK_OK(vdev_adam_set_amsgrad(o, true));
    CHECK_OK(vdev_optimizer_apply(o, &v, &g, 1));
    vdev_tensor_t *sl[3] = {NULL, NULL, NULL};
    CHECK(vdev_optimizer_slots(o, v, sl, NULL, 3) == 3);
    static const char *const names[3] = {"m", "v", "vhat"};
    for (int k = 0; k < 3; k++)
        refused(o, sl[k], names[k]);
    int64_t it = -1;
    CHECK_OK(vdev_optimizer_get_iterations(o, &it));
    CHECK_EQ_U64(it, 1);
    vdev_tensor_t *again[3] = {NULL, NULL, NULL};
    CHECK(vdev_optimizer_slots(o, v, again, NULL, 3) == 3);
    for (int k = 0; k < 3; k++)
        CHECK(again[k] == sl[k]);
    /* another optimizer's slot is a variable like any other to this one */
    vdev_optimizer_t *other = vdev_adam_new(0.01f, 0.9f, 0.999f, 1e-7f);
    CHECK(other != NULL);
    CHECK(vdev_optimizer_slots(other, sl[0], again, NULL, 3) == 2);
    vdev_optimizer_free(other);
    vdev_optimizer_free(o);
    vdev_tensor_free(v);
    vdev_tensor_free(g);
    CHECK_NO_LEAK("GPU:0");
}

/* SGD's velocity as the variable: refused while momentum is on, and while
 * it is off (a velocity handed out is kept then); a refused call hands
 * nothing out: a velocity given back stays given back, so switching
 * momentum off frees it. */
static void own_slot_sgd(void)
{
    check_fresh("1x1GiB");
    vdev_optimizer_t *o = vdev_sgd_new(0.1f, 0.9f);
    vdev_tensor_t *v = var_of(1), *g = grad_of(0.5f);
    CHECK(o && v && g);
    CHECK_OK(vdev_optimizer_apply(o, &v, &g, 1));
    vdev_tensor_t *vel = NULL;
    CHECK(vdev_optimizer_slots(o, v, &vel, NULL, 1) == 1);
    CHECK_OK(vdev_sgd_set(o, 0.1f, 0)); /* handed out: kept, zeros */
    CHECK(vdev_tensor_numel(vel) == NUMEL && all_zero(vel));
    refused(o, vel, "momentum");
    CHECK_OK(vdev_sgd_set(o, 0.1f, 0.9f));
    refused(o, vel, "momentum");
    CHECK_OK(vdev_optimizer_slots_release(o, v));
    refused(o, vel, "momentum");
    uint64_t before = in_use();
    CHECK_OK(vdev_sgd_set(o, 0.1f, 0)); /* given back: freed */
    CHECK_EQ_U64(in_use(), before - BYTES);
    CHECK(dead(vel));
    vdev_optimizer_free(o);
    vdev_tensor_free(v);
    vdev_tensor_free(g);
    CHECK_NO_LEAK("GPU:0");
}

/* vdev_optimizer_apply(o, vars, grads, n) (prepare: vdev_optimizer_prepare
 * of vars) with vars[at] o's own slot `name`: refused with exactly OWN_SLOT
 * naming the call, at and name, and nothing changed: the bytes in use as
 * before (no slot made, of the slot or of a variable that had none yet),
 * every variable's values and the iteration count as they were, and
 * nothing pending for vdev_optimizer_unprepare to take back. */
static void apply_refused(vdev_optimizer_t *o, vdev_tensor_t **vars, vdev_tensor_t **grads,
                          int n, int at, const char *name, int prepare)
{
    static float before[4][NUMEL], after[NUMEL];
    char want[256];
    snprintf(want, sizeof want, OWN_SLOT,
             prepare ? "vdev_optimizer_prepare" : "vdev_optimizer_apply", at, name);
    CHECK(n <= 4);
    for (int i = 0; i < n && i < 4; i++)
        CHECK_OK(vdev_tensor_to_host(vars[i], before[i], sizeof before[i]));
    int64_t it0 = -1, it1 = -2;
    CHECK_OK(vdev_optimizer_get_iterations(o, &it0));
    uint64_t bytes = in_use();
    vdev_clear_error();
    CHECK_ERR(prepare ? vdev_optimizer_prepare(o, vars, n)
                      : vdev_optimizer_apply(o, vars, grads, n),
              VDEV_ERR_INVALID_ARG, want);
    CHECK_EQ_U64(in_use(), bytes);
    CHECK_OK(vdev_optimizer_get_iterations(o, &it1));
    CHECK_EQ_U64(it1, it0);
    for (int i = 0; i < n && i < 4; i++) {
        CHECK_OK(vdev_tensor_to_host(vars[i], after, sizeof after));
        CHECK(memcmp(after, before[i], sizeof after) == 0);
    }
    vdev_optimizer_unprepare(o);
    CHECK_EQ_U64(in_use(), bytes);
}

/* Each of the optimizer's own slots (Adam's m, v and vhat; SGD's velocity,
 * with momentum on and, handed out and kept, off) as a variable of an
 * update or a prepare, beside a variable v it updated and a variable w it
 * has no slots for yet, first, in the middle or last: refused
 * (apply_refused), two slots in one call named by the first. Afterwards
 * an update of v and w goes on as before (w's slots made then, the count
 * one more), and another optimizer updates the slot as any variable. */
static void own_slot_apply(int adam)
{
    check_fresh("1x1GiB");
    int n = adam ? 3 : 1;
    vdev_optimizer_t *o =
        adam ? vdev_adam_new(0.01f, 0.9f, 0.999f, 1e-7f) : vdev_sgd_new(0.1f, 0.9f);
    vdev_tensor_t *v = var_of(1), *g = grad_of(0.5f), *w = var_of(2), *gw = grad_of(0.25f);
    CHECK(o && v && g && w && gw);
    if (adam)
        CHECK_OK(vdev_adam_set_amsgrad(o, true));
    CHECK_OK(vdev_optimizer_apply(o, &v, &g, 1));
    vdev_tensor_t *sl[3] = {NULL, NULL, NULL};
    CHECK(vdev_optimizer_slots(o, v, sl, NULL, 3) == n);
    static const char *const adam_names[3] = {"m", "v", "vhat"};
    for (int pass = 0; pass < (adam ? 1 : 2); pass++) {
        /* SGD's second pass: momentum off, the velocity kept (handed out) */
        if (pass == 1)
            CHECK_OK(vdev_sgd_set(o, 0.1f, 0));
        for (int k = 0; k < n; k++) {
            const char *name = adam ? adam_names[k] : "momentum";
            for (int prepare = 0; prepare < 2; prepare++) {
                vdev_tensor_t *last[3] = {v, w, sl[k]}, *gl[3] = {g, gw, g};
                apply_refused(o, last, gl, 3, 2, name, prepare);
                vdev_tensor_t *first[2] = {sl[k], w}, *gf[2] = {g, gw};
                apply_refused(o, first, gf, 2, 0, name, prepare);
                vdev_tensor_t *mid[3] = {w, sl[k], v}, *gm[3] = {gw, g, g};
                apply_refused(o, mid, gm, 3, 1, name, prepare);
            }
        }
    }
    if (adam) {
        vdev_tensor_t *two[3] = {w, sl[1], sl[0]}, *g3[3] = {gw, g, g};
        apply_refused(o, two, g3, 3, 1, "v", 0);
        apply_refused(o, two, g3, 3, 1, "v", 1);
    } else {
        CHECK_OK(vdev_sgd_set(o, 0.1f, 0.9f));
    }
    /* the optimizer as it was: v's slots the same handles, w's made now */
    uint64_t bytes = in_use();
    vdev_tensor_t *both[2] = {v, w}, *gb[2] = {g, gw};
    CHECK_OK(vdev_optimizer_apply(o, both, gb, 2));
    CHECK_EQ_U64(in_use(), bytes + (uint64_t)n * BYTES);
    int64_t it = -1;
    CHECK_OK(vdev_optimizer_get_iterations(o, &it));
    CHECK_EQ_U64(it, 2);
    vdev_tensor_t *again[3] = {NULL, NULL, NULL};
    CHECK(vdev_optimizer_slots(o, v, again, NULL, 3) == n);
    for (int k = 0; k < n; k++)
        CHECK(again[k] == sl[k]);
    /* another optimizer's slot is a variable like any other to this one */
    vdev_optimizer_t *other = vdev_sgd_new(0.1f, 0.9f);
    CHECK(other != NULL);
    CHECK_OK(vdev_optimizer_prepare(other, &sl[0], 1));
    CHECK_OK(vdev_optimizer_apply(other, &sl[0], &g, 1));
    vdev_optimizer_free(other);
    vdev_optimizer_free(o);
    vdev_tensor_free(v);
    vdev_tensor_free(g);
    vdev_tensor_free(w);
    vdev_tensor_free(gw);
    CHECK_NO_LEAK("GPU:0");
}

/* Whether every element of t is x. */
static int all_equal(vdev_tensor_t *t, float x)
{
    static float h[NUMEL];
    if (vdev_tensor_to_host(t, h, sizeof h) != VDEV_OK)
        return 0;
    for (int i = 0; i < NUMEL; i++)
        if (h[i] != x)
            return 0;
    return 1;
}

/* The weight decay's exclusion list of a long run: 10,000 variables made,
 * excluded and freed, one at a time, beside a variable w excluded
 * throughout. Each call prunes the exclusions of the variables freed since
 * the last one, so the list holds w and the last one freed (2), and after
 * one more call w alone; w stays excluded, and a variable made in the last
 * freed one's place in the handle table is decayed (wd 0.5, lr 0.5, a zero
 * gradient: 2 becomes 1.5, exactly). */
static void exclusions_pruned(void)
{
    check_fresh("1x1GiB");
    vdev_optimizer_t *o = vdev_sgd_new(0.5f, 0);
    vdev_tensor_t *w = var_of(2), *g0 = grad_of(0);
    CHECK(o && w && g0);
    CHECK_OK(vdev_optimizer_set_weight_decay(o, 0.5f));
    CHECK_OK(vdev_optimizer_exclude_from_weight_decay(o, &w, 1));
    CHECK_EQ_U64(vdev_nn_optimizer_n_excluded(o), 1);
    uint64_t hv = 0;
    int bad = 0;
    for (int r = 0; r < 10000; r++) {
        vdev_tensor_t *v = var_of(1);
        if (!v || vdev_optimizer_exclude_from_weight_decay(o, &v, 1) != VDEV_OK)
            bad++;
        hv = (uint64_t)(uintptr_t)v;
        vdev_tensor_free(v);
        if (vdev_nn_optimizer_n_excluded(o) != 2)
            bad++;
    }
    CHECK_EQ_U64(bad, 0);
    CHECK_EQ_U64(vdev_nn_optimizer_n_excluded(o), 2); /* w, and the last one freed */
    CHECK_OK(vdev_optimizer_slots_release(o, NULL));
    CHECK_EQ_U64(vdev_nn_optimizer_n_excluded(o), 1);
    vdev_tensor_t *c = var_of(2);
    CHECK(c != NULL);
    CHECK_EQ_U64((uint64_t)(uintptr_t)c & 0xffffffffu, hv & 0xffffffffu);
    vdev_tensor_t *vars[2] = {w, c}, *grads[2] = {g0, g0};
    CHECK_OK(vdev_optimizer_apply(o, vars, grads, 2));
    CHECK(all_equal(w, 2.0f));
    CHECK(all_equal(c, 1.5f));
    CHECK_EQ_U64(vdev_nn_optimizer_n_excluded(o), 1);
    vdev_tensor_free(c);
    vdev_tensor_free(w);
    vdev_tensor_free(g0);
    CHECK_OK(vdev_optimizer_slots_release(o, NULL));
    CHECK_EQ_U64(vdev_nn_optimizer_n_excluded(o), 0);
    vdev_optimizer_free(o);
    CHECK_NO_LEAK("GPU:0");
}

int main(void)
{
    freed_then_next_call(0);
    freed_then_next_call(1);
    pending_freed();
    reused_handle();
    many_models();
    two_threads();
    own_slot_adam();
    own_slot_sgd();
    own_slot_apply(1);
    own_slot_apply(0);
    exclusions_pruned();
    check_fresh(NULL);
    return check_done();
}
