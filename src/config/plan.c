/* plan.c — from what code asked for and what the environment says to the
 * start-up plan: budgets of the cards, the logical devices and their limits.
 *
 * vdev_config_resolve_locked() validates every variable (even one that code
 * overrides, so a typo is never hidden), then merges per knob and per GPU:
 * code first, then environment, then defaults. vdev_config_freeze() turns the
 * result into the plan (a card's budget is TensorFlow's: free memory less the
 * driver reserve, or total × fraction) and records what is in force, so a
 * later configuration call that repeats it is a no-op.
 *
 * Numbering follows TensorFlow: logical CPUs first, then logical GPUs over the
 * visible GPUs — in physical order when code chose them (set_visible_devices
 * walks the physical list), in the order listed when VDEV_VISIBLE_DEVICES did
 * (as visible_device_list and CUDA_VISIBLE_DEVICES) — each GPU's logical
 * devices in turn. */
#define _GNU_SOURCE
#include "config/internal.h"

#include <stdatomic.h>
#include <string.h>

#define MIB (1ull << 20)

/* TensorFlow's MinSystemMemory: the memory left to the driver and libraries. */
static uint64_t min_system_memory(uint64_t free_bytes, int cc_major)
{
    if (free_bytes < (2ull << 30))
        return 225ull << 20;
    if (cc_major <= 6)
        return 500ull << 20;
    if (cc_major == 7)
        return 1050ull << 20;
    return 1536ull << 20;
}

enum vdev_status vdev_config_gpu_budget(int gpu, double fraction, uint64_t *budget,
                                        uint64_t *free_out, uint64_t *reserve_out)
{
    struct vdev_config_state *S = vdev_config_state();
    uint64_t free_bytes, total;
    struct vdev_backend_device_info info;
    enum vdev_status st = vdev_backend_mem_info(&S->gpu, gpu, &free_bytes, &total);
    if (st == VDEV_OK)
        st = vdev_backend_device_info(&S->gpu, gpu, &info);
    if (st != VDEV_OK)
        return st;
    uint64_t reserve = min_system_memory(free_bytes, info.cc_major);
    int set;
    uint64_t user_reserve;
    if ((st = vdev_env_min_sys(&user_reserve, &set)) != VDEV_OK)
        return st;
    if (set) {
        /* TensorFlow ignores a reserve that leaves nothing, with a warning; it
         * cannot be honoured, so here it is an error. */
        if (user_reserve >= free_bytes) {
            char b1[32], b2[32];
            return vdev_error(VDEV_ERR_CONFIG,
                              "TF_DEVICE_MIN_SYS_MEMORY_IN_MB=\"%s\" reserves %s, which leaves "
                              "nothing of the %s free on /physical_device:GPU:%d",
                              getenv("TF_DEVICE_MIN_SYS_MEMORY_IN_MB"),
                              vdev_format_bytes(user_reserve, b1, sizeof b1),
                              vdev_format_bytes(free_bytes, b2, sizeof b2), gpu);
        }
        reserve = user_reserve;
    }
    if (fraction > 0 && set) {
        /* TensorFlow's rule, which it applies silently: say it, once. */
        static atomic_flag said = ATOMIC_FLAG_INIT;
        if (!atomic_flag_test_and_set(&said))
            vdev_log_warning("TF_DEVICE_MIN_SYS_MEMORY_IN_MB=\"%s\" is set, so a GPU's budget is "
                             "its free memory less that reserve and the memory fraction %g is "
                             "not applied (TensorFlow's rule); unset one of the two",
                             getenv("TF_DEVICE_MIN_SYS_MEMORY_IN_MB"), fraction);
    }
    uint64_t b;
    if (fraction > 0 && !set)
        b = vdev_config_fraction_budget(total, fraction);
    else
        b = (free_bytes > reserve ? free_bytes - reserve : free_bytes) & ~(uint64_t)255;
    *budget = b;
    if (free_out)
        *free_out = free_bytes;
    if (reserve_out)
        *reserve_out = (fraction > 0 && !set) ? 0 : reserve;
    return VDEV_OK;
}

