/* scratch.c — the host memory an optimizer update works in, one block per
 * thread. An update of more variables than its stack arrays hold (the
 * operand lists, the held tensors, the in-place op's records) takes them
 * from the calling thread's block, which vdev_optimizer_prepare grows ahead:
 * the mirrored strategy prepares every replica, has them agree, then applies,
 * and an apply after the agreement must not fail for want of host memory.
 * The block is kept for the thread's next update (a training loop's steps
 * reuse it) and freed when the thread ends. An update made while the block is
 * taken (from a pressure callback that an outer update's allocation set off,
 * which may call vdev) gets a block of its own, freed when it ends, so the
 * outer update's block is never moved under it. */
#include "nn/optim.h"

#include <pthread.h>
#include <stddef.h>

struct block {
    size_t bytes;
    int taken;
    max_align_t mem[];
};

static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static pthread_key_t key;
static int key_made;

static void block_free(void *b) { free(b); }
static void make_key(void) { key_made = pthread_key_create(&key, block_free) == 0; }

static struct block *thread_block(void)
{
    pthread_once(&key_once, make_key);
    return key_made ? pthread_getspecific(key) : NULL;
}

static enum vdev_status no_memory(size_t bytes)
{
    return vdev_error(VDEV_ERR_OOM, "out of host memory for an update's scratch of %zu bytes",
                      bytes);
}

enum vdev_status vdev_nn_scratch_reserve(size_t bytes)
{
    struct block *b = thread_block();
    if (!key_made)
        return no_memory(bytes);
    if ((b && b->bytes >= bytes) || (b && b->taken))
        return VDEV_OK; /* large enough, or taken by an outer update: left as it is */
    struct block *nb = vdev_malloc(sizeof *nb + bytes);
    if (!nb || pthread_setspecific(key, nb) != 0) {
        free(nb);
        return no_memory(bytes);
    }
    nb->bytes = bytes;
    nb->taken = 0;
    free(b);
    return VDEV_OK;
}

void *vdev_nn_scratch_take(size_t bytes)
{
    struct block *b = thread_block();
    if (!b || !b->taken) {
        if (vdev_nn_scratch_reserve(bytes) != VDEV_OK)
            return NULL;
        b = pthread_getspecific(key);
        b->taken = 1;
        return b->mem;
    }
    /* the thread's block is an outer update's: one of this update's own */
    struct block *own = vdev_malloc(sizeof *own + bytes);
    if (!own) {
        no_memory(bytes);
        return NULL;
    }
    own->bytes = bytes;
    own->taken = 1;
    return own->mem;
}

void vdev_nn_scratch_give(void *p)
{
    if (!p)
        return;
    struct block *b = (struct block *)(void *)((char *)p - offsetof(struct block, mem));
    if (key_made && pthread_getspecific(key) == b)
        b->taken = 0;
    else
        free(b);
}
