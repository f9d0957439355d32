/* alloc_pressure.c — the calls of a pool member's pressure callback, counted
 * while they run, so that replacing the callback can wait for them.
 *
 * A C caller that replaces its callback (or removes it) and then frees the
 * old `user` must know that no call still uses it. So a call reads the
 * member's callback and user under the pool's lock when it is made (not
 * when the pressure was seen: a call gathered earlier goes to the callback
 * in place then), and puts a record of itself, on its own stack, into the
 * member's list of calls under way, with the member's epoch (which counts
 * the callbacks set); it takes the record out when the callback returns.
 * vdev_pressure_set installs the new pair, moves the epoch on and waits,
 * on the pool's condition, until no call of an earlier epoch is under way.
 * Two calls it cannot wait for: those on its own thread (a callback that
 * replaces a callback, its own included, returns only after this does), and
 * those on a thread that is itself in vdev_pressure_set (two callbacks that
 * replace each other's, or their own, on two threads would otherwise wait
 * for each other forever). Each thread keeps a list of the calls it is
 * inside, innermost first, and marks them "replacing" while it waits, so
 * that every waiter skips them. The waiter holds no lock but the pool's, and
 * that only inside pthread_cond_wait, so a callback under way can go on
 * calling vdev (another allocation, another pressure call) while it waits.
 * The same list tells a pressure that a callback's own calls meet on its
 * own member: that one is not told (the callback would run inside itself,
 * and one that lowers its own ceiling on CEILING would recurse forever). */
#include "alloc/alloc_impl.h"

/* A call under way, on the stack of the thread making it. */
struct vdev_pcall {
    struct vdev_pcall *next;  /* the member's other calls under way */
    struct vdev_pcall *outer; /* the calls under way on this thread that this one is inside */
    pthread_mutex_t *lock;    /* its pool's lock, which guards `next` and `replacing` */
    pthread_cond_t *done;
    const struct vdev_pressure_slot *slot; /* the member it calls */
    uint64_t epoch;           /* the member's epoch when it was made */
    int replacing;            /* its thread is in vdev_pressure_set: nobody waits for it */
};

static _Thread_local struct vdev_pcall *my_calls;

void vdev_pressure_call(struct vdev_pressure_slot *s, pthread_mutex_t *lock, pthread_cond_t *done,
                        const char *device, enum vdev_pressure what, uint64_t bytes)
{
    /* A pressure that the member's callback meets through its own calls
     * (lowering its own device's ceiling, say) is not told to it again:
     * that would call it inside itself, without end when it does the same
     * again. */
    for (const struct vdev_pcall *in = my_calls; in; in = in->outer)
        if (in->slot == s)
            return;
    struct vdev_pcall c = {.lock = lock, .done = done, .slot = s};
    pthread_mutex_lock(lock);
    vdev_pressure_fn fn = s->fn;
    void *user = s->user;
    if (fn) {
        c.epoch = s->epoch;
        c.next = s->calls;
        s->calls = &c;
    }
    pthread_mutex_unlock(lock);
    if (!fn)
        return;
    c.outer = my_calls;
    my_calls = &c;
    fn(device, what, bytes, user);
    my_calls = c.outer;
    pthread_mutex_lock(lock);
    struct vdev_pcall **at = &s->calls;
    while (*at != &c)
        at = &(*at)->next;
    *at = c.next;
    pthread_cond_broadcast(done);
    pthread_mutex_unlock(lock);
}

/* Marks (or unmarks) the calls this thread is inside as replacing, and wakes
 * whoever waits for them. */
static void mark_replacing(int on)
{
    for (struct vdev_pcall *c = my_calls; c; c = c->outer) {
        pthread_mutex_lock(c->lock);
        c->replacing = on;
        pthread_cond_broadcast(c->done);
        pthread_mutex_unlock(c->lock);
    }
}

/* A call made before epoch is under way, on a thread that is not replacing
 * a callback itself. Lock held. */
static int old_call_running(const struct vdev_pressure_slot *s, uint64_t epoch)
{
    for (const struct vdev_pcall *c = s->calls; c; c = c->next)
        if (c->epoch < epoch && !c->replacing)
            return 1;
    return 0;
}

void vdev_pressure_set(struct vdev_pressure_slot *s, pthread_mutex_t *lock, pthread_cond_t *done,
                       vdev_pressure_fn fn, void *user)
{
    pthread_mutex_lock(lock);
    s->fn = fn;
    s->user = user;
    uint64_t epoch = ++s->epoch;
    pthread_mutex_unlock(lock);
    mark_replacing(1);
    pthread_mutex_lock(lock);
    while (old_call_running(s, epoch))
        pthread_cond_wait(done, lock);
    pthread_mutex_unlock(lock);
    mark_replacing(0);
}