/* A fraction from the environment must leave every GPU at least 1 MiB. */
static enum vdev_status check_env_fraction(const char *var, const char *text, double f)
{
    struct vdev_config_state *S = vdev_config_state();
    if (f == 0)
        return VDEV_OK; /* no fraction */
    int bad = -1;
    uint64_t worst_total = UINT64_MAX, bad_total = 0;
    for (int gpu = 0; gpu < S->n_gpus; gpu++) {
        uint64_t fr, total;
        enum vdev_status st = vdev_backend_mem_info(&S->gpu, gpu, &fr, &total);
        if (st != VDEV_OK)
            return st;
        if (vdev_config_fraction_budget(total, f) < MIB && bad < 0) {
            bad = gpu;
            bad_total = total;
        }
        worst_total = total < worst_total ? total : worst_total;
    }
    if (bad < 0)
        return VDEV_OK;
    char b1[32], b2[32], least[32];
    vdev_config_min_fraction(worst_total, least, sizeof least);
    return vdev_error(VDEV_ERR_CONFIG,
                      "%s=\"%s\" gives /physical_device:GPU:%d a budget of %s (%s of its %s), "
                      "less than 1 MiB: the smallest useful value is %s",
                      var, text, bad,
                      vdev_format_bytes(vdev_config_fraction_budget(bad_total, f), b1, sizeof b1),
                      text, vdev_format_bytes(bad_total, b2, sizeof b2), least);
}

/* TF_FORCE_GPU_ALLOW_GROWTH and VDEV_MEMORY_GROWTH: growth[i] 0/1, or -1.
 * Every variable is read through vdev_config_getenv (this task's entry of
 * the cluster file stands in for it) and named by its label. */
static enum vdev_status env_growth_all(int n_gpus, int growth[VDEV_MAX_GPUS])
{
    enum vdev_status st;
    char l1[1200], l2[1200];
    for (int i = 0; i < VDEV_MAX_GPUS; i++)
        growth[i] = -1;
    const char *tf_grow = vdev_config_getenv("TF_FORCE_GPU_ALLOW_GROWTH");
    const char *vd_grow = vdev_config_getenv("VDEV_MEMORY_GROWTH");
    const char *tf_l = vdev_config_var_label("TF_FORCE_GPU_ALLOW_GROWTH", l1, sizeof l1);
    const char *vd_l = vdev_config_var_label("VDEV_MEMORY_GROWTH", l2, sizeof l2);
    if (tf_grow) {
        int b;
        if ((st = vdev_config_parse_bool(tf_l, tf_grow, &b)) != VDEV_OK)
            return st;
        for (int i = 0; i < VDEV_MAX_GPUS; i++)
            growth[i] = b;
    }
    if (vd_grow) {
        int g2[VDEV_MAX_GPUS];
        for (int i = 0; i < VDEV_MAX_GPUS; i++)
            g2[i] = -1;
        if ((st = vdev_env_growth(vd_l, vd_grow, n_gpus, g2)) != VDEV_OK)
            return st;
        for (int i = 0; i < VDEV_MAX_GPUS; i++) {
            if (g2[i] < 0)
                continue;
            if (growth[i] >= 0 && growth[i] != g2[i])
                return vdev_error(VDEV_ERR_CONFIG,
                                  "TF_FORCE_GPU_ALLOW_GROWTH=\"%s\" and VDEV_MEMORY_GROWTH=\"%s\" "
                                  "disagree for GPU %d",
                                  tf_grow, vd_grow, i);
            growth[i] = g2[i];
        }
    }
    return VDEV_OK;
}

/* VDEV_MEMORY_FRACTION and TF_GPU_MEMORY_FRACTION: 0 when neither is set or
 * both say 0 (no fraction). */
static enum vdev_status env_fraction_all(double *out)
{
    enum vdev_status st;
    char l1[1200];
    *out = 0;
    const char *vd_frac = vdev_config_getenv("VDEV_MEMORY_FRACTION");
    const char *tf_frac = vdev_config_getenv("TF_GPU_MEMORY_FRACTION");
    const char *vd_l = vdev_config_var_label("VDEV_MEMORY_FRACTION", l1, sizeof l1);
    if (vd_frac) {
        if ((st = vdev_env_fraction(vd_l, vd_frac, out)) != VDEV_OK)
            return st;
        if ((st = check_env_fraction(vd_l, vd_frac, *out)) != VDEV_OK)
            return st;
    }
    if (tf_frac) {
        double f2;
        if ((st = vdev_env_fraction("TF_GPU_MEMORY_FRACTION", tf_frac, &f2)) != VDEV_OK)
            return st;
        if (vd_frac && f2 != *out)
            return vdev_error(VDEV_ERR_CONFIG,
                              "VDEV_MEMORY_FRACTION=\"%s\" and TF_GPU_MEMORY_FRACTION=\"%s\" "
                              "disagree; set one",
                              vd_frac, tf_frac);
        if ((st = check_env_fraction("TF_GPU_MEMORY_FRACTION", tf_frac, f2)) != VDEV_OK)
            return st;
        *out = f2;
    }
    return VDEV_OK;
}

