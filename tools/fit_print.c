/* fit_print.c — the answer of `vdev fit`: the table (the card, the orders
 * run, per model its split, whether it fits, its peaks, smallest limit and
 * margin, the order that failed and where each failing model failed, then
 * the smallest cards and the split the preallocation answer assumes) or one
 * JSON object with the same figures in bytes; and the start orders, which
 * the replays (cmd_fit.c) and the output both name. */
#include "fit.h"

#include <string.h>

int vdev_fit_all_fit(const struct outcome *o, int n)
{
    for (int i = 0; i < n; i++)
        if (!o[i].fits)
            return 0;
    return 1;
}

/* The k-th start order of n models: the k-th permutation in lexicographic
 * order, or (over ALL_ORDERS_UP_TO) model k first, or model k - n last, the
 * others in their order. */
void vdev_fit_order_of(int n, int k, int *perm)
{
    if (n > ALL_ORDERS_UP_TO) {
        int who = k % n, j = 0;
        if (k < n)
            perm[j++] = who;
        for (int i = 0; i < n; i++)
            if (i != who)
                perm[j++] = i;
        if (k >= n)
            perm[j++] = who;
        return;
    }
    int left[MAX_MODELS], n_left = n, fact = 1;
    for (int i = 0; i < n; i++)
        left[i] = i;
    for (int i = 2; i < n; i++)
        fact *= i;
    for (int j = 0; j < n; j++) {
        int q = fact ? k / fact : 0;
        k = fact ? k % fact : 0;
        perm[j] = left[q];
        memmove(&left[q], &left[q + 1], (size_t)(n_left - q - 1) * sizeof left[0]);
        n_left--;
        if (n_left > 1)
            fact /= n_left;
        else
            fact = 1;
    }
}

/* ---- output ---- */

static void json_str(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            printf("\\%c", ch);
        else if (ch < 0x20)
            printf("\\u%04x", ch);
        else
            putchar(ch);
    }
    putchar('"');
}

static const char *basename_of(const char *p)
{
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}


/* "GPU:1, GPU:0": the k-th start order. */
static const char *order_text(const struct fit *f, int k, char *buf, size_t cap)
{
    int perm[MAX_MODELS];
    size_t len = 0;
    vdev_fit_order_of(f->n, k, perm);
    buf[0] = '\0';
    for (int j = 0; j < f->n && len < cap; j++)
        len += (size_t)snprintf(buf + len, cap - len, "%sGPU:%d", j ? ", " : "", perm[j]);
    return buf;
}

/* How the orders were checked, for the table and --help. */
static const char *orders_text(const struct fit *f, char *buf, size_t cap)
{
    if (f->n_orders == 0)
        snprintf(buf, cap, "peak-aligned round-robin: one model, at its peak");
    else if (f->n > ALL_ORDERS_UP_TO)
        snprintf(buf, cap,
                 "peak-aligned round-robin, then each model started first and each last (%d "
                 "start orders: all %d! are too many to run)",
                 f->n_orders, f->n);
    else
        snprintf(buf, cap, "peak-aligned round-robin, then every order of the models' starts (%d)",
                 f->n_orders);
    return buf;
}

void vdev_fit_print_json(const struct fit *f, const struct report *r)
{
    printf("{\"card\": {\"name\": ");
    json_str(f->label);
    printf(", \"total_bytes\": %llu, \"budget_bytes\": %llu}, \"policy\": \"%s\", "
           "\"interleaving\": \"peak-aligned round-robin\", \"start_orders\": %d, "
           "\"failing_order\": ",
           (unsigned long long)f->card, (unsigned long long)f->budget,
           f->growth ? "growth" : "preallocate", f->n_orders);
    if (r->bad_order >= 0) {
        int perm[MAX_MODELS];
        vdev_fit_order_of(f->n, r->bad_order, perm);
        for (int j = 0; j < f->n; j++)
            printf("%s%d", j ? ", " : "[", perm[j]);
        printf("]");
    } else
        printf("null");
    printf(", \"all_fit\": %s, \"models\": [", vdev_fit_all_fit(r->o, f->n) ? "true" : "false");
    for (int i = 0; i < f->n; i++) {
        const struct model *m = &f->m[i];
        const struct outcome *o = &r->o[i];
        uint64_t ceiling = m->cfg.ceiling_bytes ? m->cfg.ceiling_bytes : f->budget;
        printf("%s\n  {\"trace\": ", i ? "," : "");
        json_str(m->path);
        printf(", \"device\": \"/device:GPU:%d\", \"floor_bytes\": %llu, \"ceiling_bytes\": %llu, "
               "\"priority\": \"%s\", \"fits\": %s, \"failed_at_line\": ",
               i, (unsigned long long)m->cfg.floor_bytes, (unsigned long long)ceiling,
               vdev_priority_name(m->cfg.priority), o->fits ? "true" : "false");
        if (o->fits)
            printf("null, \"error\": null");
        else {
            printf("%u, \"error\": ", o->failed_line);
            json_str(o->error);
        }
        printf(", \"peak_in_use_bytes\": %llu, \"peak_reserved_bytes\": %llu",
               (unsigned long long)o->peak_in_use, (unsigned long long)o->peak_reserved);
        if (r->searched && r->smallest[i])
            printf(", \"smallest_limit_bytes\": %llu, \"margin_bytes\": %lld}",
                   (unsigned long long)r->smallest[i],
                   (long long)ceiling - (long long)r->smallest[i]);
        else
            printf(", \"smallest_limit_bytes\": null, \"margin_bytes\": null}");
    }
    printf("\n], \"min_card_bytes\": ");
    if (r->searched) {
        printf("{\"growth\": %llu, \"preallocate\": %llu, \"preallocate_limits_bytes\": [",
               (unsigned long long)r->card_grow, (unsigned long long)r->card_pre);
        for (int i = 0; i < f->n; i++)
            printf("%s%llu", i ? ", " : "", (unsigned long long)r->pre_cap[i]);
        printf("]}}\n");
    } else
        printf("null}\n");
}

