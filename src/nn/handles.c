/* handles.c — the checks every handle of src/nn (optimizers, layers,
 * models) goes through: a live handle of its own table, made by this
 * runtime (not one shut down since, not a forked parent's), killed once;
 * and the (out, cap) pairs of the calls that list things. Shared by nn.c and
 * layers.c (declared in nn/nn.h), so each kind refuses a freed or foreign
 * handle in the same words. */
#include "nn/nn.h"
#include "runtime/runtime.h"

#include <string.h>

/* "a" or "an" before word. */
static const char *article(const char *word)
{
    return strchr("aeiou", word[0]) && word[0] ? "an" : "a";
}

uint32_t vdev_nn_runtime(void)
{
    if (vdev_is_initialized()) /* first: a start-up counts before it says it runs */
        return vdev_runtime_generation();
    return vdev_runtime_generation() + 1;
}

void *vdev_nn_object_any(struct vdev_handle_table *tb, const void *h, const char *fn)
{
    void *p = vdev_handle_get(tb, h);
    if (!p) {
        if (h)
            vdev_error(VDEV_ERR_INVALID_ARG, "%s: not a live %s (freed already, or not %s %s)",
                       fn, tb->what, article(tb->what), tb->what);
        else
            vdev_error(VDEV_ERR_INVALID_ARG, "%s: %s is NULL", fn, tb->what);
    }
    return p;
}

/* The object behind handle h of table tb for `fn`, or NULL with
 * VDEV_ERR_INVALID_ARG naming what is wrong: as vdev_strategy's handles, one
 * made before vdev_shutdown is refused (one made while no runtime runs is
 * taken until the next start-up, and while that runtime runs), and in a
 * forked child every one is, with the fork error (VDEV_ERR_UNSUPPORTED). */
void *vdev_nn_object_of(struct vdev_handle_table *tb, const void *h, const char *fn)
{
    const struct vdev_nn_head *p = vdev_nn_object_any(tb, h, fn);
    if (p && vdev_runtime_refuse_forked(fn)) /* the parent's: its devices stayed there */
        return NULL;
    if (p && p->rgen != vdev_nn_runtime()) {
        vdev_error(VDEV_ERR_INVALID_ARG,
                   "%s: the %s belongs to a runtime that was shut down (made before "
                   "vdev_shutdown)",
                   fn, tb->what);
        return NULL;
    }
    return (void *)(uintptr_t)p;
}

/* Kills live handle h of p; 0 with the error set when another caller did. */
int vdev_nn_kill_handle(struct vdev_handle_table *tb, void *p, const void *h, const char *fn)
{
    if (vdev_handle_kill(tb, p, (uint64_t)(uintptr_t)h))
        return 1;
    vdev_error(VDEV_ERR_INVALID_ARG, "%s: not a live %s (freed already, or not %s %s)", fn,
               tb->what, article(tb->what), tb->what);
    return 0;
}

/* An (out, cap) pair of a call that fills at most cap of out and returns how
 * many there are: out may be NULL only with cap 0. 0 with VDEV_ERR_INVALID_ARG
 * naming fn otherwise. */
int vdev_nn_out_fits(const void *out, int cap, const char *fn)
{
    if (cap >= 0 && (cap == 0 || out))
        return 1;
    vdev_error(VDEV_ERR_INVALID_ARG, "%s: out is %s and cap %d (out may be NULL only with cap 0)",
               fn, out ? "set" : "NULL", cap);
    return 0;
}