enum vdev_status vdev_config_resolve_locked(struct vdev_config_resolved *r)
{
    struct vdev_config_state *S = vdev_config_state();
    enum vdev_status st;
    memset(r, 0, sizeof *r);

    int env_grow[VDEV_MAX_GPUS];
    if ((st = env_growth_all(S->n_gpus, env_grow)) != VDEV_OK)
        return st;
    double env_frac;
    if ((st = env_fraction_all(&env_frac)) != VDEV_OK)
        return st;
    memcpy(r->env_growth, env_grow, sizeof env_grow);
    r->env_fraction_set = vdev_config_getenv("VDEV_MEMORY_FRACTION") ||
                          vdev_config_getenv("TF_GPU_MEMORY_FRACTION");
    r->env_fraction = env_frac;
    struct vdev_gpu_cfg env_cfg[VDEV_MAX_GPUS];
    int env_split[VDEV_MAX_GPUS] = {0}, env_cpus = 0;
    char label[1200];
    const char *vd_log = vdev_config_getenv("VDEV_LOGICAL_DEVICES");
    if (vd_log && (st = vdev_env_logical(vdev_config_var_label("VDEV_LOGICAL_DEVICES", label,
                                                               sizeof label),
                                         vd_log, S->n_gpus, env_cfg, env_split, &env_cpus)) !=
                      VDEV_OK)
        return st;
    int env_vis[VDEV_MAX_GPUS], env_n_vis = 0;
    const char *vd_vis = vdev_config_getenv("VDEV_VISIBLE_DEVICES");
    if (vd_vis && (st = vdev_env_visible(vdev_config_var_label("VDEV_VISIBLE_DEVICES", label,
                                                               sizeof label),
                                         vd_vis, S->n_gpus, env_vis, &env_n_vis)) != VDEV_OK)
        return st;
    if ((st = vdev_env_min_sys(&r->min_sys, &r->min_sys_set)) != VDEV_OK)
        return st;

    /* Visible GPUs: code (numbered in physical order), else the variable
     * (numbered as listed), else every GPU. */
    if (S->visible_set) {
        r->n_visible = S->n_visible;
        memcpy(r->visible, S->visible, sizeof(int) * (size_t)r->n_visible);
        int k = 0;
        for (int gpu = 0; gpu < S->n_gpus; gpu++)
            for (int i = 0; i < S->n_visible; i++)
                if (S->visible[i] == gpu) {
                    r->order[k++] = gpu;
                    break;
                }
    } else if (vd_vis) {
        r->n_visible = env_n_vis;
        memcpy(r->visible, env_vis, sizeof(int) * (size_t)env_n_vis);
        memcpy(r->order, env_vis, sizeof(int) * (size_t)env_n_vis);
    } else {
        r->n_visible = S->n_gpus;
        for (int i = 0; i < S->n_gpus; i++)
            r->visible[i] = r->order[i] = i;
    }
    /* Code's value wins even when it is "no split" (n 0) or "no fraction"
     * (0): code undoes what the environment says. */
    r->n_cpus = S->cpus_set ? S->n_cpus : env_cpus;
    if (r->n_cpus < 1)
        r->n_cpus = 1;

    /* Per GPU: code first, then environment, then defaults. */
    for (int gpu = 0; gpu < S->n_gpus; gpu++) {
        const struct vdev_gpu_cfg *c = &S->gpus[gpu];
        struct vdev_gpu_cfg *e = &r->gpu[gpu];
        e->growth = c->growth >= 0 ? c->growth : env_grow[gpu] >= 0 ? env_grow[gpu] : 1;
        e->fraction = c->fraction_set ? c->fraction : env_frac;
        const struct vdev_gpu_cfg *src = (!c->split_set && env_split[gpu]) ? &env_cfg[gpu] : c;
        r->split_from_env[gpu] = src != c;
        r->env_split[gpu] = env_split[gpu];
        e->n_logical = src->n_logical;
        memcpy(e->limits, src->limits, sizeof(uint64_t) * (size_t)src->n_logical);
        memcpy(e->floors, src->floors, sizeof(uint64_t) * (size_t)src->n_logical);
        memcpy(e->prios, src->prios, sizeof(enum vdev_priority) * (size_t)src->n_logical);
    }
    return VDEV_OK;
}

