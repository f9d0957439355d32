/* scratch.c — the host memory an optimizer update works in, one block per
 * thread. An update of more variables than its stack arrays hold (the
 * operand lists, the held tensors, the in-place op's records) takes them
 * from the calling thread's block, which vdev_optimizer_prepare grows ahead:
 * the mirrored strategy prepares every replica, has them agree, then applies,
 * and an apply after the agreement must not fail for want of host memory.
 * The block is kept for the thread's next update (a training loop's steps
 * reuse it) and freed when the thread ends. */
#include "nn/optim.h"

#include <pthread.h>
#include <stddef.h>

struct block {
    size_t bytes;
    max_align_t mem[];
};

static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static pthread_key_t key;
static int key_made;

static void block_free(void *b) { free(b); }
static void make_key(void) { key_made = pthread_key_create(&key, block_free) == 0; }

void *vdev_nn_thread_scratch(size_t bytes)
{
    pthread_once(&key_once, make_key);
    if (!key_made) {
        vdev_error(VDEV_ERR_OOM, "out of host memory for an update's scratch (no thread key)");
        return NULL;
    }
    struct block *b = pthread_getspecific(key);
    if (b && b->bytes >= bytes)
        return b->mem;
    struct block *nb = vdev_malloc(sizeof *nb + bytes);
    if (!nb || pthread_setspecific(key, nb) != 0) {
        free(nb);
        vdev_error(VDEV_ERR_OOM, "out of host memory for an update's scratch of %zu bytes",
                   bytes);
        return NULL;
    }
    nb->bytes = bytes;
    free(b);
    return nb->mem;
}