void vdev_fit_print_table(const struct fit *f, const struct report *r)
{
    char b1[32], b2[32], b3[32], b4[32], b6[32], ot[160];
    printf("card      %s: %s, budget %s (simulated, one logical device per trace), %s\n",
           f->label, vdev_format_bytes(f->card, b1, sizeof b1),
           vdev_format_bytes(f->budget, b2, sizeof b2), f->growth ? "growth" : "preallocation");
    if (f->budget == f->card && !f->user_reserve)
        printf("reserve   none: the card is too small for the 225.00 MiB driver reserve, so none "
               "is left aside, as TensorFlow\n");
    printf("order     %s\n\n", orders_text(f, ot, sizeof ot));
    int w = 22; /* the whole name of each trace */
    for (int i = 0; i < f->n; i++)
        if ((int)strlen(basename_of(f->m[i].path)) > w)
            w = (int)strlen(basename_of(f->m[i].path));
    printf("%-7s %-*s %-10s %-10s %-8s %-5s %-11s %-13s %-14s %s\n", "device", w, "trace", "floor",
           "ceiling", "priority", "fits", "peak in use", "peak reserved", "smallest limit",
           "margin");
    for (int i = 0; i < f->n; i++) {
        const struct model *m = &f->m[i];
        const struct outcome *o = &r->o[i];
        uint64_t ceiling = m->cfg.ceiling_bytes ? m->cfg.ceiling_bytes : f->budget;
        char dev[16], margin[48] = "-", small[32] = "-";
        snprintf(dev, sizeof dev, "GPU:%d", i);
        if (r->searched && r->smallest[i]) {
            if (r->smallest[i] % MIB == 0) /* whole MiB, as --split takes it */
                snprintf(small, sizeof small, "%lluMiB",
                         (unsigned long long)(r->smallest[i] / MIB));
            else /* the ceiling itself: no whole MiB under it fits */
                vdev_format_bytes(r->smallest[i], small, sizeof small);
            if (ceiling >= r->smallest[i])
                vdev_format_bytes(ceiling - r->smallest[i], margin, sizeof margin);
            else
                snprintf(margin, sizeof margin, "short by %s",
                         vdev_format_bytes(r->smallest[i] - ceiling, b6, sizeof b6));
        } else if (r->searched) {
            snprintf(small, sizeof small, "none");
        }
        printf("%-7s %-*s %-10s %-10s %-8s %-5s %-11s %-13s %-14s %s\n", dev,
               w, basename_of(m->path), vdev_format_bytes(m->cfg.floor_bytes, b1, sizeof b1),
               vdev_format_bytes(ceiling, b2, sizeof b2), vdev_priority_name(m->cfg.priority),
               o->fits ? "yes" : "no", vdev_format_bytes(o->peak_in_use, b3, sizeof b3),
               vdev_format_bytes(o->peak_reserved, b4, sizeof b4), small, margin);
    }
    if (r->bad_order >= 0)
        printf("\nthe round robin fits, but not when the models start in the order %s (each up "
               "to its peak before the next starts): a growing region is cut to what the card "
               "has left, so what fits depends on who holds the card first\n",
               order_text(f, r->bad_order, ot, sizeof ot));
    for (int i = 0; i < f->n; i++)
        if (!r->o[i].fits) {
            if (r->o[i].failed_line)
                printf("\nGPU:%d fails at line %u of %s: %s\n", i, r->o[i].failed_line,
                       f->m[i].path, r->o[i].error);
            else
                printf("\nGPU:%d fails before its trace, allocating its %u blocks live before "
                       "recording: %s\n",
                       i, f->m[i].n_pre, r->o[i].error);
        }
    if (r->searched) {
        /* Whole MiB, as --card takes them, and the split the preallocation
         * answer assumes, as --split takes it. */
        char g[64] = "none", pa[64] = "none";
        if (r->card_grow)
            snprintf(g, sizeof g, "%lluMiB (%s)", (unsigned long long)(r->card_grow / MIB),
                     vdev_format_bytes(r->card_grow, b1, sizeof b1));
        if (r->card_pre)
            snprintf(pa, sizeof pa, "%lluMiB (%s)", (unsigned long long)(r->card_pre / MIB),
                     vdev_format_bytes(r->card_pre, b2, sizeof b2));
        printf("\nsmallest card for these traces side by side: growth %s, preallocation %s", g, pa);
        if (r->card_grow && r->card_pre && r->card_grow != r->card_pre)
            printf("; %s needs %lluMiB more\n",
                   r->card_grow > r->card_pre ? "growth" : "preallocation",
                   (unsigned long long)((r->card_grow > r->card_pre ? r->card_grow - r->card_pre
                                                                    : r->card_pre - r->card_grow) /
                                        MIB));
        else
            printf("\n");
        if (r->card_pre) {
            printf("preallocation: each model's device preallocated to the smallest region it "
                   "fits in: --preallocate --split ");
            for (int i = 0; i < f->n; i++)
                printf("%s%lluMiB", i ? "," : "", (unsigned long long)(r->pre_cap[i] / MIB));
            printf("\n");
        }
    }
}