/* The error for logical devices whose limits (or floors, or one ceiling)
 * exceed the card's budget: `what` is "limits", "floors" or "logical device
 * N's ceiling" (n_log 0: one device, "is" rather than "sum to"; n_log 1:
 * "its 1 logical device's limit is"). */
static enum vdev_status over_budget(int gpu, int n_log, const char *what, uint64_t sum,
                                    uint64_t budget, double frac, int min_sys_set,
                                    uint64_t free_bytes, uint64_t reserve, int from_env)
{
    struct vdev_config_state *S = vdev_config_state();
    char how[224], b1[32], b2[32], b3[32], b4[32], whose[64];
    uint64_t fr_now, total = 0;
    if (vdev_backend_mem_info(&S->gpu, gpu, &fr_now, &total) != VDEV_OK)
        total = 0;
    if (frac > 0 && !min_sys_set)
        snprintf(how, sizeof how, "%.3g of its %s total", frac,
                 vdev_format_bytes(total, b3, sizeof b3));
    else if (reserve >= free_bytes && reserve) /* not subtracted: see vdev_config_gpu_budget */
        snprintf(how, sizeof how,
                 "%s free: the card is too small for the %s driver reserve, so none is left "
                 "aside, as TensorFlow",
                 vdev_format_bytes(free_bytes, b3, sizeof b3),
                 vdev_format_bytes(reserve, b4, sizeof b4));
    else
        snprintf(how, sizeof how, "%s free less the %s driver reserve",
                 vdev_format_bytes(free_bytes, b3, sizeof b3),
                 vdev_format_bytes(reserve, b4, sizeof b4));
    size_t wl = strlen(what);
    if (n_log == 1) /* "its 1 logical device's limit is" */
        snprintf(whose, sizeof whose, "its 1 logical device's %.*s is",
                 (int)(wl && what[wl - 1] == 's' ? wl - 1 : wl), what);
    else if (n_log)
        snprintf(whose, sizeof whose, "its %d logical devices' %s sum to", n_log, what);
    else
        snprintf(whose, sizeof whose, "%s is", what);
    /* a split from the cluster file: say whose entry it is */
    char label[1200], from[1300] = "";
    vdev_config_var_label("VDEV_LOGICAL_DEVICES", label, sizeof label);
    if (from_env && strcmp(label, "VDEV_LOGICAL_DEVICES") != 0)
        snprintf(from, sizeof from, " (%s)", label);
    /* a sum past 2^64 - 1 was held there (build_plan): say "more than" */
    char amount[96];
    if (sum == UINT64_MAX && n_log)
        snprintf(amount, sizeof amount, "more than %s (2^64 - 1 bytes)",
                 vdev_format_bytes(sum, b1, sizeof b1));
    else
        snprintf(amount, sizeof amount, "%s (%llu bytes)", vdev_format_bytes(sum, b1, sizeof b1),
                 (unsigned long long)sum);
    /* two sizes that read the same rounded: say by how much the sum is over */
    char over[64] = "";
    if (sum != UINT64_MAX && sum > budget &&
        !strcmp(vdev_format_bytes(sum, b1, sizeof b1), vdev_format_bytes(budget, b2, sizeof b2)))
        snprintf(over, sizeof over, ", over it by %s", vdev_format_bytes(sum - budget, b4,
                                                                          sizeof b4));
    return vdev_error(VDEV_ERR_CONFIG,
                      "/physical_device:GPU:%d: %s %s, more than the card's budget "
                      "of %s (%llu bytes: %s)%s%s",
                      gpu, whose, amount,
                      vdev_format_bytes(budget, b2, sizeof b2), (unsigned long long)budget, how,
                      over, from);
}

/* Logical devices for a GPU that is not visible are not applied: say so at
 * start-up (indices in settings are physical, not positions among the
 * visible GPUs, which a CUDA_VISIBLE_DEVICES habit may expect). */
static void warn_hidden(const struct vdev_config_resolved *r)
{
    struct vdev_config_state *S = vdev_config_state();
    for (int gpu = 0; gpu < S->n_gpus; gpu++) {
        int shown = 0;
        for (int k = 0; k < r->n_visible; k++)
            shown |= r->order[k] == gpu;
        if (shown)
            continue;
        const struct vdev_gpu_cfg *c = &S->gpus[gpu];
        /* (memory growth is not named: code commonly sets it for every
         * physical GPU, hidden or not) */
        const char *what = c->n_logical ? "logical devices set in code"
                           : r->split_from_env[gpu] ? "logical devices of VDEV_LOGICAL_DEVICES"
                                                    : NULL;
        if (what)
            vdev_log_warning("/physical_device:GPU:%d is not visible, so the %s for it are "
                             "not applied (settings name GPUs by their physical index, not "
                             "by their place among the visible ones)",
                             gpu, what);
    }
}

