/* stream_gate.h — a gate for the tests of stream order: a host function
 * queued on a stream that holds it until the test opens the gate, so that
 * what the test queues after it on that stream waits, and the test can look
 * at what a call did before the stream ran (a test that fails still ends:
 * the gate opens by itself after 120 s). One gate per test program. */
#ifndef VDEV_TEST_STREAM_GATE_H
#define VDEV_TEST_STREAM_GATE_H

#include "check.h"
#include "backend/backend.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

struct gate {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int open;
    atomic_int entered;
};

static struct gate gate = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0};

static inline void gate_fn(void *arg)
{
    struct gate *g = *(struct gate **)arg;
    atomic_store(&g->entered, 1);
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += 120; /* never forever, even when the test fails */
    pthread_mutex_lock(&g->lock);
    while (!g->open && pthread_cond_timedwait(&g->cond, &g->lock, &dl) != ETIMEDOUT)
        ;
    pthread_mutex_unlock(&g->lock);
}

/* Closes the gate: the next gate_block holds its stream. */
static inline void gate_close(void)
{
    pthread_mutex_lock(&gate.lock);
    gate.open = 0;
    atomic_store(&gate.entered, 0);
    pthread_mutex_unlock(&gate.lock);
}

static inline void gate_open(void)
{
    pthread_mutex_lock(&gate.lock);
    gate.open = 1;
    pthread_cond_broadcast(&gate.cond);
    pthread_mutex_unlock(&gate.lock);
}

/* Holds stream q of backend b until gate_open(); returns once it is held. */
static inline void gate_block(const struct vdev_backend *b, int q)
{
    struct gate *g = &gate;
    CHECK_OK(vdev_backend_submit_host(b, q, gate_fn, &g, sizeof g));
    CHECK(check_wait_flag(&gate.entered));
}

#endif /* VDEV_TEST_STREAM_GATE_H */