/* The environment's value of a knob code also set, for a message: the
 * variable's label ("VDEV_MEMORY_GROWTH", or the cluster file's entry) and
 * its text, of the first of the two names that is set. */
static const char *env_said(const char *a, const char *b, char *label, size_t cap,
                            const char **text)
{
    const char *var = vdev_config_getenv(a) ? a : b;
    *text = vdev_config_getenv(var);
    return vdev_config_var_label(var, label, cap);
}

/* Code's settings win over the environment's (one rule for every knob, where
 * TensorFlow lets TF_FORCE_GPU_ALLOW_GROWTH win over code and warns): say so
 * at start-up when they differ on a visible GPU, so an operator's variable
 * is not silently without effect. */
static void warn_code_over_env(const struct vdev_config_resolved *r)
{
    struct vdev_config_state *S = vdev_config_state();
    char label[1200];
    const char *text;
    for (int k = 0; k < r->n_visible; k++) {
        int gpu = r->order[k];
        const struct vdev_gpu_cfg *c = &S->gpus[gpu];
        if (c->growth >= 0 && r->env_growth[gpu] >= 0 && c->growth != r->env_growth[gpu]) {
            const char *l = env_said("VDEV_MEMORY_GROWTH", "TF_FORCE_GPU_ALLOW_GROWTH", label,
                                     sizeof label, &text);
            vdev_log_warning("/physical_device:GPU:%d: memory growth %s in code wins over "
                             "%s=\"%s\" (vdev: code's settings win over the environment's)",
                             gpu, c->growth ? "on" : "off", l, text);
        }
        if (c->fraction_set && r->env_fraction_set && c->fraction != r->env_fraction) {
            const char *l = env_said("VDEV_MEMORY_FRACTION", "TF_GPU_MEMORY_FRACTION", label,
                                     sizeof label, &text);
            vdev_log_warning("/physical_device:GPU:%d: the memory fraction %g set in code wins "
                             "over %s=\"%s\" (vdev: code's settings win over the environment's)",
                             gpu, c->fraction, l, text);
        }
        if (c->split_set && r->env_split[gpu]) {
            const char *l = env_said("VDEV_LOGICAL_DEVICES", "VDEV_LOGICAL_DEVICES", label,
                                     sizeof label, &text);
            vdev_log_warning("/physical_device:GPU:%d: the logical devices set in code win over "
                             "those of %s=\"%s\" (vdev: code's settings win over the "
                             "environment's)",
                             gpu, l, text);
        }
    }
}

static enum vdev_status build_plan(struct vdev_plan *plan, struct vdev_config_resolved *r)
{
    struct vdev_config_state *S = vdev_config_state();
    enum vdev_status st;
    memset(plan, 0, sizeof *plan);
    plan->cpu = &S->cpu;
    plan->gpu = S->gpu.ops ? &S->gpu : NULL;
    uint64_t cpu_free, cpu_total;
    if ((st = vdev_backend_mem_info(&S->cpu, 0, &cpu_free, &cpu_total)) != VDEV_OK)
        return st;
    plan->cpu_limit_bytes = cpu_total & ~(uint64_t)255;

    const char *trace = getenv("VDEV_ALLOC_TRACE");
    if (trace) {
        if (!*trace)
            return vdev_error(VDEV_ERR_CONFIG, "VDEV_ALLOC_TRACE is empty (expected a file path)");
        if (strlen(trace) >= sizeof plan->alloc_trace_path)
            return vdev_error(VDEV_ERR_CONFIG, "VDEV_ALLOC_TRACE is too long");
        vdev_strlcpy(plan->alloc_trace_path, trace, sizeof plan->alloc_trace_path);
    }
    if ((st = vdev_config_resolve_locked(r)) != VDEV_OK)
        return st;
    plan->n_cpus = r->n_cpus;
    warn_hidden(r);
    warn_code_over_env(r);

    /* The plan: the visible GPUs in numbering order, each one's logical devices. */
    for (int k = 0; k < r->n_visible; k++) {
        int gpu = r->order[k];
        const struct vdev_gpu_cfg *e = &r->gpu[gpu];
        int n_log = e->n_logical;
        uint64_t budget, free_bytes, reserve;
        if ((st = vdev_config_gpu_budget(gpu, e->fraction, &budget, &free_bytes, &reserve)) !=
            VDEV_OK)
            return st;
        enum vdev_memory_policy pol = e->growth ? VDEV_POLICY_GROW : VDEV_POLICY_PREALLOCATE;
        plan->card_budget[gpu] = budget;
        int n_new = n_log ? n_log : 1;
        if (plan->n_devices + n_new > (int)VDEV_ARRAY_LEN(plan->devices))
            return vdev_error(VDEV_ERR_CONFIG,
                              "/physical_device:GPU:%d: more than %d logical GPUs in all", gpu,
                              (int)VDEV_ARRAY_LEN(plan->devices));
        if (n_log == 0) {
            struct vdev_plan_device *d = &plan->devices[plan->n_devices++];
            d->physical = gpu;
            d->limit_bytes = budget;
            d->floor_bytes = budget; /* alone on its card: all of it is its own */
            d->priority = VDEV_PRIORITY_NORMAL;
            d->policy = pol;
            d->is_split = 0;
            continue;
        }
        /* The floors must fit the budget (a plain limit is its own floor, so
         * for plain limits this is the sum of the limits), and so must each
         * ceiling; a ceiling of 0 is the budget. */
        struct vdev_gpu_cfg *w = &r->gpu[gpu];
        uint64_t sum = 0;
        int plain = 1;
        for (int i = 0; i < n_log; i++) {
            if (!w->limits[i])
                w->limits[i] = budget;
            plain &= w->floors[i] == w->limits[i];
            uint64_t f = w->floors[i] & ~(uint64_t)255;
            sum = sum > UINT64_MAX - f ? UINT64_MAX : sum + f;
        }
        if (sum > budget)
            return over_budget(gpu, n_log, plain ? "limits" : "floors", sum, budget, e->fraction,
                               r->min_sys_set, free_bytes, reserve, r->split_from_env[gpu]);
        for (int i = 0; i < n_log; i++) {
            if ((w->limits[i] & ~(uint64_t)255) <= budget)
                continue;
            char what[64];
            snprintf(what, sizeof what, "logical device %d's ceiling", i);
            return over_budget(gpu, 0, what, w->limits[i], budget, e->fraction, r->min_sys_set,
                               free_bytes, reserve, r->split_from_env[gpu]);
        }
        for (int i = 0; i < n_log; i++) {
            struct vdev_plan_device *d = &plan->devices[plan->n_devices++];
            d->physical = gpu;
            d->limit_bytes = w->limits[i] & ~(uint64_t)255;
            d->floor_bytes = w->floors[i] & ~(uint64_t)255;
            d->priority = w->prios[i];
            d->policy = pol;
            d->is_split = 1;
        }
    }
    if (plan->n_cpus + plan->n_devices > VDEV_MAX_LOGICAL_DEVICES)
        return vdev_error(VDEV_ERR_CONFIG,
                          "%d logical CPUs and %d logical GPUs: more than %d logical devices in "
                          "all",
                          plan->n_cpus, plan->n_devices, VDEV_MAX_LOGICAL_DEVICES);
    return VDEV_OK;
}

enum vdev_status vdev_config_freeze(struct vdev_plan *plan)
{
    struct vdev_config_state *S = vdev_config_state();
    enum vdev_status st = vdev_config_discover();
    if (st != VDEV_OK)
        return st;
    vdev_config_warn_unknown_env();
    struct vdev_config_resolved *r = vdev_calloc(1, sizeof *r);
    if (!r)
        return vdev_error(VDEV_ERR_OOM, "out of host memory at start-up");
    pthread_mutex_lock(&S->lock);
    st = build_plan(plan, r);
    if (st == VDEV_OK) {
        memcpy(S->eff, r->gpu, sizeof S->eff);
        memcpy(S->eff_budget, plan->card_budget, sizeof S->eff_budget);
        S->eff_n_visible = r->n_visible;
        memcpy(S->eff_visible, r->visible, sizeof S->eff_visible);
        S->eff_n_cpus = r->n_cpus;
        S->frozen = 1;
    }
    pthread_mutex_unlock(&S->lock);
    free(r);
    return st;
}

void vdev_config_unfreeze(void)
{
    struct vdev_config_state *S = vdev_config_state();
    pthread_mutex_lock(&S->lock);
    S->frozen = 0;
    pthread_mutex_unlock(&S->lock);
}
